"""One-line renderings of messages, entries and Readys for the simulator's traces
(``-v``, ``-vv``) and its violation reports, and for the scenario tests' traces."""

from __future__ import annotations

from coord.raft.rawnode import conf_change_of
from coord.raft.types import Entry, EntryType, Message, MessageType, Ready

MT = MessageType


def fmt_message(m: Message) -> str:
    s = f"{m.frm}->{m.to} {m.type.name} t{m.term}"
    if m.type in (MT.APP, MT.VOTE, MT.PRE_VOTE):
        s += f" i{m.index} lt{m.log_term}"
    elif m.type in (MT.APP_RESP, MT.READ_INDEX_RESP, MT.TRANSFER_LEADER):
        s += f" i{m.index}"
    if m.type in (MT.APP, MT.HEARTBEAT):
        s += f" c{m.commit}"
    if m.entries:
        s += f" ents={m.entries[0].index}..{m.entries[-1].index}"
    if m.snapshot is not None:
        s += f" snap@{m.snapshot.meta.index}/t{m.snapshot.meta.term}"
    if m.reject:
        s += f" REJECT hint={m.reject_hint}/t{m.log_term}"
    if m.context:
        s += f" ctx={m.context.decode(errors='replace')}"
    return s


def show_entry(e: Entry) -> str:
    if e.type is EntryType.CONF_CHANGE:
        cc = conf_change_of(e)
        return f"{cc.type.name} {cc.node_id}"
    return e.data.decode(errors="replace") or "<empty>"


def show_ready(rd: Ready) -> str:
    parts = []
    if rd.entries:
        parts.append(f"entries {rd.entries[0].index}..{rd.entries[-1].index}")
    if rd.hard_state is not None:
        hs = rd.hard_state
        parts.append(f"hs t{hs.term} v{hs.vote} c{hs.commit}")
    if rd.snapshot is not None:
        parts.append(f"snapshot@{rd.snapshot.meta.index}")
    if rd.messages:
        parts.append(f"{len(rd.messages)} msgs")
    if rd.committed_entries:
        parts.append(f"apply {rd.committed_entries[0].index}..{rd.committed_entries[-1].index}")
    return ", ".join(parts) or "empty"
