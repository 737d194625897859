"""Run by test_etcd_auth_clients.py in its own process (the `etcd3` package needs the
pure-Python protobuf runtime): the etcd3 client logged in as a user, then its token left
idle past the server's --auth-token-ttl. Prints one line per step, so the answers of
coord and of real etcd can be compared."""

from __future__ import annotations

import sys
import time

import etcd3
import grpc


def attempt(what: str, fn) -> None:
    try:
        out = fn()
    except grpc.RpcError as e:
        print(f"{what}: {e.code().name} {e.details()}")
    else:
        print(f"{what}: ok {out!r}")


def login(host: str, port: int, password: str) -> etcd3.Etcd3Client:
    """etcd3 logs in when a client is made and sends the token two ways: as call
    credentials, which grpcio refuses on a plaintext channel ("Established channel does
    not have a sufficient security level"), and as the `token` metadata servers read.
    Without TLS only the second can go."""
    client = etcd3.client(host=host, port=port, timeout=10, user="alice", password=password)
    client.call_credentials = client.watcher.call_credentials = None
    return client


def main(host: str, port: int, idle_s: float) -> None:
    client = login(host, port, "alicepw")
    attempt("put p/x", lambda: client.put("p/x", "1") and None)
    attempt("get p/x", lambda: client.get("p/x")[0])
    attempt("get c", lambda: client.get("c")[0])
    attempt("put c", lambda: client.put("c", "1") and None)
    time.sleep(idle_s)  # the token idles past the TTL: what is under test
    attempt("get p/x after idling", lambda: client.get("p/x")[0])
    # etcd3 0.12 logs in once, when a client is made: a new client is how it recovers
    again = login(host, port, "alicepw")
    attempt("get p/x with a new client", lambda: again.get("p/x")[0])
    attempt("wrong password", lambda: login(host, port, "nope") and None)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
