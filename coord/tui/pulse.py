"""The pulse view's numbers (`:pulses`, k9s's): each member's /metrics (the same
exposition Prometheus scrapes, read over HTTP like any scraper) turned into short series
of proposals/s, WAL fsync p99, leader changes, read-only and NOSPACE.

Parsing is prometheus_client's own parser; rates come from counter deltas between two
scrapes and the p99 from histogram bucket deltas (as PromQL's `rate` and
`histogram_quantile` would), so the console needs no Prometheus. Everything here is
plain data and pure functions but `scrape`, the one HTTP GET."""

from __future__ import annotations

import asyncio
import collections
import urllib.parse
import urllib.request
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

POINTS = 120  # kept per series: a scrape every INTERVAL_S gives four minutes
INTERVAL_S = 2.0
TIMEOUT_S = 1.5  # a scrape's limit: a member that does not answer by then is shown so
FSYNC = "etcd_disk_wal_fsync_duration_seconds"

Buckets = tuple[tuple[float, float], ...]  # cumulative (upper bound, count), +Inf last


@dataclass(frozen=True)
class Sample:
    """What the pulse reads from one scrape."""

    proposals: float = 0.0  # etcd_server_proposals_committed_total
    leader_changes: float = 0.0  # etcd_server_leader_changes_seen_total
    read_only: float = 0.0  # coord_read_only
    nospace: float = 0.0  # coord_alarms{alarm="NOSPACE"}
    fsync: Buckets = ()
    server_id: int = 0  # etcd_server_id's label: the member's id


def parse(text: str) -> Sample:
    """The pulse's numbers out of a /metrics answer (absent ones are 0)."""
    values: dict[str, float] = {}
    fsync: list[tuple[float, float]] = []
    server_id = 0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == f"{FSYNC}_bucket":
                fsync.append((float(s.labels["le"]), s.value))
            elif s.name == "etcd_server_id":
                server_id = int(s.labels.get("server_id", "0"), 16)
            elif s.name == "coord_alarms":
                if s.labels.get("alarm") == "NOSPACE":
                    values["nospace"] = s.value
            else:
                values[s.name] = s.value
    return Sample(proposals=values.get("etcd_server_proposals_committed_total", 0.0),
                  leader_changes=values.get("etcd_server_leader_changes_seen_total", 0.0),
                  read_only=values.get("coord_read_only", 0.0),
                  nospace=values.get("nospace", 0.0), fsync=tuple(sorted(fsync)),
                  server_id=server_id)


def increase(before: float, after: float) -> float:
    """A counter's increase between two scrapes; a counter that went down was reset (the
    member restarted), so all of `after` is new, as Prometheus's `increase` takes it."""
    return after - before if after >= before else after


def rate(before: float, after: float, seconds: float) -> float:
    return increase(before, after) / seconds if seconds > 0 else 0.0


def quantile(q: float, before: Buckets, after: Buckets) -> float | None:
    """The q-quantile of what was observed between two scrapes of a histogram (bucket
    deltas, linear within the bucket, as `histogram_quantile`); None: nothing observed.
    A quantile in the +Inf bucket is the highest finite bound."""
    was = dict(before)
    deltas = [(le, increase(was.get(le, 0.0), n)) for le, n in after]
    if not deltas or deltas[-1][1] <= 0:
        return None
    rank = q * deltas[-1][1]
    lower, below = 0.0, 0.0
    for le, n in deltas:
        if n >= rank:
            if le == float("inf"):
                return lower
            inside = n - below
            return le if inside <= 0 else lower + (le - lower) * (rank - below) / inside
        lower, below = le, n
    return lower


def series() -> collections.deque[float]:
    return collections.deque(maxlen=POINTS)


@dataclass
class MemberPulse:
    """One metrics URL's series, newest last, and whether its last scrape answered."""

    url: str
    name: str = ""  # the member's name once its id matched one the console knows
    error: str = ""  # why the last scrape failed ("" after one answered)
    last: Sample | None = None
    at: float = 0.0  # monotonic time of `last`
    proposals: collections.deque[float] = field(default_factory=series)  # per second
    fsync_p99_ms: collections.deque[float] = field(default_factory=series)
    leader_changes: collections.deque[float] = field(default_factory=series)  # per scrape
    read_only: collections.deque[float] = field(default_factory=series)
    nospace: collections.deque[float] = field(default_factory=series)

    def record(self, sample: Sample, at: float) -> None:
        """One answer: points from its deltas with the previous one (none for the first)."""
        last, self.error = self.last, ""
        if last is not None and at > self.at:
            self.proposals.append(rate(last.proposals, sample.proposals, at - self.at))
            p99 = quantile(0.99, last.fsync, sample.fsync)
            self.fsync_p99_ms.append(0.0 if p99 is None else p99 * 1000)
            self.leader_changes.append(increase(last.leader_changes, sample.leader_changes))
            self.read_only.append(sample.read_only)
            self.nospace.append(sample.nospace)
        self.last, self.at = sample, at

    def failed(self, error: str) -> None:
        self.error = error or "no answer"


class Pulses:
    """Every scraped member's pulse, by URL, in the order the URLs were given."""

    def __init__(self, urls: list[str] | None = None) -> None:
        self.members: dict[str, MemberPulse] = {u: MemberPulse(u) for u in urls or []}
        self.version = 0  # bumps on each scrape round (the view redraws if it moved)

    @property
    def urls(self) -> list[str]:
        return list(self.members)

    def add(self, url: str) -> None:
        """A URL a member's status named (its metrics): scraped from now on."""
        if url not in self.members:
            self.members[url] = MemberPulse(url)
            self.version += 1

    def record(self, url: str, answer: Sample | str, at: float,
               names: dict[int, str]) -> None:
        """A scrape's `answer` (a Sample, or why it failed); `names`: member id → name."""
        pulse = self.members[url]
        if isinstance(answer, str):
            pulse.failed(answer)
        else:
            pulse.record(answer, at)
            pulse.name = names.get(answer.server_id, pulse.name)
        self.version += 1


def reachable_url(url: str, endpoint: str) -> str:
    """A member's metrics URL as the console can reach it: one bound to every address
    (0.0.0.0, ::) is read at the host the console reaches the member's client port on."""
    parts = urllib.parse.urlsplit(url)
    if parts.hostname not in ("0.0.0.0", "::", "") or parts.port is None:
        return url
    host = endpoint.rsplit(":", 1)[0] or "127.0.0.1"
    return f"http://{host}:{parts.port}"


def _get(url: str, timeout: float) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 (an http URL)
        return r.read().decode()


async def scrape(url: str, timeout: float = TIMEOUT_S) -> Sample | str:
    """One member's /metrics parsed, or why it did not answer (in `timeout` at most)."""
    try:
        text = await asyncio.wait_for(
            asyncio.to_thread(_get, url.rstrip("/") + "/metrics", timeout), timeout)
        return parse(text)
    except TimeoutError:
        return f"no answer in {timeout:g}s"
    except (OSError, ValueError) as e:
        return str(getattr(e, "reason", None) or e)
