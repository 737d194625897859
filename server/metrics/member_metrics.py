"""One member's metrics: etcd's names where the meaning is the same (so etcd's dashboards
and alerts read a coord cluster), coord's own for what etcd has not, and the endpoint that
serves them with the health checks (`MemberMetrics.start`).

Most values are read from the member's state when Prometheus scrapes (`collect`); what
cannot be (durations, events, transitions) is tallied as it happens, through hooks the
member's parts offer, set here only while metrics are on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from coord.server.api.console_views import storage_bytes
from coord.server.forward.link import LeaderLink
from coord.server.metrics import health
from coord.server.metrics.endpoint import JSON, TEXT, Answer, HttpEndpoint
from coord.server.metrics.events import EventCounts
from coord.server.metrics.grpc_calls import GrpcCalls
from coord.server.metrics.peer_probe import PeerProbe
from coord.server.metrics.tally import (
    BATCH_BUCKETS,
    ETCD_DISK_BUCKETS,
    SNAPSHOT_BUCKETS,
    Tally,
    family,
)
from coord.server.node.driver import Node
from coord.server.requests.events import EventHub
from coord.server.storage.log_store import LogStore
from coord.server.upkeep.mode import NO_QUORUM, READ_ONLY, READ_WRITE, ModeChange, ModeMonitor
from coord.server.upkeep.periodic import Background
from coord.sm.machine import CoordMachine

MODES = (READ_WRITE, READ_ONLY, NO_QUORUM)


class MemberMetrics:
    """The member's registry (its metrics, and the process's as prometheus_client gives
    them), the tallies its parts feed, and the HTTP endpoint on `urls`."""

    def __init__(self, urls: list[str], *, node: Node, machine: CoordMachine,
                 mode: ModeMonitor, hub: EventHub, store: LogStore, link: LeaderLink,
                 quota_bytes: int) -> None:
        self.node, self.machine, self.mode, self.link = node, machine, mode, link
        self.data_path: Path = store.path
        self.quota_bytes = quota_bytes
        self.grpc = GrpcCalls()
        self.wal_fsync = Tally(ETCD_DISK_BUCKETS)
        self.backend_commit = Tally(ETCD_DISK_BUCKETS)
        self.snapshot_seconds = Tally(SNAPSHOT_BUCKETS)
        self.snapshot_bytes = 0
        self.pipeline_ops = Tally(BATCH_BUCKETS)
        self.leader_changes = 0
        self.mode_changes: dict[str, int] = dict.fromkeys(MODES, 0)  # 0s: increase() works
        self.events = hub.watch_tables(EventCounts())
        store.on_commit = self._committed
        node.snapshot_listeners.append(self._snapshot_taken)
        mode.listeners.append(self._mode_changed)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=self.registry)
        self.endpoint = HttpEndpoint(urls, {"/metrics": self._metrics, "/health": self._health,
                                            "/livez": self._livez, "/readyz": self._readyz})
        self.peers = PeerProbe(node, link)
        self._leaders = Background(f"leader-changes-{node.me.name}", self._count_leader_changes)

    async def start(self) -> None:
        await self.endpoint.start()
        self._leaders.start()
        self.peers.loop.start()

    @property
    def urls(self) -> list[str]:
        """The URLs served, each with the port it bound (port 0 takes a free one)."""
        return [f"http://{host if ':' not in host else f'[{host}]'}:{port}"
                for (host, _), port in zip(self.endpoint.addresses, self.endpoint.ports,
                                           strict=False)]

    async def stop(self) -> None:
        await self.endpoint.stop()
        await self._leaders.stop()
        await self.peers.loop.stop()

    # -- what is tallied as it happens ------------------------------------------------------
    def _committed(self, transaction_s: float, commit_s: float, synced: bool) -> None:
        """A store write (on the storage thread or the loop, under the store's lock)."""
        self.backend_commit.observe(transaction_s)
        if synced:
            self.wal_fsync.observe(commit_s)

    def _snapshot_taken(self, size: int, seconds: float) -> None:
        self.snapshot_seconds.observe(seconds)
        self.snapshot_bytes += size

    def _mode_changed(self, change: ModeChange) -> None:
        self.mode_changes[change.mode] = self.mode_changes.get(change.mode, 0) + 1

    async def _count_leader_changes(self) -> None:
        """etcd's count: each time this member learns of a new leader (not of losing one)."""
        last = 0
        async for event in self.node.events():
            if event.leader and event.leader != last:
                self.leader_changes += 1
            last = event.leader or last

    # -- the endpoint's answers ----------------------------------------------------------------
    async def _metrics(self) -> Answer:
        return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)

    async def _health(self) -> Answer:
        ok, body = health.health_body(await self._checks())
        return (200 if ok else 503), JSON, body

    async def _readyz(self) -> Answer:
        ok, body = health.readyz_body(await self._checks())
        return (200 if ok else 503), TEXT, body

    async def _livez(self) -> Answer:
        """The loop answered: the member is alive (whether it can serve is /readyz's)."""
        return 200, TEXT, b"ok\n"

    async def _checks(self) -> list[health.Check]:
        return await health.checks(self.node, self.mode, self.machine)

    # -- what is read when scraped -------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        yield from self._etcd_metrics()
        yield from self.peers.collect()
        yield from self.grpc.collect()
        yield from self._coord_metrics()

    def _etcd_metrics(self) -> Iterator[Metric]:
        node = self.node
        st = node.status()
        yield _gauge("etcd_server_has_leader", "Whether or not a leader exists. 1 is"
                     " existence, 0 is not.", int(st.leader != 0))
        yield _gauge("etcd_server_is_leader", "Whether or not this member is a leader. 1 if"
                     " is, 0 otherwise.", int(node.is_leader))
        yield _counter("etcd_server_leader_changes_seen_total", "The number of leader"
                       " changes seen.", self.leader_changes)
        yield _counter("etcd_server_proposals_committed_total", "The total number of"
                       " consensus proposals committed (the commit index).", st.commit)
        yield _counter("etcd_server_proposals_applied_total", "The total number of consensus"
                       " proposals applied (the applied index).", node.applied_index)
        yield _gauge("etcd_server_proposals_pending", "The current number of pending"
                     " proposals to commit.", node.pending_proposals)
        yield _counter("etcd_server_proposals_failed_total", "The total number of failed"
                       " proposals seen.", node.proposals_failed)
        yield _gauge("etcd_server_id", "Server or member ID in hexadecimal format. 1 for"
                     " 'server_id' label with current ID.", 1, ["server_id"], [f"{node.id:x}"])
        yield family("etcd_disk_wal_fsync_duration_seconds", "The latency distributions of"
                     " fsync called by WAL (the log's durable COMMIT).",
                     [((), self.wal_fsync)])
        yield family("etcd_disk_backend_commit_duration_seconds", "The latency distributions"
                     " of commit called by backend (every write transaction of the log"
                     " store).", [((), self.backend_commit)])
        yield _gauge("etcd_mvcc_db_total_size_in_bytes", "Total size of the underlying"
                     " database physically allocated in bytes (the log store with its WAL).",
                     storage_bytes(self.data_path))
        yield _gauge("etcd_server_quota_backend_bytes", "Current backend storage quota size"
                     " in bytes (0: no quota).", self.quota_bytes)

    def _coord_metrics(self) -> Iterator[Metric]:
        machine, mode = self.machine, self.mode
        yield _gauge("coord_read_only", "1 while this member serves in read-only mode (cut"
                     " off from a quorum).", int(mode.mode == READ_ONLY))
        modes = GaugeMetricFamily("coord_mode", "This member's mode: 1 for the current one.",
                                  labels=["mode"])
        for m in MODES:
            modes.add_metric([m], int(mode.mode == m))
        yield modes
        yield _labelled_counter("coord_mode_changes_total", "Switches of this member's mode,"
                                " by the mode switched to.", "mode", self.mode_changes)
        yield _counter("coord_quorum_losses_total", "Times this member lost sight of a"
                       " quorum.", self.node.quorum_losses)
        yield _gauge("coord_sessions", "Sessions open (replicated state).",
                     len(machine.sessions))
        yield _labelled_counter("coord_sessions_ended_total", "Sessions ended, by reason"
                                " (released, expired, severed), as applied here.", "reason",
                                self.events.sessions_ended)
        owned = GaugeMetricFamily("coord_owned_resources", "Owned resources per group.",
                                  labels=["group"])
        for group, n in sorted(machine.ownership.owned_per_group().items()):
            owned.add_metric([group], n)
        yield owned
        changes = CounterMetricFamily(
            "coord_ownership_changes_total", "Ownership changes applied here, per group and"
            " kind: grant (a claim), reset (a claim at generation 0: the generation restarts),"
            " release, expire (its session expired), sever (the session was severed).",
            labels=["group", "kind"])
        for (group, kind), n in sorted(self.events.ownership.items()):
            changes.add_metric([group, kind], n)
        yield changes
        pids = machine.pids
        yield _counter("coord_pids_issued_total", "Producer ids issued (blocks, leases and"
                       " producers: one sequence).", pids.next_pid - 1)
        yield _gauge("coord_pid_leases", "PID leases held in the lease ring.", len(pids.ring))
        yield _gauge("coord_pid_lease_capacity", "The lease ring's capacity.",
                     pids.ring.capacity)
        yield _gauge("coord_producers", "Producer identities known.", len(pids.producers))
        yield _counter("coord_producer_fencings_total", "Producer instances fenced by a newer"
                       " init (the producers' generations added up).",
                       sum(generation for _, generation in pids.producers.values()))
        yield family("coord_snapshot_duration_seconds", "Time to take a snapshot (capture,"
                     " encode, store).", [((), self.snapshot_seconds)])
        yield _counter("coord_snapshot_bytes_total", "Bytes of the snapshots taken.",
                       self.snapshot_bytes)
        yield _gauge("coord_revision", "The state's revision (etcd's header revision).",
                     machine.revision)
        yield _gauge("coord_compact_revision", "The revision the history is compacted to.",
                     machine.kv.compact_revision)
        alarms = GaugeMetricFamily("coord_alarms", "Members with an alarm raised, by kind"
                                   " (replicated: every member reports the same).",
                                   labels=["alarm"])
        raised: dict[str, int] = {"NOSPACE": 0}
        for _, kind in machine.alarms.active():
            raised[kind] = raised.get(kind, 0) + 1
        for kind, n in sorted(raised.items()):
            alarms.add_metric([kind], n)
        yield alarms
        yield _counter("coord_forwarded_proposals_total", "Writes this member forwarded to"
                       " the leader.", self.link.forwarded)
        yield family("coord_pipeline_message_ops", "Operations per message of the pipelined"
                     " stream.", [((), self.pipeline_ops)])


def _gauge(name: str, doc: str, value: float, labels: list[str] | None = None,
           values: list[str] | None = None) -> GaugeMetricFamily:
    if labels:
        g = GaugeMetricFamily(name, doc, labels=labels)
        g.add_metric(values or [], value)
        return g
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _labelled_counter(name: str, doc: str, label: str,
                      counts: dict[str, int]) -> CounterMetricFamily:
    c = CounterMetricFamily(name, doc, labels=[label])
    for key, n in sorted(counts.items()):
        c.add_metric([key], n)
    return c
