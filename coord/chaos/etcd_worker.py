"""The register workload through etcd's v3 API (linearizable and serializable reads,
puts, deletes, compare-and-swap txns, compactions; and txns of two puts on keys of
their own), with watchers of its keys (coord.chaos.etcd_watchers), and
Kubernetes-shaped informers and controllers (coord.chaos.etcd_k8s), driven by the
`etcd3` package (a client nobody here wrote), in a process of its own: etcd3 0.12
needs the pure-Python protobuf runtime, and its generated code registers the
etcdserverpb names coord's own code also registers (the runner starts it with
PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python).

It writes its own oplog JSONL (time.monotonic_ns() is one clock for every process on
the host, so the runner merges the files by time). stdin says when: "stop" ends the
workers, "final" makes the final reads (after the runner healed the cluster), then it
exits. `python -m coord.chaos.etcd_worker --endpoints A,B,C --workers N --seed S
--process-base P --out FILE`; over TLS when $COORD_CACERT, $COORD_CERT and $COORD_KEY
name the files, as for coord's own clients (etcd3's ca_cert, cert_cert, cert_key)."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import random
import sys
import threading
from pathlib import Path

from coord.chaos import etcd_k8s
from coord.chaos.etcd_watchers import WATCH_OPTIONS, watch
from coord.chaos.keys import RotatingKeys
from coord.chaos.recorder import Process, Recorder
from coord.tls.files import TLS

KEY_PREFIX = "chaos/etcd/"
TXN_KEYS = [f"{KEY_PREFIX}txn/{n}" for n in range(4)]
TXN_VALUE_STEP = 1_000_000_000
"""A txn's second value: its first plus this (values stay unique per write)."""
WATCHER_PROCESSES = 500_000
"""The watchers' process ids start this far above --process-base (the writers' below)."""
COMPACTOR_PROCESSES = 900_000
"""The compactor's process ids start here (above the watchers', below the final reads')."""
INFORMER_PROCESSES = 700_000
"""The Kubernetes-shaped informers' process ids start here, the controllers' at
CONTROLLER_PROCESSES (coord.chaos.etcd_k8s)."""
CONTROLLER_PROCESSES = 800_000
COMPACT_KEEP = 30
"""Revisions the compactor keeps behind the head."""


class EtcdRegister:
    def __init__(self, endpoints: list[str], hot_keys: int = 3, ops_per_key: int = 250,
                 tls: TLS | None = None) -> None:
        self.endpoints = endpoints
        self.tls = tls
        self.keys = RotatingKeys(KEY_PREFIX, hot_keys, ops_per_key)
        self._values = itertools.count(1)

    def connect(self, i: int):
        """An etcd3 client to endpoint i (round robin), with `endpoint` set on it."""
        import etcd3

        endpoint = self.endpoints[i % len(self.endpoints)]
        host, port = endpoint.rsplit(":", 1)
        tls = self.tls or TLS()
        client = etcd3.client(host=host, port=int(port), timeout=3, ca_cert=tls.cacert,
                              cert_cert=tls.cert, cert_key=tls.key)
        client.chaos_endpoint = endpoint
        return client

    def read(self, proc: Process, client, key: str, last: dict | None = None,
             serializable: bool = False) -> bool:
        """A linearizable read, or a serializable one (the member's own state, no
        ReadIndex: flagged, it may be stale but never invented; coord.check.stale_reads)."""
        proc.invoke("read", key, endpoint=client.chaos_endpoint)
        try:
            value, _ = client.get(key, serializable=serializable)
        except Exception as e:  # noqa: BLE001 - etcd3 raises grpc and its own errors
            proc.fail(type(e).__name__)
            return False
        got = None if value is None else int(value)
        if last is not None:
            last[key] = got
        proc.ok(got, **({"serializable": True} if serializable else {}))
        return True

    def step(self, proc: Process, client, rng: random.Random, last: dict) -> bool:
        """One op; False if the connection looks broken (the caller reconnects)."""
        key = self.keys.next(rng)
        f = rng.choices(("read", "sread", "write", "cas", "delete", "txn_put"),
                        (3, 2, 2, 2, 1, 1))[0]
        if f in ("read", "sread"):
            return self.read(proc, client, key, last, serializable=f == "sread")
        value = next(self._values)
        try:
            if f == "txn_put":
                self.txn_put(proc, client, rng, value)
            elif f == "write":
                proc.invoke("write", key, value, endpoint=client.chaos_endpoint)
                resp = client.put(key, str(value))
                proc.ok(value, revision=resp.header.revision)
            elif f == "delete":  # a write of absence, for the register; a delete event
                proc.invoke("write", key, None, endpoint=client.chaos_endpoint)
                resp = client.delete(key, return_response=True)
                # deleting nothing makes no revision: the header's is not this write's
                proc.ok(None, revision=resp.header.revision if resp.deleted else None)
            else:
                old = last.get(key)
                proc.invoke("cas", key, [old, value], endpoint=client.chaos_endpoint)
                t = client.transactions
                cond = t.version(key) == 0 if old is None else t.value(key) == str(old)
                ok, _ = client.transaction(compare=[cond], success=[t.put(key, str(value))],
                                           failure=[])
                if ok:
                    proc.ok([old, value])
                else:
                    proc.fail("compare failed", [old, value])
        except Exception as e:  # noqa: BLE001 - outcome unknown
            proc.info(type(e).__name__)
            return False
        return True


    def txn_put(self, proc: Process, client, rng: random.Random, value: int) -> None:
        """Two puts in one txn, to two of TXN_KEYS (not register keys): one revision of
        two events, for the watch checks of atomicity and order within a revision."""
        keys = sorted(rng.sample(TXN_KEYS, 2))
        pairs = [[k, value + n * TXN_VALUE_STEP] for n, k in enumerate(keys)]
        proc.invoke("txn_put", None, pairs, endpoint=client.chaos_endpoint)
        t = client.transactions
        client.transaction(compare=[], success=[t.put(k, str(v)) for k, v in pairs],
                           failure=[])
        proc.ok(pairs)


def start_revision(reg: EtcdRegister) -> int:
    """The revision after the cluster's current one (the watchers start there, before
    any write of the workload), from the first endpoint that answers."""
    for n in range(3 * len(reg.endpoints)):
        client = reg.connect(n)
        try:
            return client.get_response(KEY_PREFIX).header.revision + 1
        except Exception:  # noqa: BLE001 - try the next endpoint
            continue
        finally:
            client.close()
    raise RuntimeError("no endpoint answered a read")


def _compactor(reg: EtcdRegister, proc: Process, stop: threading.Event, seed: int) -> None:
    """Every 1-3 s, compacts the history to COMPACT_KEEP revisions behind the head, so
    that a watcher restarting from further back is told it was compacted. A compaction
    that raised is `info`: it may have happened."""
    rng = random.Random(f"{seed}-etcd-compact")
    attempt = 0
    while not stop.wait(rng.uniform(1.0, 3.0)):
        client = reg.connect(attempt)
        try:
            target = client.get_response(KEY_PREFIX).header.revision - COMPACT_KEEP
            if target > 0:
                proc.invoke("compact", None, target, endpoint=client.chaos_endpoint)
                try:
                    client.compact(target)
                except Exception as e:  # noqa: BLE001 - outcome unknown
                    proc.info(type(e).__name__)
                else:
                    proc.ok(target)
        except Exception:  # noqa: BLE001 - the head's revision unread: try another member
            attempt += 1
        finally:
            client.close()


def _worker(i: int, reg: EtcdRegister, proc: Process, stop: threading.Event,
            seed: int) -> None:
    rng = random.Random(f"{seed}-etcd-{i}")
    attempt = i
    client = reg.connect(attempt)
    last: dict[str, int | None] = {}
    while not stop.is_set():
        if not reg.step(proc, client, rng, last):
            attempt += 1
            with contextlib.suppress(Exception):  # reconnecting anyway
                client.close()
            stop.wait(0.1)
            client = reg.connect(attempt)
    client.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m coord.chaos.etcd_worker")
    p.add_argument("--endpoints", required=True)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--watchers", type=int, default=len(WATCH_OPTIONS))
    p.add_argument("--informers", type=int, default=2)
    p.add_argument("--controllers", type=int, default=2)
    p.add_argument("--plant", default="", help=f"{etcd_k8s.BLIND}: controllers update "
                   "without their compare")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--process-base", type=int, default=1_000_000)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    reg = EtcdRegister(args.endpoints.split(","), tls=TLS.from_env())
    recorder = Recorder(args.out)
    stop = threading.Event()
    threads = [threading.Thread(target=_worker, daemon=True, args=(
        i, reg, Process(recorder, args.process_base + i, args.workers), stop, args.seed))
        for i in range(args.workers)]
    first = start_revision(reg)
    threads += [threading.Thread(target=watch, daemon=True, args=(
        j, reg.connect, Process(recorder, args.process_base + WATCHER_PROCESSES + j,
                                args.watchers),
        stop, args.seed, first, KEY_PREFIX)) for j in range(args.watchers)]
    base = args.process_base
    threads += [threading.Thread(target=etcd_k8s.informer, daemon=True, args=(
        j, reg.connect, Process(recorder, base + INFORMER_PROCESSES + j, args.informers),
        stop, args.seed)) for j in range(args.informers)]
    values = itertools.count(1)
    threads += [threading.Thread(target=etcd_k8s.controller, daemon=True, args=(
        j, reg.connect, Process(recorder, base + CONTROLLER_PROCESSES + j, args.controllers),
        stop, args.seed, values, args.plant)) for j in range(args.controllers)]
    threads.append(threading.Thread(target=_compactor, daemon=True, args=(
        reg, Process(recorder, args.process_base + COMPACTOR_PROCESSES, 1), stop,
        args.seed)))
    for t in threads:
        t.start()
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "stop":
            stop.set()
            for t in threads:
                t.join(30)
        elif line.strip() == "final":
            proc = Process(recorder, args.process_base + 999_000, 1)
            for n in range(len(reg.endpoints)):
                client = reg.connect(n)
                try:
                    if all(reg.read(proc, client, k) for k in sorted(reg.keys.used)):
                        break
                finally:
                    client.close()
            break
    stop.set()
    recorder.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
