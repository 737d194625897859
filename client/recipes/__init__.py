"""Client recipes, one small module each (kazoo's `kazoo.recipe`): patterns built on the
client's calls, for applications and coord's own tools.

`bulk_own` (claim many resources in batches, reporting progress), `sequence` (the
per-(pid, partition) sequence rule a sink embeds: `SequenceValidator`) and `fence` (a
sink's judgement of a fenced writer's token, on that rule). Nothing here is imported by
`import coord.client` except `sequence`, which is as light (it names no grpc).
"""
