"""Job versions in coord's KV: Delta Lake's txnAppId/txnVersion, kept where every run of
the job can see it.

`spark-jobs/<job>/version` holds the last version whose output was published. A run of
version v is a no-op when v <= that. The sink records the version in the same atomic
step that publishes the rows, and coord's key is written after it, so a driver lost in
between leaves coord behind the sink, never ahead: the next run finds the sink's record
(`Sink.committed_version`), skips, and catches coord up (`record_version`).
"""

from __future__ import annotations

from coord.client import Client

__all__ = ["committed_version", "record_version", "version_key"]

CAS_TRIES = 16


def version_key(job: str) -> str:
    return f"spark-jobs/{job}/version"


def committed_version(client: Client, job: str) -> int | None:
    kv = client.get(version_key(job))
    return None if kv is None else int(kv.value)


def record_version(client: Client, job: str, version: int) -> None:
    """Raise the recorded version to `version` (never lower it), by compare-and-set."""
    key = version_key(job)
    for _ in range(CAS_TRIES):
        kv = client.get(key)
        if kv is not None and int(kv.value) >= version:
            return
        result = client.compare_and_set(key, 0 if kv is None else kv.version, str(version))
        if result.succeeded:
            return
    raise RuntimeError(f"could not record version {version} of {job!r}: {key} kept "
                       f"changing ({CAS_TRIES} tries)")
