"""`TableView`: a view over one model table, drawn by a virtualised DataTable (it renders
only the rows on screen) and updated row by row from what changed since the last
draw. It owns the view's filter, scope (a drill-down such as "owners of session 7") and
marks (space marks a row, ctrl+space the range from the last mark, * every filtered
row, u clears); actions apply to the marked rows, or to the row under the cursor."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from rich.markup import escape
from rich.text import Text
from textual.containers import Vertical
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Static

from coord.tui.format import Filter
from coord.tui.model import ClusterModel, Table

Scope = tuple[str, Callable[[Any], bool]]  # (what it says, which rows it keeps)
Draw = Callable[[Any, Any], tuple[Any, ...] | None]  # (key, row) -> its cells; None: not kept


def fill(table: DataTable, source: Table, ids: dict[str, Hashable],
         row_id: Callable[[Any], str], draw: Draw) -> None:
    """Draw every row of `source` that `draw` keeps; `ids` maps the row ids drawn to
    their keys."""
    table.clear()
    ids.clear()
    source.take()
    for key in sorted(source.rows):
        cells = draw(key, source.rows[key])
        if cells is not None:
            ids[row_id(key)] = key
            table.add_row(*cells, key=row_id(key))


def update(table: DataTable, source: Table, ids: dict[str, Hashable],
           row_id: Callable[[Any], str], draw: Draw,
           columns: Sequence[tuple[str, str]]) -> list[str]:
    """Apply the rows of `source` changed since the last draw (new rows go at the end);
    the ids of the rows it removed."""
    removed = []
    for key in source.take():
        rid, row = row_id(key), source.rows.get(key)
        cells = None if row is None else draw(key, row)
        if cells is None:
            if rid in ids:
                table.remove_row(rid)
                del ids[rid]
                removed.append(rid)
        elif rid in ids:
            for (col, _), value in zip(columns, cells, strict=True):
                table.update_cell(rid, col, value)
        else:
            ids[rid] = key
            table.add_row(*cells, key=rid)
    return removed


def refusal(model: ClusterModel, view: str) -> list[str]:
    """What a view's title says while the cluster refuses the console what it shows."""
    denied = model.denied.get(view)
    return [f"[b red]PERMISSION_DENIED[/]: {escape(denied)}"] if denied else []


class TableView(Vertical):
    """Subclasses set `view`, `columns` ((key, label) pairs) and `table_of`, and
    `cells(row)`; `describe(row)` feeds d/y."""

    view = ""
    title = ""
    columns: Sequence[tuple[str, str]] = ()
    help: Sequence[tuple[str, str]] = ()  # (key, what it does) beyond the common ones
    # fixed column widths: DataTable measures every cell of an auto-width column, which
    # costs seconds for 10,000 rows; big tables say their widths
    widths: dict[str, int] = {}

    def __init__(self, model: ClusterModel) -> None:
        super().__init__(id=f"view-{self.view}")
        self.model = model
        self.filter = Filter()
        self.scope: Scope | None = None
        self.marked: set[str] = set()
        self._last_mark: str | None = None
        self._ids: dict[str, Hashable] = {}
        self._version = -1

    # -- what subclasses say --------------------------------------------------------------
    def table_of(self, model: ClusterModel) -> Table:
        raise NotImplementedError

    def cells(self, row: Any) -> tuple[Any, ...]:
        raise NotImplementedError

    def row_id(self, key: Hashable) -> str:
        return str(key)

    def describe(self, row: Any) -> dict:
        return {name: getattr(row, name) for name in getattr(row, "__dataclass_fields__", {})}

    # -- widgets --------------------------------------------------------------------------
    def compose(self):
        yield Static(self.title, classes="view-title", id=f"title-{self.view}")
        table = DataTable(id=f"table-{self.view}", cursor_type="row", zebra_stripes=True)
        yield table

    def on_mount(self) -> None:
        self.add_columns()
        self.rebuild()

    def add_columns(self) -> None:
        for key, label in self.columns:
            self.data_table.add_column(label, key=key, width=self.widths.get(key))

    @property
    def data_table(self) -> DataTable:
        return self.query_one(DataTable)

    # -- filtering and drawing ------------------------------------------------------------
    def keeps(self, row: Any) -> bool:
        if self.scope is not None and not self.scope[1](row):
            return False
        return self.filter.keeps(" ".join(str(c) for c in self.cells(row)))

    def _draw(self, key: Hashable, row: Any) -> tuple[Any, ...]:
        cells = self.cells(row)
        rid = self.row_id(key)
        if rid in self.marked:
            return tuple(Text(str(c), style="bold reverse") for c in cells)
        return cells

    def _kept(self, key: Hashable, row: Any) -> tuple[Any, ...] | None:
        return self._draw(key, row) if self.keeps(row) else None

    def rebuild(self) -> None:
        """Draw every kept row again (a filter or scope changed)."""
        table, source = self.data_table, self.table_of(self.model)
        cursor = self.current_id()
        fill(table, source, self._ids, self.row_id, self._kept)
        self._version = source.version
        self.update_title()
        if cursor is not None and cursor in self._ids:
            table.move_cursor(row=table.get_row_index(cursor))

    def sync(self) -> None:
        """Apply the rows changed since the last draw."""
        source = self.table_of(self.model)
        if source.version == self._version or self.view in self.model.loading:
            return
        self._version = source.version
        self.marked.difference_update(update(self.data_table, source, self._ids, self.row_id,
                                             self._kept, self.columns))
        self.update_title()

    def tick(self) -> None:
        """Once a second while shown (counters that move with time)."""

    def update_title(self) -> None:
        parts = [f"{self.title} [{len(self._ids)}/{len(self.table_of(self.model))}]"]
        if self.scope is not None:
            parts.append(f"<{self.scope[0]}>")
        if self.filter:
            parts.append(f"/{self.filter}")
        if self.marked:
            parts.append(f"{len(self.marked)} marked")
        parts += refusal(self.model, self.view)
        self.query_one(f"#title-{self.view}", Static).update("  ".join(parts))

    def set_filter(self, f: Filter) -> None:
        self.filter = f
        self.rebuild()

    def set_scope(self, scope: Scope | None) -> None:
        self.scope = scope
        self.rebuild()

    # -- selection ------------------------------------------------------------------------
    def current_id(self) -> str | None:
        table = self.data_table
        if table.row_count == 0:
            return None
        row = min(table.cursor_row, table.row_count - 1)
        return table.coordinate_to_cell_key(Coordinate(row, 0)).row_key.value

    def current(self) -> Any | None:
        rid = self.current_id()
        if rid is None:
            return None
        return self.table_of(self.model).get(self._ids[rid])

    def selected(self) -> list[Any]:
        """The marked rows still present, else the row under the cursor."""
        source = self.table_of(self.model)
        rows = [source.get(self._ids[r]) for r in sorted(self.marked) if r in self._ids]
        rows = [r for r in rows if r is not None]
        if rows:
            return rows
        cur = self.current()
        return [cur] if cur is not None else []

    def select(self, key: Hashable) -> bool:
        rid = self.row_id(key)
        if rid not in self._ids:
            return False
        self.data_table.move_cursor(row=self.data_table.get_row_index(rid))
        return True

    def _redraw_row(self, rid: str) -> None:
        key = self._ids.get(rid)
        row = self.table_of(self.model).get(key) if key is not None else None
        if row is None:
            return
        for (col, _), value in zip(self.columns, self._draw(key, row), strict=True):
            self.data_table.update_cell(rid, col, value)

    def toggle_mark(self) -> None:
        rid = self.current_id()
        if rid is None:
            return
        self.marked.symmetric_difference_update({rid})
        self._last_mark = rid if rid in self.marked else self._last_mark
        self._redraw_row(rid)
        self.data_table.move_cursor(row=self.data_table.cursor_row + 1)
        self.update_title()

    def mark_range(self) -> None:
        rid = self.current_id()
        if rid is None or self._last_mark not in self._ids:
            self.toggle_mark()
            return
        table = self.data_table
        a, b = sorted((table.get_row_index(self._last_mark), table.cursor_row))
        ordered = sorted(self._ids, key=table.get_row_index)
        for r in ordered[a:b + 1]:
            self.marked.add(r)
            self._redraw_row(r)
        self.update_title()

    def mark_all(self) -> None:
        self.marked = set(self._ids)
        self.rebuild()

    def clear_marks(self) -> None:
        self.marked.clear()
        self.rebuild()
