"""Single-owner claims on (group, resource), with fencing generations.

The `own` API of Kafka's single reader/writer specification, judged per resource against
the state before the command:
  - no owner: the requester owns it, at generation 1 the first time ever and at the
    remembered last generation + 1 after a release/expiry/close/sever;
  - the requester already owns it: idempotent, same generation (whatever was requested,
    even 0: a retried claim must never bump a generation or sever anyone);
  - the owner's generation > requested (and requested != 0): the claim fails;
  - the owner's generation <= requested: that owner's session is severed (everything it
    holds is released and it ends) and the requester owns it at max(current, requested)+1;
  - requested 0: always succeeds, severs any owner, resets the generation to 1.
One `own` is all-or-nothing: if any resource fails, nothing changes and the result lists
every conflict. Grants carry the revision they happened at (an idempotent grant keeps its
original revision). Resource slots are kept after release so generations never repeat.
Every change is also recorded, with why it happened, in a bounded `OwnerHistory`, so a
watch can replay what it missed (`events_since`).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator, Sequence
from typing import Any

from coord.sm import canonical_json, limits
from coord.sm.errors import (
    INVALID_ARGUMENT,
    LIMIT_EXCEEDED,
    OWNED_BY_HIGHER_GENERATION,
    TOO_LARGE,
    CommandError,
)
from coord.sm.ledger import operation
from coord.sm.owner_history import DEFAULT_HISTORY_LIMIT, OwnerHistory
from coord.sm.records import (
    EXPIRE,
    EXPIRED,
    GRANT,
    RELEASE,
    RELEASED,
    RESET,
    SEVER,
    SEVERED,
    Claim,
    Conflict,
    Grant,
    Owner,
    OwnershipEvent,
    SessionEvent,
)
from coord.sm.results import (
    ListOwnersResult,
    OwnerEventsResult,
    OwnerResult,
    OwnResult,
    ReleaseResult,
)
from coord.sm.sessions import Session, SessionTable

# What a session's end means for each resource it held.
_END_KINDS = {RELEASED: RELEASE, EXPIRED: EXPIRE, SEVERED: SEVER}


class _Slot:
    """One (group, resource): its owner (0 if free), generation and last change. Never
    changed once made: a change puts a new slot in its place, so a snapshot's capture can
    hold a copy of the group's dict and read it later, a slice at a time."""

    __slots__ = ("owner", "generation", "revision")

    def __init__(self, owner: int, generation: int, revision: int) -> None:
        self.owner = owner
        self.generation = generation
        self.revision = revision


def _check_name(v: Any, what: str) -> None:
    if type(v) is not str or not v:
        raise CommandError(INVALID_ARGUMENT, f"{what} must be a non-empty str")
    if len(v) > limits.MAX_NAME_BYTES // 4 and limits.utf8_len(v) > limits.MAX_NAME_BYTES:
        raise CommandError(TOO_LARGE, f"{what} longer than {limits.MAX_NAME_BYTES} bytes")


def _check_count(items: Any, what: str) -> None:
    if not isinstance(items, (list, tuple)) or not items:
        raise CommandError(INVALID_ARGUMENT, f"{what} must be a non-empty sequence")
    if len(items) > limits.MAX_CLAIMS:
        raise CommandError(TOO_LARGE, f"more than {limits.MAX_CLAIMS} {what}")


class OwnershipTable:
    def __init__(
        self, sessions: SessionTable | None = None, history_limit: int = DEFAULT_HISTORY_LIMIT
    ) -> None:
        self.sessions = SessionTable() if sessions is None else sessions
        self.ledger = self.sessions.ledger
        self.history = OwnerHistory(history_limit)
        self._groups: dict[str, dict[str, _Slot]] = {}
        self.sessions.add_releaser(self._release_session)

    @operation(OwnResult)
    def own(self, session_id: int, group: str, claims: Sequence[tuple[str, int]]) -> OwnResult:
        requester = self.sessions.require(session_id)
        _check_name(group, "group")
        _check_count(claims, "claims")
        seen: set[str] = set()
        for claim in claims:
            if not isinstance(claim, (tuple, list)) or len(claim) != 2:
                raise CommandError(INVALID_ARGUMENT, "a claim is a (resource, generation) pair")
            resource, generation = claim
            _check_name(resource, "resource")
            if type(generation) is not int or not 0 <= generation <= limits.MAX_CLAIM_GENERATION:
                raise CommandError(INVALID_ARGUMENT, f"generation must be within [0, "
                                   f"{limits.MAX_CLAIM_GENERATION}], got {generation!r:.40}")
            if resource in seen:
                raise CommandError(INVALID_ARGUMENT, f"resource {resource!r:.60} claimed twice")
            seen.add(resource)

        # Judge every claim against the state before the command.
        slots = self._groups.get(group, {})
        # (resource, new generation, kind of change)
        plan: list[tuple[str, int, str]] = []
        kept: dict[str, _Slot] = {}  # already the requester's
        victims: dict[int, list[Claim]] = {}
        conflicts: list[Conflict] = []
        for resource, requested in claims:
            slot = slots.get(resource)
            if slot is None or slot.owner == 0:
                generation = 1 if slot is None or requested == 0 else slot.generation + 1
            elif slot.owner == session_id:
                kept[resource] = slot
                continue
            elif requested == 0:
                generation = 1
                victims.setdefault(slot.owner, []).append(Claim(resource, generation))
            elif slot.generation > requested:
                conflicts.append(Conflict(resource, slot.owner, slot.generation))
                continue
            else:
                generation = max(slot.generation, requested) + 1
                victims.setdefault(slot.owner, []).append(Claim(resource, generation))
            kind = RESET if requested == 0 and slot is not None else GRANT
            plan.append((resource, generation, kind))
        if conflicts:
            first = conflicts[0]
            return OwnResult(
                error=OWNED_BY_HIGHER_GENERATION,
                message=f"{len(conflicts)} resource(s) owned at a higher generation, e.g. "
                f"{first.resource!r:.60} by session {first.owner} at generation "
                f"{first.generation}; nothing was claimed",
                revision=self.ledger.revision, group=group, conflicts=tuple(conflicts))

        if len(requester.owned) + len(plan) > limits.MAX_OWNED_PER_SESSION:
            raise CommandError(LIMIT_EXCEEDED, f"session {session_id} owns "
                               f"{len(requester.owned)} resources and claims {len(plan)} "
                               f"more; one session may own at most "
                               f"{limits.MAX_OWNED_PER_SESSION}: nothing was claimed")
        revision = self.ledger.touch() if plan else self.ledger.revision
        if plan:
            slots = self._groups.setdefault(group, slots)
            # Take the contested resources out of their victims' hands first, so severing
            # a victim releases only the rest of what it holds.
            for owner, taken in victims.items():
                owned = self.sessions.require(owner).owned
                for claim in taken:
                    owned.discard((group, claim.resource))
            for owner, taken in victims.items():
                self.sessions.sever(owner, group, taken, new_owner=session_id)
            owned = requester.owned
            events = []
            for resource, generation, kind in plan:
                slots[resource] = _Slot(session_id, generation, revision)
                owned.add((group, resource))
                events.append(OwnershipEvent(group, resource, session_id, generation, revision,
                                             kind))
            self._changed(events)
        grants = []
        for resource, _ in claims:
            slot = kept.get(resource) or slots[resource]
            grants.append(Grant(resource, slot.generation, slot.revision))
        return OwnResult(revision=revision, group=group, grants=tuple(grants),
                         severed=tuple(victims))

    @operation(ReleaseResult)
    def release(self, session_id: int, group: str, resources: Sequence[str]) -> ReleaseResult:
        """Give up resources; ones the session does not own are skipped (a retry is safe)."""
        session = self.sessions.require(session_id)
        _check_name(group, "group")
        _check_count(resources, "resources")
        for resource in resources:
            _check_name(resource, "resource")
        slots = self._groups.get(group, {})
        mine = [r for r in dict.fromkeys(resources)
                if (s := slots.get(r)) is not None and s.owner == session_id]
        if not mine:
            return ReleaseResult(revision=self.ledger.revision, group=group)
        revision = self.ledger.touch()
        for resource in mine:
            session.owned.discard((group, resource))
        self._changed([self._free(group, resource, revision, RELEASE) for resource in mine])
        return ReleaseResult(revision=revision, group=group, released=tuple(mine))

    @operation(OwnerResult)
    def get_owner(self, group: str, resource: str) -> OwnerResult:
        _check_name(group, "group")
        _check_name(resource, "resource")
        slot = self._groups.get(group, {}).get(resource)
        if slot is None:
            return OwnerResult(revision=self.ledger.head, group=group, resource=resource)
        return OwnerResult(revision=self.ledger.head, group=group, resource=resource,
                           owner=slot.owner, generation=slot.generation,
                           owner_revision=slot.revision)

    @operation(ListOwnersResult)
    def list_owners(self, group: str, prefix: str = "") -> ListOwnersResult:
        """Currently owned resources of `group` starting with `prefix`, sorted."""
        _check_name(group, "group")
        if type(prefix) is not str:
            raise CommandError(INVALID_ARGUMENT, "prefix must be a str")
        slots = self._groups.get(group, {})
        owners = tuple(Owner(r, s.owner, s.generation, s.revision) for r, s in sorted(
            slots.items()) if s.owner and r.startswith(prefix))
        return ListOwnersResult(revision=self.ledger.head, group=group, owners=owners)

    @operation(OwnerEventsResult)
    def events_since(self, revision: int, group: str, prefix: str = "") -> OwnerEventsResult:
        """Changes in `group` under `prefix` at revisions >= `revision`, for a watch
        starting there; COMPACTED (with the compact revision) if some were forgotten."""
        _check_name(group, "group")
        if type(prefix) is not str:
            raise CommandError(INVALID_ARGUMENT, "prefix must be a str")
        if type(revision) is not int or not 1 <= revision <= canonical_json.INT64_MAX:
            raise CommandError(INVALID_ARGUMENT, f"revision must be an int >= 1, got "
                               f"{revision!r:.40}")
        events = self.history.since(revision, group, prefix)
        return OwnerEventsResult(revision=self.ledger.head, group=group, events=events,
                                 compact_revision=self.history.compact_revision)

    def slot_count(self) -> int:
        """Resources with a slot (owned or freed: both are kept, with their generation),
        counted per group, not per resource."""
        return sum(len(slots) for slots in self._groups.values())

    def all_owners(self) -> list[tuple[str, Owner]]:
        """Every owned resource of every group as (group, owner), sorted: for inspection
        (an operator's console), not a replicated command."""
        return [(group, Owner(r, s.owner, s.generation, s.revision))
                for group, slots in sorted(self._groups.items())
                for r, s in sorted(slots.items()) if s.owner]

    def owned_count(self) -> int:
        return sum(1 for slots in self._groups.values() for s in slots.values() if s.owner)

    def owned_per_group(self) -> dict[str, int]:
        """Owned resources in each group that has a slot (0 when all are free): for a
        member's metrics, not a replicated command."""
        return {group: sum(1 for s in slots.values() if s.owner)
                for group, slots in self._groups.items()}

    def _free(self, group: str, resource: str, revision: int, kind: str) -> OwnershipEvent:
        """Free a resource; the event to record (`_changed`) for it."""
        slots = self._groups[group]
        generation = slots[resource].generation
        slots[resource] = _Slot(0, generation, revision)
        return OwnershipEvent(group, resource, 0, generation, revision, kind)

    def _changed(self, events: list[OwnershipEvent]) -> None:
        self.history.extend(events)
        self.ledger.emit_all(events)

    def _release_session(self, session: Session, ended: SessionEvent) -> None:
        kind = _END_KINDS[ended.type]
        self._changed([self._free(group, resource, ended.revision, kind)
                       for group, resource in sorted(session.owned)])
        session.owned.clear()

    # -- snapshot ------------------------------------------------------------------------

    def capture(self) -> canonical_json.Pieces:
        """This table now, cheaply: a copy of each group's dict (slots never change, see
        `_Slot`), made JSON later, a slice at a time: the rows must come out sorted by
        resource, and sorting 1M names (and making their rows) at capture held the loop
        1.7 s. So the names are sorted in runs, one run per piece, and merged."""
        groups = [(group, slots.copy()) for group, slots in sorted(self._groups.items())]
        return canonical_json.Pieces(_state_pieces(groups))

    def load_state(self, state: list) -> None:
        self._groups = {}
        for group, rows in state:
            slots: dict[str, _Slot] = {}
            for resource, owner, generation, revision in rows:
                if not all(type(x) is int for x in (owner, generation, revision)):
                    raise ValueError("bad ownership record")
                slots[resource] = _Slot(owner, generation, revision)
                if owner:
                    session = self.sessions.get(owner)
                    if session is None:
                        raise ValueError(f"resource owned by unknown session {owner}")
                    session.owned.add((group, resource))
            self._groups[group] = slots

    def describe(self) -> dict:
        return {"groups": len(self._groups), "owned_resources": self.owned_count(),
                **self.history.describe()}


RUN = 5000
"""Names sorted, and rows made, per piece of a capture (a few milliseconds each)."""


def _state_pieces(groups: list[tuple[str, dict[str, _Slot]]]) -> Iterator[str]:
    """The text of `[[group, [[resource, owner, generation, revision], ...]], ...]` (groups
    and resources sorted), in pieces: each run of names is sorted in a piece of its own
    (an empty one), then the runs are merged lazily and their rows written a run at a
    time."""
    encode = canonical_json.encode_text
    yield "["
    for g, (group, slots) in enumerate(groups):
        yield ("," if g else "") + "[" + encode(group) + ",["
        names = list(slots)
        runs = []
        for start in range(0, len(names), RUN):
            runs.append(sorted(names[start:start + RUN]))
            yield ""
        merged = heapq.merge(*runs)
        first = True
        while batch := list(itertools.islice(merged, RUN)):
            rows = [[r, s.owner, s.generation, s.revision] for r in batch for s in (slots[r],)]
            yield ("" if first else ",") + encode(rows)[1:-1]
            first = False
        yield "]]"
    yield "]"
