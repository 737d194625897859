"""The sync `Client` as a facade over `AsyncClient`: what importing it loads, its threads
(loop, callbacks, stream readers) and their end, callbacks off the loop, cancelling a
blocked stream from another thread, a client made in a forked child, and the refusal in a
child forked while sessions were live.

Against one in-process member (`coord_cluster`), except the import check (a fresh
interpreter)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from coord.client import Client, CoordError
from coord.testing import LocalCluster

LIMIT_S = 10.0


def _loaded_by_importing_the_client(which: str) -> str:
    """What a fresh interpreter prints after `import coord.client`: the sorted names in
    sys.modules that `which` (an expression in `m`) selects."""
    code = f"import coord.client, sys; print(sorted(m for m in sys.modules if {which}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True)
    return out.stdout.strip()


def test_importing_the_client_loads_no_server_code():
    assert _loaded_by_importing_the_client(
        "m.startswith('coord.server') or m.startswith('coord.raft') or m == 'sqlite3'") == "[]"
    assert _loaded_by_importing_the_client(
        "m.split('.')[:2] in (['coord', 'sm'], ['coord', 'cli'], ['coord', 'testing'], "
        "['coord', 'bench'])") == "[]"


def _coord_threads(baseline: set[threading.Thread]) -> list[str]:
    """Threads started since `baseline`, but the in-process member's (`coord-embedded*`:
    its loop may start a worker thread at any moment, e.g. to read its disk size)."""
    return sorted(t.name for t in threading.enumerate()
                  if t not in baseline and not t.name.startswith("coord-embedded"))


def test_closed_clients_leave_no_thread_or_open_loop(coord_cluster: LocalCluster):
    baseline = set(threading.enumerate())
    loops = []
    severed: list = []
    for i in range(25):
        with Client(coord_cluster.endpoints, timeout=2) as client:
            client.put(b"k", str(i).encode())
            client.session(ttl=5, on_severed=severed.append)  # left open: close() ends it
            with client.watch(b"k") as stream:
                client.put(b"k", b"watched")
                assert next(stream).kv.value == b"watched"
            loops.append(client._loop.loop)
            during = _coord_threads(baseline)
            assert {"coord-client", "coord-events", "coord-keepalive"} <= set(during)
    assert all(loop.is_closed() for loop in loops)
    deadline = time.monotonic() + LIMIT_S  # gRPC's own threads end a moment after close
    while _coord_threads(baseline) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _coord_threads(baseline) == []
    # Each client's close ended its open session and told it, before its threads ended.
    assert [e.type for e in severed] == ["gone"] * 25


def test_callbacks_run_off_the_loop_in_order_after_the_fence(coord_cluster: LocalCluster):
    """A callback that blocks holds up neither calls nor keepalives; it may call the
    client; `fenced` is set before `on_severed` runs; `events()` ends only after it."""
    release = threading.Event()
    seen: list[tuple[str, str, bool]] = []
    reader_saw_severed = threading.Event()
    reader_ended = threading.Event()
    with Client(coord_cluster.endpoints, timeout=2) as client:
        old = None

        def on_event(ev) -> None:
            seen.append(("event", ev.type, True))

        def on_severed(ev) -> None:
            seen.append((threading.current_thread().name, ev.type, old.fenced.is_set()))
            seen.append(("get", client.get(b"cb").value.decode(), True))  # calls work here
            release.wait(LIMIT_S)

        client.put(b"cb", b"from-callback")
        old = client.session(ttl=1, on_event=on_event, on_severed=on_severed)
        old.own("g", [("r", 1)])

        def read_events() -> None:
            for ev in old.events(timeout=LIMIT_S):
                if ev.type == "severed":
                    reader_saw_severed.set()
            reader_ended.set()

        reader = threading.Thread(target=read_events, daemon=True)
        reader.start()
        with client.session(ttl=2) as new:
            new.own("g", [("r", 1)])  # severs `old`
            assert old.fenced.wait(LIMIT_S)
            assert reader_saw_severed.wait(LIMIT_S)
            # on_severed is blocked now; the loop is not: calls and keepalives go on.
            for _ in range(3):
                assert client.put(b"k", b"v").header.revision > 0
            time.sleep(2.5)  # longer than new's TTL: only keepalives keep it alive
            assert not new.fenced.is_set()
            assert client.get_owner("g", "r").session_id == new.id
            assert not reader_ended.is_set()  # events() waits for the callback
            release.set()
            assert reader_ended.wait(LIMIT_S)
        old.close()
    assert seen == [("event", "severed", True), ("coord-callbacks", "severed", True),
                    ("get", "from-callback", True)]


def test_cancel_from_another_thread_ends_a_blocked_next(coord_cluster: LocalCluster):
    with Client(coord_cluster.endpoints, timeout=2) as client:
        stream = client.watch(b"never-written")
        items: list = []
        ended = threading.Event()

        def iterate() -> None:
            items.extend(stream)  # blocks: nothing is ever written
            ended.set()

        reader = threading.Thread(target=iterate, daemon=True)
        reader.start()
        assert not ended.wait(0.3)  # still blocked in next()
        stream.cancel()
        assert ended.wait(LIMIT_S)
        assert items == []
        assert client.put(b"after", b"cancel").header.revision > 0


def _exit_code_of_child(child: Callable[[], bool]) -> int:
    """Fork; the child runs `child` and exits 0 if it returned True (1 if it returned
    False or raised). Its exit code, after at most 3 * LIMIT_S (killed if it hangs)."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            status = 0 if child() else 1
        finally:
            os._exit(status)
    deadline = time.monotonic() + LIMIT_S * 3
    while True:
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    if not done:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert done, "the child hung"
    return os.waitstatus_to_exitcode(wait_status)


def test_a_client_made_in_a_forked_child_works(coord_cluster: LocalCluster):
    """The parent holds a live client (its stream to the member open, a watch waiting
    for events) when it forks; the child's own client works, so does the client it
    inherited, and so does the parent's afterwards."""
    with Client(coord_cluster.endpoints, timeout=2) as parent:
        rev = parent.put(b"fork", b"parent").header.revision
        stream = parent.watch(b"fork", from_revision=rev + 1)
        got: list = []
        watching = threading.Thread(target=lambda: got.extend(e.kv.value for e in stream),
                                    daemon=True)
        watching.start()
        # Fork once the watch is serving, not while it starts: a stream starting at the
        # fork can stall the child's calls inside gRPC (1 fork in 400 here).
        parent.put(b"fork", b"watched")
        deadline = time.monotonic() + LIMIT_S
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)

        def child() -> bool:
            with Client(coord_cluster.endpoints, timeout=2) as own:
                own.put(b"fork", b"child")
                with own.session(ttl=5) as s:
                    s.put(b"fork-child-key", b"1")
                ok = own.get(b"fork").value == b"child"
            return ok and parent.get(b"fork-child-key") is None  # its session ended

        assert _exit_code_of_child(child) == 0
        assert parent.get(b"fork").value == b"child"
        parent.put(b"fork", b"parent-again")
        deadline = time.monotonic() + LIMIT_S
        while b"parent-again" not in got and time.monotonic() < deadline:
            time.sleep(0.02)
        assert got == [b"watched", b"child", b"parent-again"]
        stream.cancel()


def test_a_child_forked_while_sessions_live_refuses_every_client(coord_cluster: LocalCluster):
    """gRPC aborts a child that opens a channel after a fork() taken while sessions kept
    its poller busy (16-37% of such forks here), so in that child a new Client and the
    inherited one raise FORKED, saying what to do instead; the parent carries on."""
    with Client(coord_cluster.endpoints, timeout=2) as parent:
        with parent.session(ttl=5) as session:
            session.put(b"fork-session-key", b"1")

            def child() -> bool:
                refused = []
                for attempt in (lambda: Client(coord_cluster.endpoints, timeout=2),
                                lambda: parent.get(b"fork-session-key")):
                    try:
                        attempt()
                    except CoordError as e:
                        refused.append(e.reason == "FORKED" and "spawn" in e.message)
                return refused == [True, True]

            assert _exit_code_of_child(child) == 0
            assert parent.get(b"fork-session-key").value == b"1"
            assert not session.fenced.is_set()
        assert parent.get(b"fork-session-key") is None
