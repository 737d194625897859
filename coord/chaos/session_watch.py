"""Sessions whose event streams are recorded (coord's native `Client.session`, kept
alive), for coord.check.session_stream.

Each round: open a kept-alive session, own a resource of its own (ev<j>) in the own
workload's group, hold it a little, then end it one of two ways: close it (its stream
owes a `released` event at the revision its resources were freed) or have a second
session take the resource over at a higher generation (its stream owes a `severed`
event naming the new owner, at the takeover's revision). The stream's events are
drained once the session ended (the client ends the iterator after the end event).

Rows: `session_events` (invoke: `key` the group, `resource`, `session`, `ending`:
close | sever; a `response` row per event {"type", "revision", "resource",
"generation", "new_owner"}; ok when the stream ended, info when no end came within
DRAIN_S, saying how the round tried to end the session, or at once when a sever's
takeover session could not open: no end was owed before the round closed the
session, outside the stream's op), and on a second
process the
`own` ops (a takeover's invoke carries the `generation` it claims) and `close_session`."""

from __future__ import annotations

import random
import threading

from coord.chaos.recorder import Process
from coord.check.session_stream import ENDS
from coord.client import Client, CoordError
from coord.tls.files import TLS

TTL_S = 2.0
DRAIN_S = 15.0
"""How long the stream may take to deliver the end event once the session ended: longer
than a majority's outage (a `kill` of two members is held up to ~13 s), during which no
member can serve the stream it reconnects to. A stream that delivers no end in that time
is recorded `info` (its outcome unknown), not `ok`: the checker holds only a stream that
ended to the end it owed."""
ENDED = (*ENDS, "gone")
"""The event types after which the client ends a session's stream (`gone`: the client
learned of the end without its reason)."""


def _own(proc: Process, client: Client, session: int, group: str, resource: str,
         generation: int | None = None):
    """An `own` op; the grant, or None."""
    extra = {} if generation is None else {"generation": generation}
    proc.invoke("own", None, None, group=group, resource=resource, session=session, **extra)
    try:
        result = client.own(session, group, {resource: generation} if generation else resource)
    except CoordError as e:
        proc.info(getattr(e, "reason", "") or type(e).__name__)
        return None
    grant = next((g for g in result.grants if g.resource == resource), None)
    if grant is None:
        proc.fail("not granted")
        return None
    proc.ok(None, generation=grant.generation, revision=grant.revision)
    return grant


def _close(proc: Process, client: Client, session: int) -> str:
    """A `close_session` op; its outcome in words, for a stream that then owes an end."""
    proc.invoke("close_session", None, None, session=session)
    try:
        revision = client.close_session(session).revision
    except CoordError as e:
        why = getattr(e, "reason", "") or type(e).__name__
        proc.info(why)
        return f"the close's outcome unknown ({why})"
    proc.ok(revision=revision)
    return "closed"


def watch_sessions(j: int, endpoints: list[str], tls: TLS | None, stream: Process,
                   ops: Process, stop: threading.Event, seed: int, group: str) -> None:
    rng = random.Random(f"{seed}-session-watch-{j}")
    resource = f"ev{j}"
    ordered = endpoints[j % len(endpoints):] + endpoints[:j % len(endpoints)]
    with Client(ordered, timeout=3.0, randomize_endpoints=False, tls=tls or False) as client:
        while not stop.is_set():
            try:
                session = client.session("chaos-events", ttl=TTL_S)
            except CoordError:
                stop.wait(0.5)
                continue
            ending = rng.choice(("close", "sever"))
            stream.invoke("session_events", group, None, resource=resource,
                          session=session.id, ending=ending)
            grant = _own(ops, client, session.id, group, resource)
            stop.wait(rng.uniform(0.2, 1.5))
            if grant is None:  # nothing to sever: the session is closed either way
                done = "its own failed; " + _close(ops, client, session.id)
            elif ending == "close":
                done = _close(ops, client, session.id)
            else:
                try:
                    other = client.open_session("chaos-events-takeover", TTL_S).session_id
                except CoordError as e:
                    # no takeover: the stream's op ends here, owing no end; the session
                    # is closed outside it, for the next round
                    why = getattr(e, "reason", "") or type(e).__name__
                    stream.info(f"no takeover: its session could not open ({why})")
                    _close(ops, client, session.id)
                    session.detach()
                    continue
                taken = _own(ops, client, other, group, resource, grant.generation + 1)
                done = "taken over" if taken is not None else "the takeover's outcome unknown"
                _close(ops, client, other)  # frees the resource for the next round
            last = None
            for event in session.events(timeout=DRAIN_S):
                last = event.type
                stream.respond([{"type": event.type, "revision": event.revision,
                                 "resource": event.resource, "generation": event.generation,
                                 "new_owner": event.new_owner}], revision=event.revision)
            if last in ENDED:
                stream.ok()
            else:
                stream.info(f"no end event within {DRAIN_S:.0f} s ({done})")
            session.detach()
