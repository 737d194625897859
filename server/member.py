"""One coord member, wired: the storage, the peer transport, the state machine and the
node that drives them, the request path and the member's own jobs (upkeep) on top, and
the two gRPC servers (clients on --listen, peers on --peer-listen), started and stopped
in the right order. The client server also serves the etcd v3 API (etcdserverpb.*), on
--listen and, if given, on --etcd-listen too (with --etcd-only, that API alone).

This module only builds and connects; every part gets what it needs from here rather
than reaching through another part for it."""

from __future__ import annotations

import asyncio
import logging
import signal
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from coord.etcdpb import rpc_pb2 as etcd_pb2
from coord.etcdpb import rpc_pb2_grpc as etcd_grpc
from coord.server import log_lines
from coord.server.api.admin import AdminService
from coord.server.api.history import HistoryService
from coord.server.api.kv import KVService
from coord.server.api.ownership import OwnershipService
from coord.server.api.pipeline import PipelineService
from coord.server.api.producers import ProducersService
from coord.server.api.sessions import SessionsService
from coord.server.config import MemberConfig, plaintext_exposures
from coord.server.etcd.access import EtcdAccess
from coord.server.etcd.auth import EtcdAuthService
from coord.server.etcd.cluster import EtcdClusterService
from coord.server.etcd.kv import EtcdKVService
from coord.server.etcd.lease import EtcdLeaseService
from coord.server.etcd.maintenance import EtcdMaintenanceService
from coord.server.etcd.watch import EtcdWatchService
from coord.server.forward.link import LeaderLink
from coord.server.forward.service import ForwardService
from coord.server.node.driver import Node, NodeOptions
from coord.server.node.identity import claim_data_dir
from coord.server.node.members import MemberInfo
from coord.server.requests.coordinator import Coordinator
from coord.server.requests.events import EventHub
from coord.server.requests.local_sessions import LocalSessions
from coord.server.requests.tokens import TokenKeeper
from coord.server.storage.log_format import db_path
from coord.server.storage.log_store import LogStore
from coord.server.transport.auth import PeerAuth
from coord.server.transport.grpc_options import (
    SERVER_OPTIONS,
    Registrar,
    client_server_options,
)
from coord.server.transport.listener import PeerPort
from coord.server.transport.peer import PeerTransport
from coord.server.upkeep.compaction import AutoCompactor
from coord.server.upkeep.leader_note import LeaderNote
from coord.server.upkeep.quorum_notes import QuorumNotes
from coord.server.upkeep.quota import SpaceGuard, free_bytes
from coord.server.upkeep.session_tracker import SessionTracker
from coord.sm.machine import CoordMachine
from coord.tls.credentials import (
    channel_credentials,
    client_context,
    server_context,
    server_credentials,
)
from coord.tls.files import ServerTLS
from coord.tls.grpc_ciphers import check_grpc_ciphers
from coord.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    coord_pb2,
    coord_pb2_grpc,
    history_pb2,
    history_pb2_grpc,
)

if TYPE_CHECKING:
    from coord.server.metrics.member_metrics import MemberMetrics

log = logging.getLogger(__name__)

OWN_REQUEST_METHODS = tuple(
    f"/{etcd_pb2.DESCRIPTOR.services_by_name['KV'].full_name}/{name}"
    for name in ("Range", "Put", "DeleteRange", "Txn")
)
"""The client port's methods that each keep a pending request of their own in gRPC, so
their calls are admitted alongside the others' (`Registrar` says why): the etcd API's
reads and writes, called once per operation by test rigs with many clients. Not
Compact, nor Lease's (called once per lease, or a stream per client): every pending
request costs each call admitted, those included."""


@dataclass(slots=True)
class NodeParts:
    """A node and the parts it was given, kept so the rest of the member can be handed
    the ones it needs (the peer server the transport, forwarding the credentials, etcd's
    Status the store) and so they are closed after the node, by their owner."""

    node: Node
    store: LogStore
    auth: PeerAuth
    transport: PeerTransport

    async def close(self) -> None:
        """Stop the node, then close what it drove."""
        await self.node.stop()
        await self.transport.close()
        self.store.close()


def open_node(
    me: MemberInfo,
    data_dir: Path,
    machine: CoordMachine,
    initial_cluster: list[MemberInfo],
    cluster_secret: bytes,
    options: NodeOptions,
    join: bool = False,
    cluster_token: str = "coord",
    peer_tls: ssl.SSLContext | None = None,
) -> NodeParts:
    """Open member `me`'s storage in `data_dir`, check it is this member's, and build the
    peer transport and the node over them (not started: `await parts.node.start()`).
    `peer_tls`: the transport opens its connections with TLS (`client_context`)."""
    store = LogStore(db_path(data_dir))
    try:
        cluster_id = claim_data_dir(store, me.name, cluster_token)
        auth = PeerAuth(me.id, cluster_secret, cluster_id)
        transport = PeerTransport(auth, tls=peer_tls, spool_dir=store.snap_dir)
        node = Node(me, store, transport, machine, initial_cluster, cluster_id, options,
                    join=join)
    except BaseException:
        store.close()
        raise
    return NodeParts(node, store, auth, transport)


class Member:
    def __init__(self, config: MemberConfig) -> None:
        self.config = config
        me = next((m for m in config.initial_cluster if m.name == config.name), None)
        if me is None:
            raise ValueError(f"--initial-cluster does not name this member ({config.name!r})")
        if me.peer_address != config.peer_listen:
            log.warning(
                "%s: --peer-listen %s differs from its --initial-cluster address %s",
                config.name,
                config.peer_listen,
                me.peer_address,
            )
        self.me = MemberInfo(me.name, me.peer_address, config.listen)
        # TLS files read and checked before anything opens: a bad one fails the start.
        self.client_credentials = None
        if config.client_tls is not None:
            check_grpc_ciphers(config.client_tls)
            self.client_credentials = server_credentials(config.client_tls)
        peer = config.peer_tls
        self.peer_accepts = server_context(peer) if peer is not None else None
        peer_opens = client_context(peer) if peer is not None else None
        self.machine = CoordMachine()
        self.parts = open_node(
            self.me, config.data_dir, self.machine, config.initial_cluster,
            config.cluster_secret, config.options, join=config.join,
            cluster_token=config.cluster_token, peer_tls=peer_opens,
        )
        self.node, self.store, self.auth = self.parts.node, self.parts.store, self.parts.auth
        self.hub = EventHub(self.machine)
        self.node.apply_listeners.append(self.hub.publish)
        self.link = LeaderLink(
            self.auth, channel_credentials(peer.as_client) if peer is not None else None)
        # etcd's auth tokens, learned as logins apply: who a call on either API is made as
        self.tokens = TokenKeeper(self.machine, config.auth_token_ttl_s)
        self.hub.auth_listeners.append(self.tokens.heard)
        self.coordinator = Coordinator(self.node, self.machine, self.link, config.limits,
                                       self.tokens)
        self.access = EtcdAccess(self.coordinator)
        self.tracker = SessionTracker(self.node, self.machine, self.coordinator.write)
        self.leader_note = LeaderNote(self.node, self.coordinator.write)  # for the history
        # sessions a read-only member opens, registered with the cluster when it is back
        self.local_sessions = LocalSessions(self.coordinator, self.hub.offer_session)
        self.compactor = AutoCompactor(
            config.compaction,
            leading=lambda: self.node.caught_up_leader,
            revisions=lambda: (self.machine.revision, self.machine.kv.compact_revision),
            propose=self.coordinator.write,
            name=config.name,
        )
        store = self.store
        self.space = SpaceGuard(
            config.quota_bytes, self.me.id, self.machine,
            disk_bytes=lambda: asyncio.to_thread(lambda: store.space().used_bytes),
            propose=self.coordinator.write,
            request_snapshot=self.node.request_snapshot,
            name=config.name,
            free_bytes=lambda: asyncio.to_thread(free_bytes, config.data_dir),
            reserve_bytes=config.disk_reserve_bytes,
        )
        self.mode = self.coordinator.mode
        self.mode.enabled = config.read_only_mode
        # Read-only half an election timeout after the Raft signal says the quorum is gone:
        # a normal election rarely takes that long, a partition always does.
        self.mode.grace_s = config.options.election_ticks * config.options.tick_ms / 2000
        self.mode.listeners.append(self.hub.broadcast)
        # periods without a quorum, noted in the log for the history's audit
        self.quorum_notes = QuorumNotes(self.node, self.store.entries, self.coordinator.write)
        self.mode.listeners.append(self.quorum_notes.changed)
        self.health = health.aio.HealthServicer()
        self.metrics: MemberMetrics | None = None
        if config.listen_metrics_urls:
            # imported only when asked for: prometheus_client is tens of ms of every start
            from coord.server.metrics.member_metrics import MemberMetrics

            self.metrics = MemberMetrics(
                config.listen_metrics_urls, node=self.node, machine=self.machine,
                mode=self.mode, hub=self.hub, store=self.store, link=self.link,
                quota_bytes=config.quota_bytes)
        self._servers: list[grpc.aio.Server] = []
        self.peer_port: PeerPort | None = None

    async def start(self) -> None:
        # Every task started from here on stamps its log lines with this member's fields.
        log_lines.bind_member(self._log_fields)
        # The peer port serves Raft itself and passes gRPC (Forward) to this server.
        peer_server = grpc.aio.server(options=SERVER_OPTIONS)
        coord_pb2_grpc.add_ForwardServicer_to_server(
            ForwardService(self.node, self.tracker, self.auth), Registrar(peer_server)
        )
        grpc_port = listen(peer_server, "127.0.0.1:0", "the peer gRPC server")
        self.peer_port = PeerPort(self.parts.transport, ("127.0.0.1", grpc_port),
                                  tls=self.peer_accepts)
        limits = self.config.limits
        client_server = grpc.aio.server(options=client_server_options(
            limits.max_request_bytes, limits.max_concurrent_streams))
        serves = Registrar(client_server, OWN_REQUEST_METHODS,
                           wrap=self.metrics.grpc.wrap if self.metrics else None)
        services = [] if self.config.etcd_only else self._add_coord_services(serves)
        self._add_etcd_services(serves)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, serves)
        services += [s.full_name for s in etcd_pb2.DESCRIPTOR.services_by_name.values()]
        services += [
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        ]
        reflection.enable_server_reflection(services, serves)
        creds = self.client_credentials
        listen(client_server, self.config.listen, "--listen", creds)
        if self.config.etcd_listen:
            listen(client_server, self.config.etcd_listen, "--etcd-listen", creds)
        # Bound before anything starts: a taken port fails the start with nothing running.
        await self.peer_port.start(self.config.peer_listen, "--peer-listen")
        if self.metrics is not None:
            try:
                await self.metrics.start()
            except OSError:
                await self.peer_port.close()
                raise
        self._servers = [peer_server, client_server]
        for s in self._servers:
            await s.start()
        await self.node.start()
        self.leader_note.start()
        self.tracker.start()
        self.local_sessions.start()
        self.compactor.start()
        self.space.start()
        self.mode.start()
        await self.health.set("", health_pb2.HealthCheckResponse.SERVING)
        log.info(
            "%s: serving %s on %s (%s), peers on %s (%s) (data in %s)",
            self.config.name,
            "the etcd v3 API" if self.config.etcd_only else "clients",
            self.config.listen,
            _describe(self.config.client_tls, "client"),
            self.config.peer_listen,
            _describe(self.config.peer_tls, "peer"),
            self.config.data_dir,
        )
        if self.metrics is not None:
            log.info("%s: metrics and health on %s", self.config.name,
                     ", ".join(self.config.listen_metrics_urls))
        for warning in plaintext_exposures(self.config):
            log.warning("%s", warning)

    def _add_coord_services(self, server: Registrar) -> list[str]:
        """coord's native API and Admin; returns their service names."""
        coord, hub = self.coordinator, self.hub
        admin_pb2_grpc.add_AdminServicer_to_server(
            AdminService(self.node, self.machine, self.mode, hub=hub, tracker=self.tracker,
                         data_path=self.store.path, local=self.local_sessions,
                         callers=coord.callers,
                         metrics_urls=lambda: self.metrics.urls if self.metrics else []),
            server
        )
        coord_pb2_grpc.add_SessionsServicer_to_server(
            SessionsService(coord, hub, self.tracker, self.local_sessions), server
        )
        coord_pb2_grpc.add_OwnershipServicer_to_server(OwnershipService(coord, hub), server)
        coord_pb2_grpc.add_ProducersServicer_to_server(ProducersService(coord), server)
        coord_pb2_grpc.add_KVServicer_to_server(KVService(coord, hub), server)
        pipeline = PipelineService(coord)
        if self.metrics is not None:
            pipeline.on_message = self.metrics.pipeline_ops.observe
        coord_pb2_grpc.add_PipelineServicer_to_server(pipeline, server)
        history = HistoryService(coord, self.config.data_dir)
        self.node.apply_listeners.append(history.applied)
        self.mode.listeners.append(history.mode_changed)
        history_pb2_grpc.add_HistoryServicer_to_server(history, server)
        services = [admin_pb2.DESCRIPTOR.services_by_name["Admin"].full_name,
                    history_pb2.DESCRIPTOR.services_by_name["History"].full_name]
        return services + [s.full_name for s in coord_pb2.DESCRIPTOR.services_by_name.values()
                           if s.name != "Forward"]

    def _add_etcd_services(self, server: Registrar) -> None:
        """The etcd v3 API on the same coordinator, event hub and session tracker."""
        coord = self.coordinator
        etcd_grpc.add_AuthServicer_to_server(EtcdAuthService(coord, self.access), server)
        access = self.access
        etcd_grpc.add_KVServicer_to_server(EtcdKVService(coord, access), server)
        etcd_grpc.add_WatchServicer_to_server(
            EtcdWatchService(coord, self.hub, access, self.config.etcd_progress_notify_s),
            server,
        )
        etcd_grpc.add_LeaseServicer_to_server(EtcdLeaseService(coord, self.tracker, access),
                                              server)
        etcd_grpc.add_ClusterServicer_to_server(EtcdClusterService(coord), server)
        etcd_grpc.add_MaintenanceServicer_to_server(
            EtcdMaintenanceService(coord, self.store, access), server
        )

    async def stop(self, grace: float = 1.0) -> None:
        await self.health.enter_graceful_shutdown()
        await self.tracker.stop()
        await self.leader_note.stop()
        await self.local_sessions.stop()
        await self.compactor.stop()
        await self.space.stop()
        await self.mode.stop()
        await self.quorum_notes.stop()
        if self.metrics is not None:
            await self.metrics.stop()
        if self.peer_port is not None:
            await self.peer_port.close()
        for s in self._servers:
            await s.stop(grace)
        await self.link.close()
        await self.parts.close()

    def _log_fields(self) -> dict[str, object]:
        """`member`, `term` and `leader` for this member's log lines (log_lines)."""
        leader = self.node.leader
        return {"member": self.config.name, "term": self.node.term,
                "leader": leader.name if leader is not None else None}

    async def serve_until_signalled(self) -> int:
        """Run until SIGINT/SIGTERM (clean stop, exit 0) or a fatal driver error (exit 1)."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await self.start()
        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait([stopper, self.node.failed], return_when=asyncio.FIRST_COMPLETED)
        code = 0
        if self.node.failed.done():
            code = 1
            log.critical("%s: stopped serving, it cannot go on safely (%s); restarted, it "
                         "recovers from what is on disk", self.config.name,
                         self.node.failed.exception())
        else:
            log.info("%s: stopping", self.config.name)
        stopper.cancel()
        await self.stop()
        return code


def _describe(tls: ServerTLS | None, who: str) -> str:
    if tls is None:
        return "plaintext"
    return f"TLS, {who} certificates required" if tls.client_cert_auth else "TLS"


def listen(server: grpc.aio.Server, address: str, flag: str,
           credentials: grpc.ServerCredentials | None = None) -> int:
    """Bind `server` to `address` (with TLS if `credentials`) and return the port, or fail
    with an error naming the flag that asked for it (gRPC reports a taken port only by
    returning 0)."""
    try:
        if credentials is None:
            port = server.add_insecure_port(address)
        else:
            port = server.add_secure_port(address, credentials)
    except RuntimeError as e:
        raise OSError(f"cannot listen on {address} ({flag}): {e}") from None
    if port == 0:
        raise OSError(f"cannot listen on {address} ({flag}): address in use?")
    return port
