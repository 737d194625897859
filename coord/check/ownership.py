"""Ownership safety over an oplog: one owner per resource per generation,
generations that rise with the revision, and a fenced sink that never accepted an older
token or a token nobody was granted.

Rows (coord.check.oplog): `own` ok carries group, resource, session, generation and
revision (the grant: the fencing token); `write_fenced` is a write to the sink with the
writer's token (session, group, resource, generation, revision): ok = the sink accepted
it, with the sink's acceptance order in `sequence`; fail = the sink refused it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from coord.check.oplog import pair
from coord.check.result import CheckResult


def check_ownership(rows: Iterable[dict[str, Any]]) -> CheckResult:
    res = CheckResult("ownership")
    ops = pair(r for r in rows if r.get("f") in ("own", "write_fenced"))
    grants: dict[tuple, dict[int, dict[str, tuple]]] = defaultdict(lambda: defaultdict(dict))
    writes: dict[tuple, list] = defaultdict(list)
    for op in ops:
        if op.status != "ok":
            continue
        resource = (op.get("group"), op.get("resource"))
        if op.f == "own":
            gen, rev, sess = op.get("generation"), op.get("revision"), op.get("session")
            grants[resource][gen].setdefault(sess, (rev, op))
        else:
            writes[resource].append(op)
    n_grants = 0
    for resource, by_gen in grants.items():
        for gen, holders in by_gen.items():
            n_grants += 1
            if len(holders) > 1:
                res.violation(
                    f"{_name(resource)}: generation {gen} granted to {len(holders)} sessions "
                    f"({', '.join(map(str, holders))})",
                    ops=[h[1].rows() for h in holders.values()])
        # by (revision, generation) only: two grants of one token tie there, and ops
        # do not compare
        order = sorted(((rev, gen, op) for gen, holders in by_gen.items()
                        for rev, op in holders.values()), key=lambda t: t[:2])
        for (r1, g1, o1), (r2, g2, o2) in zip(order, order[1:], strict=False):
            if g2 < g1:
                res.violation(f"{_name(resource)}: generation went back from {g1} (revision "
                              f"{r1}) to {g2} (revision {r2})", ops=[o1.rows(), o2.rows()])
    n_writes = 0
    for resource, ws in writes.items():
        ws.sort(key=lambda op: op.get("sequence"))
        by_gen_writer: dict[int, dict[Any, Any]] = defaultdict(dict)
        for prev, op in zip([None, *ws], ws, strict=False):
            n_writes += 1
            gen, rev, sess = op.get("generation"), op.get("revision"), op.get("session")
            held = grants.get(resource, {}).get(gen, {}).get(sess)
            if held is None or held[0] != rev:
                res.violation(f"{_name(resource)}: the sink accepted token ({gen}, {rev}) from "
                              f"session {sess}, which was never granted it", ops=[op.rows()])
            by_gen_writer[gen].setdefault(sess, op)
            if prev is not None:
                t_prev = (prev.get("generation"), prev.get("revision"))
                if (gen, rev) < t_prev:
                    res.violation(f"{_name(resource)}: the sink accepted older token "
                                  f"({gen}, {rev}) after {t_prev}",
                                  ops=[prev.rows(), op.rows()])
        for gen, writers in by_gen_writer.items():
            if len(writers) > 1:
                res.violation(f"{_name(resource)}: {len(writers)} sessions had writes accepted "
                              f"at generation {gen}", ops=[o.rows() for o in writers.values()])
    res.stats = {"grants": n_grants, "accepted_writes": n_writes, "resources": len(grants),
                 "refused_writes": sum(1 for o in ops
                                       if o.f == "write_fenced" and o.status == "fail")}
    return res


def _name(resource: tuple) -> str:
    return f"{resource[0]}/{resource[1]}"
