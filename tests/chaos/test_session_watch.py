"""The session-event workload's rounds over a stand-in client (no cluster): a sever
whose takeover session cannot open ends the round at once, saying why, instead of
draining a stream that nothing ended for DRAIN_S."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from coord.chaos import session_watch
from coord.chaos.recorder import Process, Recorder
from coord.client import CoordError

ROUNDS = 12


class Session:
    def __init__(self, sid: int, client: Client) -> None:
        self.id = sid
        self.client = client

    def events(self, timeout: float):
        self.client.drained.append(self.id)
        if self.id in self.client.closed:  # a closed session's stream ends `released`
            yield SimpleNamespace(type="released", revision=9, resource="ev0",
                                  generation=1, new_owner=0)

    def detach(self) -> None:
        pass


class Client:
    """Grants every own; no takeover session ever opens; stops the run after ROUNDS."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.stop: threading.Event = kwargs.pop("_stop")
        self.opened = 0
        self.closed: set[int] = set()
        self.drained: list[int] = []

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def session(self, name: str, ttl: float) -> Session:
        self.opened += 1
        if self.opened >= ROUNDS:
            self.stop.set()
        return Session(self.opened, self)

    def own(self, session: int, group: str, resources: Any):
        return SimpleNamespace(grants=[SimpleNamespace(resource="ev0", generation=1,
                                                       revision=3)])

    def open_session(self, name: str, ttl: float):
        raise CoordError("NO_QUORUM", "no quorum")

    def close_session(self, session: int):
        self.closed.add(session)
        return SimpleNamespace(revision=4)


def test_a_sever_whose_takeover_cannot_open_ends_its_round_without_draining(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    stop = threading.Event()
    clients: list[Client] = []

    def make(*args: Any, **kwargs: Any) -> Client:
        clients.append(Client(*args, _stop=stop, **kwargs))
        return clients[-1]

    monkeypatch.setattr(session_watch, "Client", make)
    monkeypatch.setattr(stop, "wait", lambda timeout=None: stop.is_set())  # no pauses
    recorder = Recorder(tmp_path / "oplog.jsonl")
    session_watch.watch_sessions(0, ["127.0.0.1:1"], None, Process(recorder, 0, 2),
                                 Process(recorder, 1, 2), stop, seed=1, group="g")
    recorder.close()
    rows = [json.loads(line) for line in (tmp_path / "oplog.jsonl").read_text().splitlines()]
    ends = {r["session"]: r for r in rows if r["f"] == "session_events" and
            r["type"] != "invoke"}
    severs = [r for r in rows if r["f"] == "session_events" and r["type"] == "invoke"
              and r["ending"] == "sever"]
    assert severs and len(severs) < len(ends)  # both endings drawn
    (client,) = clients
    for r in severs:
        end = ends[r["session"]]
        assert end["type"] == "info" and end["error"].startswith(
            "no takeover: its session could not open (NO_QUORUM)")
        assert r["session"] not in client.drained  # no wait on a stream nothing ended
        assert r["session"] in client.closed
    closes = [s for s, r in ends.items() if r["type"] == "ok"]
    assert closes and all(s in client.drained for s in closes)
