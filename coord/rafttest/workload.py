"""What happens to the cluster each tick besides time passing, drawn from the seed's
profile: crashed members restart when due, partitions heal, and then, each by its own
chance, the workload (proposals at whoever believes it leads, with unique payloads;
ReadIndex requests at any member; leadership transfers and forced campaigns; compactions
at the applied index, so lagging and restarted members catch up by snapshot; membership
changes: remove a voter, add it back, add a learner, promote it) and the faults
(partitions: a member isolated, often the leader, the cluster split in two, one-way
links; crashes, now or at a stage of the member's next Ready)."""

from __future__ import annotations

from coord.raft.errors import NotLeaderError, ProposalDroppedError
from coord.raft.types import ConfChange, ConfChangeType
from coord.rafttest.cluster import CRASH_STAGES, Cluster
from coord.rafttest.member import Disk
from coord.rafttest.network import SUBSTEPS, Link
from coord.rafttest.outcome import InvariantViolation


def step(c: Cluster) -> None:
    """This tick's restarts, heals, workload and faults (the cluster's `round` follows)."""
    rng, p = c.rng, c.p
    c.now = c.tick * SUBSTEPS
    for node in c.nodes.values():
        if node.raw is None and node.disk is not None and node.restart_at <= c.tick:
            c.restart(node)
    if c.net.heal(c.tick):
        c.trace("partition heals" + (" (some remain)" if c.net.partitions else ""))
    for chance, event in ((p.propose, _propose), (p.read, _read), (p.transfer, _transfer),
                          (p.transfer / 2, _campaign), (p.compact, _compact),
                          (p.conf, _change_membership), (p.partition, _partition),
                          (p.crash, _crash)):
        if rng.random() < chance:
            event(c)


def _crash(c: Cluster) -> None:
    alive = c.alive()
    leaders = c.leaders()
    if alive:
        node = c.rng.choice(leaders if leaders and c.rng.random() < 0.5 else alive)
        if c.rng.random() < 0.5:
            c.crash(node, "while idle")
        else:
            node.crash_stage = c.rng.randrange(len(CRASH_STAGES))


def _propose(c: Cluster) -> None:
    leaders = c.leaders()
    if not leaders:
        return
    node = c.rng.choice(leaders)
    payloads = []
    for _ in range(c.rng.choice([1, 1, 1, 2, 4])):
        c.counter += 1
        payloads.append(b"p%d" % c.counter)
    try:
        index, term = node.raw.propose(payloads)  # type: ignore[union-attr]
    except (NotLeaderError, ProposalDroppedError) as e:
        c.trace(f"{node.id} refuses proposal: {e}")
        return
    c.check.proposed(node, payloads, index)
    c.stats.proposed += len(payloads)
    if c.rng.random() < c.p.isolate_proposer:
        _partition(c, victim=node.id)  # its new entries stay on its log alone
    c.trace(f"{node.id} proposes {len(payloads)} at {index} (term {term})")


def _read(c: Cluster) -> None:
    alive = c.alive()
    if not alive:
        return
    node = c.rng.choice(alive)
    c.counter += 1
    ctx = b"r%d" % c.counter
    c.stats.reads += 1
    c.trace(f"{node.id} read-index {ctx.decode()} (committed so far: {c.check.max_commit})")
    c.check.read_asked(node, ctx)
    node.raw.read_index(ctx)  # type: ignore[union-attr]
    c.observe(node)


def _transfer(c: Cluster) -> None:
    alive = c.alive()
    if not alive:
        return
    node = c.rng.choice(alive)
    voters = sorted(node.raw.raft.conf.voters)  # type: ignore[union-attr]
    if not voters or c.rng.random() < 0.1:
        voters = c.pool  # anyone, even a learner or a stranger: must be ignored
    target = c.rng.choice(voters)
    c.stats.transfers += 1
    c.trace(f"{node.id} asked to transfer leadership to {target}")
    node.raw.transfer_leader(target)  # type: ignore[union-attr]
    c.observe(node)


def _campaign(c: Cluster) -> None:
    alive = c.alive()
    if alive:
        node = c.rng.choice(alive)
        c.trace(f"{node.id} asked to campaign")
        node.raw.campaign()  # type: ignore[union-attr]
        c.observe(node)


def _compact(c: Cluster) -> None:
    ready = [
        n for n in c.alive()
        if n.sm.index - n.disk.snapshot.meta.index >= c.p.compact_gap  # type: ignore[union-attr]
    ]
    if not ready:
        return
    node = c.rng.choice(ready)
    raw, disk = node.raw, node.disk
    assert raw is not None and disk is not None
    index = raw.raft.log.applied
    snap = raw.compact(index, node.sm.snapshot_data())
    if snap.meta.conf_state != raw.raft.conf:
        raise InvariantViolation("snapshot", "snapshot conf state is not the applied one")
    disk.compact(snap)
    c.trace(f"{node.id} compacts at {index}")


def _change_membership(c: Cluster) -> None:
    leaders = c.leaders()
    if not leaders:
        return
    rng = c.rng
    leader = rng.choice(leaders)
    conf = leader.raw.raft.conf  # type: ignore[union-attr]
    options: list[ConfChange] = []
    for learner in sorted(conf.learners):
        options.append(ConfChange(ConfChangeType.ADD_VOTER, learner))
        options.append(ConfChange(ConfChangeType.REMOVE_NODE, learner))
    for outsider in c.pool:
        if outsider not in conf.members:
            options.append(ConfChange(ConfChangeType.ADD_LEARNER, outsider))
            options.append(ConfChange(ConfChangeType.ADD_VOTER, outsider))
    if len(conf.voters) > max(1, c.n - 2):
        for voter in sorted(conf.voters):
            options.append(ConfChange(ConfChangeType.REMOVE_NODE, voter))
    if not options:
        return
    cc = rng.choice(options)
    try:
        index, _ = leader.raw.propose_conf_change(cc)  # type: ignore[union-attr]
    except (NotLeaderError, ProposalDroppedError) as e:
        c.trace(f"{leader.id} refuses {cc.type.name} {cc.node_id}: {e}")
        return
    c.trace(f"{leader.id} proposes {cc.type.name} {cc.node_id} at {index}")
    target = c.nodes[cc.node_id]
    if target.disk is None:  # a brand-new member starts empty and learns everything
        target.disk = Disk()
        c.start(target)
        c.trace(f"START {target.id} (empty)")


def _partition(c: Cluster, victim: int | None = None) -> None:
    rng = c.rng
    ids = [i for i in c.pool if c.nodes[i].disk is not None]
    kind = 0.0 if victim is not None else rng.random()
    links: set[Link] = set()
    if kind < 0.4:
        leaders = [n.id for n in c.leaders()]
        if victim is not None:
            a = victim
        elif leaders and rng.random() < 0.5:
            a = rng.choice(leaders)  # cutting off the leader is the interesting case
        else:
            a = rng.choice(ids)
        links = {(a, b) for b in ids if b != a} | {(b, a) for b in ids if b != a}
        what = f"isolate {a}"
    elif kind < 0.75:
        shuffled = ids[:]
        rng.shuffle(shuffled)
        cut = rng.randint(1, len(ids) - 1)
        left, right = shuffled[:cut], shuffled[cut:]
        links = {(a, b) for a in left for b in right} | {(b, a) for a in left for b in right}
        what = f"split {sorted(left)} | {sorted(right)}"
    else:
        a = rng.choice(ids)
        others = [b for b in ids if b != a]
        targets = rng.sample(others, rng.randint(1, len(others)))
        if rng.random() < 0.5:
            links = {(a, b) for b in targets}
            what = f"one-way: {a} cannot reach {sorted(targets)}"
        else:
            links = {(b, a) for b in targets}
            what = f"one-way: {sorted(targets)} cannot reach {a}"
    heal = c.tick + rng.randint(c.p.election_tick // 2, 8 * c.p.election_tick)
    c.net.cut(links, heal)
    c.stats.partitions += 1
    c.trace(f"PARTITION {what} until tick {heal}")
