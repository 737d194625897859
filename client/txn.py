"""Transactions: `TxnBuilder`, and the ops a transaction branch may hold.

A builder, not a client method, because a transaction is assembled step by step (by
code, or by `coord kv txn` from a script) and sent once; `build()` gives it the request_id
that makes its retries safe.
"""

from __future__ import annotations

from typing import Self

from coord.client.calls import (
    SessionRef,
    delete_request,
    new_request_id,
    range_request,
    writer_session_id,
)
from coord.client.keys import Bytesish, to_bytes
from coord.v1 import coord_pb2 as pb

__all__ = ["COMPARE_TARGETS", "TxnBuilder", "delete_op", "get_op", "put_op"]

_COMPARE_OPS = {"=": "=", "==": "=", "!=": "!=", "<": "<", ">": ">"}
COMPARE_TARGETS = ("value", "version", "create", "mod")


class TxnBuilder:
    """Builds a TxnRequest: every `if_*` compare must hold for the `then_*` ops to run;
    otherwise the `else_*` ops run. The sync and async clients' `txn()` return subclasses
    with `commit()`; `coord kv txn` fills one from its stdin script."""

    def __init__(self) -> None:
        self._compares: list[pb.Compare] = []
        self._success: list[pb.RequestOp] = []
        self._failure: list[pb.RequestOp] = []

    # compares
    def compare(self, key: Bytesish, target: str, op: str, value: Bytesish | int) -> Self:
        """A compare of `target` (value | version | create | mod) of `key`."""
        if target not in COMPARE_TARGETS:
            raise ValueError(f"compare target must be one of {COMPARE_TARGETS}, got {target!r}")
        if op not in _COMPARE_OPS:
            raise ValueError(f"compare op must be one of = != < >, got {op!r}")
        cmp = pb.Compare(key=to_bytes(key), target=target, op=_COMPARE_OPS[op])
        if target == "value":
            if isinstance(value, int):
                raise TypeError("a value compare takes bytes or str")
            cmp.value = to_bytes(value)
        else:
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"a {target} compare takes an int")
            cmp.number = value
        self._compares.append(cmp)
        return self

    def if_value(self, key: Bytesish, op: str, value: Bytesish) -> Self:
        return self.compare(key, "value", op, value)

    def if_version(self, key: Bytesish, op: str, version: int) -> Self:
        """version 0 means the key does not exist."""
        return self.compare(key, "version", op, version)

    def if_create(self, key: Bytesish, op: str, revision: int) -> Self:
        return self.compare(key, "create", op, revision)

    def if_mod(self, key: Bytesish, op: str, revision: int) -> Self:
        return self.compare(key, "mod", op, revision)

    # success branch
    def then_put(self, key: Bytesish, value: Bytesish, *, session: SessionRef | None = None,
                 prev_kv: bool = False) -> Self:
        self._success.append(put_op(key, value, session=session, prev_kv=prev_kv))
        return self

    def then_get(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
                 prefix: Bytesish | None = None, limit: int = 0, revision: int = 0) -> Self:
        self._success.append(get_op(key, range_end, prefix=prefix, limit=limit,
                                    revision=revision))
        return self

    def then_delete(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
                    prefix: Bytesish | None = None, prev_kv: bool = False) -> Self:
        self._success.append(delete_op(key, range_end, prefix=prefix, prev_kv=prev_kv))
        return self

    # failure branch
    def else_put(self, key: Bytesish, value: Bytesish, *, session: SessionRef | None = None,
                 prev_kv: bool = False) -> Self:
        self._failure.append(put_op(key, value, session=session, prev_kv=prev_kv))
        return self

    def else_get(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
                 prefix: Bytesish | None = None, limit: int = 0, revision: int = 0) -> Self:
        self._failure.append(get_op(key, range_end, prefix=prefix, limit=limit,
                                    revision=revision))
        return self

    def else_delete(self, key: Bytesish | None = None, range_end: Bytesish | None = None, *,
                    prefix: Bytesish | None = None, prev_kv: bool = False) -> Self:
        self._failure.append(delete_op(key, range_end, prefix=prefix, prev_kv=prev_kv))
        return self

    def build(self, request_id: str | None = None) -> pb.TxnRequest:
        """The request; a fresh request_id unless one is given (a retry must reuse it)."""
        return pb.TxnRequest(
            compares=self._compares, success=self._success, failure=self._failure,
            request_id=request_id if request_id is not None else new_request_id(),
        )


def put_op(key: Bytesish, value: Bytesish, *, session: SessionRef | None = None,
           prev_kv: bool = False) -> pb.RequestOp:
    return pb.RequestOp(put=pb.PutRequest(
        key=to_bytes(key), value=to_bytes(value), session_id=writer_session_id(session),
        prev_kv=prev_kv))


def get_op(key: Bytesish | None = None, range_end: Bytesish | None = None, *,
           prefix: Bytesish | None = None, limit: int = 0, revision: int = 0) -> pb.RequestOp:
    return pb.RequestOp(range=range_request(key, range_end, prefix=prefix, limit=limit,
                                            revision=revision))


def delete_op(key: Bytesish | None = None, range_end: Bytesish | None = None, *,
              prefix: Bytesish | None = None, prev_kv: bool = False) -> pb.RequestOp:
    return pb.RequestOp(delete_range=delete_request(key, range_end, prefix=prefix,
                                                    prev_kv=prev_kv))
