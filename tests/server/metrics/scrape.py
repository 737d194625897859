"""Reading a member's metrics endpoint from a test: a GET's status and body, and the
/metrics exposition parsed by prometheus_client's own parser into {(name, labels): value}."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

PROMETHEUS_HINT = ("`make venv` installs Debian's prometheus (as root), or run apt-get"
                   " install prometheus")
"""How to get promtool and prometheus (tests/etcdtools.require's hint)."""

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    """(HTTP status, body) of a GET; an error status is returned, not raised, and so is
    a connection refused or cut (status 0, the reason as the body)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, ConnectionError) as e:
        return 0, str(e).encode()


def samples(metrics_url: str) -> Samples:
    status, body = get(metrics_url + "/metrics")
    assert status == 200, body
    out: Samples = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(found: Samples, name: str, **labels: str) -> float:
    """The sample `name` with exactly `labels` (0 when it is not exported yet: a labelled
    counter appears with its first event)."""
    return found.get((name, frozenset(labels.items())), 0.0)


def names(found: Samples) -> set[str]:
    return {name for name, _ in found}
