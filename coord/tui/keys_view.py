"""The keys view: a tree of the keyspace split on `/` (children made when a node is
opened, so 10,000 keys cost what is on screen), and the selected key's value (text,
JSON or hex, `v` cycles), revisions, version and session; `h` its history."""

from __future__ import annotations

import bisect
from functools import partial
from typing import Any

from rich.markup import escape
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static, Tree
from textual.widgets._tree import TreeNode

from coord.tui.actions import Action, Writer
from coord.tui.format import VALUE_MODES, Filter, key_text, value_text
from coord.tui.model import ClusterModel, KeyRow
from coord.tui.tables import refusal

DIR, KEY = "dir", "key"


class KeysView(Horizontal):
    view = "keys"
    title = "Keys"
    help = (("enter", "open / close a folder"), ("v", "value as text / JSON / hex"),
            ("h", "the key's history"), ("e", "put the key (edit its value)"),
            ("n", "put a new key"), ("ctrl+d", "delete the key"),
            ("c", "compact history before the current revision"))

    def __init__(self, model: ClusterModel) -> None:
        super().__init__(id="view-keys")
        self.model = model
        self.filter = Filter()
        self.scope = None
        self.value_mode = VALUE_MODES[0]
        self._version = -1
        self._texts: list[str] = []  # sorted key texts of the kept keys
        self._by_text: dict[str, bytes] = {}

    def compose(self):
        with Vertical(id="keys-left"):
            yield Static("Keys", classes="view-title", id="title-keys")
            yield Tree("/", data=(DIR, ""), id="keys-tree")
        with VerticalScroll(id="keys-right"):
            yield Static("", id="key-detail")

    def on_mount(self) -> None:
        self.rebuild()

    @property
    def tree(self) -> Tree:
        return self.query_one("#keys-tree", Tree)

    # -- the keyspace ---------------------------------------------------------------------
    def _index(self) -> None:
        """Take the model's changes and list the kept keys again."""
        self._version = self.model.keys.version
        self.model.keys.take()
        self._by_text = {}
        for k in self.model.keys.rows:
            text = key_text(k)
            if self.filter.keeps(text):
                self._by_text[text] = k
        self._texts = sorted(self._by_text)

    def entries(self, prefix: str) -> list[tuple[str, str, str]]:
        """(kind, data, label) under `prefix`: folders first, then keys."""
        dirs: dict[str, None] = {}
        leaves: list[tuple[str, str, str]] = []
        at = bisect.bisect_left(self._texts, prefix)
        while at < len(self._texts) and self._texts[at].startswith(prefix):
            rest = self._texts[at][len(prefix):]
            head, sep, _ = rest.partition("/")
            if sep:
                dirs.setdefault(head, None)
                at = bisect.bisect_left(self._texts, prefix + head + "0")  # "/"+1 == "0"
                continue
            leaves.append((KEY, self._texts[at], rest or "(empty)"))
            at += 1
        return [(DIR, prefix + d + "/", d + "/") for d in dirs] + leaves

    def _fill(self, node: TreeNode) -> None:
        kind, prefix = node.data
        expanded = {c.data[1] for c in node.children if c.is_expanded}
        node.remove_children()
        for ckind, data, label in self.entries(prefix):
            if ckind == DIR:
                child = node.add(label, data=(DIR, data))
                if data in expanded:
                    self._fill(child)
                    child.expand()
            else:
                node.add_leaf(label, data=(KEY, data))

    def rebuild(self) -> None:
        self._index()
        root = self.tree.root
        self._fill(root)
        root.expand()
        self.update_title()
        self.show_detail()

    def sync(self) -> None:
        """Re-list the open folders whose children changed."""
        if self.model.keys.version != self._version:
            self._index()
            self._refresh(self.tree.root)
            self.update_title()
            self.show_detail()

    def _refresh(self, node: TreeNode) -> None:
        if node.data[0] != DIR or not (node.is_expanded or node.is_root):
            return
        want = [(k, d) for k, d, _ in self.entries(node.data[1])]
        have = [tuple(c.data) for c in node.children]
        if want != have:
            self._fill(node)
        else:
            for child in node.children:
                self._refresh(child)

    def update_title(self) -> None:
        parts = [f"Keys [{len(self._texts)}/{len(self.model.keys)}]  rev {self.model.revision}"]
        if self.filter:
            parts.append(f"/{self.filter}")
        parts += refusal(self.model, "keys")
        self.query_one("#title-keys", Static).update("  ".join(parts))

    def on_tree_node_expanded(self, event: Tree.NodeExpanded) -> None:
        if event.node.data and event.node.data[0] == DIR and not event.node.children:
            self._fill(event.node)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted) -> None:
        self.show_detail()

    # -- the selected key -----------------------------------------------------------------
    def current(self) -> KeyRow | None:
        node = self.tree.cursor_node
        if node is None or not node.data or node.data[0] != KEY:
            return None
        key = self._by_text.get(node.data[1])
        return self.model.keys.get(key) if key is not None else None

    def selected(self) -> list[KeyRow]:
        cur = self.current()
        return [cur] if cur is not None else []

    def current_prefix(self) -> str:
        node = self.tree.cursor_node
        if node is None or not node.data:
            return ""
        kind, data = node.data
        return data if kind == DIR else data.rpartition("/")[0] + ("/" if "/" in data else "")

    def show_detail(self) -> None:
        row = self.current()
        detail = self.query_one("#key-detail", Static)
        if row is None:
            node = self.tree.cursor_node
            prefix = node.data[1] if node is not None and node.data else ""
            n = sum(1 for t in self._texts if t.startswith(prefix))
            detail.update(f"[b]{escape(prefix or '/')}[/b]\n{n} key(s) below")
            return
        detail.update(_detail_text(row, self.value_mode))

    def cycle_value_mode(self) -> None:
        i = VALUE_MODES.index(self.value_mode)
        self.value_mode = VALUE_MODES[(i + 1) % len(VALUE_MODES)]
        self.show_detail()

    def describe(self, row: KeyRow) -> dict:
        return {"key": key_text(row.key), "create_revision": row.create_revision,
                "mod_revision": row.mod_revision, "version": row.version,
                "session_id": row.session_id, "value": value_text(row.value, "text")}

    def set_filter(self, f: Filter) -> None:
        self.filter = f
        self.rebuild()

    def set_scope(self, scope: Any) -> None:
        self.rebuild()

    def tick(self) -> None:
        pass

    # -- actions --------------------------------------------------------------------------
    def request(self, kind: str) -> Action | str | None:
        row = self.current()
        if kind == "delete":
            if row is None:
                return "select a key (folders are not deleted as a whole)"
            bound = f" (bound to session {row.session_id})" if row.session_id else ""
            return Action(f"Delete key {key_text(row.key)!r}{bound} at version "
                          f"{row.version}?", partial(Writer.delete, key=row.key))
        if kind == "compact":
            revision = self.model.revision
            if revision < 3:  # an empty cluster is at 1, its first write at 2: at most
                return "nothing to compact yet"  # the empty state before it to forget
            return Action(f"Compact the history before revision {revision}? Watches and "
                          "reads at older revisions will fail.",
                          partial(Writer.compact, revision=revision))
        return None


def _detail_text(row: KeyRow, mode: str) -> str:
    session = f"session {row.session_id}" if row.session_id else "none"
    return (f"[b]{escape(key_text(row.key))}[/b]\n"
            f"create rev {row.create_revision}   mod rev {row.mod_revision}   "
            f"version {row.version}   bound to {session}   {len(row.value)} bytes\n"
            f"value as {mode} (v cycles):\n\n{escape(value_text(row.value, mode))}")
