"""What a member does of its own accord, on its own clock rather than a client's request:
watch its quorum and switch to read-only without one (`mode`), note in the log a period
it spent without one (`quorum_notes`), name itself when elected (`leader_note`), expire
sessions whose deadlines passed (`session_tracker`, the leader's), compact the history
(`compaction`) and guard its space (`quota`); `periodic` runs them from the member's start
to its stop. Each proposes through the callable server/member.py hands it (the
coordinator's write), so nothing here imports the request path, which reads their state
(the mode, the deadlines) from below."""
