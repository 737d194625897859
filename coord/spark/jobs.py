"""Job versions in coord's KV: Delta Lake's txnAppId/txnVersion, kept where every run of
the job can see it.

`spark-jobs/<job>/version` holds the last version whose output was published. A run of
version v is a no-op when v <= that. The sink records the version in the same atomic
step that publishes the rows, and coord's key is written after it, so a driver lost in
between leaves coord behind the sink, never ahead: the next run finds the sink's record
(`Sink.committed_version`), skips, and catches coord up (`record_version`).
"""

from __future__ import annotations

from coord.client import Client, KeyValue

__all__ = ["committed_version", "record_version", "version_key", "version_record"]

CAS_TRIES = 16


def version_key(job: str) -> str:
    return f"spark-jobs/{job}/version"


def version_record(client: Client, job: str) -> KeyValue | None:
    """The key holding `job`'s last published version (None: never recorded)."""
    return client.get(version_key(job))


def committed_version(client: Client, job: str) -> int | None:
    kv = version_record(client, job)
    return None if kv is None else int(kv.value)


def record_version(client: Client, job: str, version: int,
                   seen: KeyValue | None = None) -> None:
    """Raise the recorded version to `version` (never lower it), by compare-and-set.
    `seen`: the key as the caller last read it (`version_record`; None: absent). Each
    compare-and-set that fails answers the key as it is now, so the next try needs no
    read: a right `seen` records in one request, a stale one in two."""
    key = version_key(job)
    kv = seen
    for _ in range(CAS_TRIES):
        if kv is not None and int(kv.value) >= version:
            return
        result = client.compare_and_set(key, 0 if kv is None else kv.version, str(version))
        if result.succeeded:
            return
        kv = result.kv
    raise RuntimeError(f"could not record version {version} of {job!r}: {key} kept "
                       f"changing ({CAS_TRIES} tries)")
