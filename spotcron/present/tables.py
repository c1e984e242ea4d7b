"""Tables that never cut a value.

A pipe (a file, `| cat`, `| grep`) gets every column and every value in full: the console is
widened to the table's natural width for the print, so rich neither shortens nor wraps a cell.
A terminal that is too narrow loses whole columns, lowest priority first, and a dim line says
which ones and how to see them. Only a column of prose named `squeeze` (a run's reason) is
shortened there, with an ellipsis, to what the other columns leave; no id or figure is ever cut. `--json` stays the
machine interface: these tables are for people. `print_whole` gives any other rich renderable (the
benchmark report's tables, `next`'s fire times) the same natural width in a pipe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spotcron.present.views import COLUMN_GAP, fit_columns


@dataclass(frozen=True)
class Columns:
    """The columns of one table: their order, which align right, and which go first when narrow."""

    names: tuple[str, ...]
    drop_order: tuple[str, ...] = ()  # first named = first dropped; columns not named always stay
    right: frozenset[str] = field(default_factory=frozenset)
    squeeze: frozenset[str] = field(default_factory=frozenset)  # prose a terminal may end with "…"


SQUEEZE_MIN = 20  # a squeezed column narrower than this says too little: it is dropped instead


def squeezed_widths(columns: Columns, widths: Mapping[str, int], shown: Sequence[str], available: int,
                    gap: int) -> dict[str, int]:
    """The width each shown `squeeze` column gets in a terminal of `available` columns (only those
    that must be shortened): what the other shown columns leave, shared, never under SQUEEZE_MIN."""
    prose = [c for c in shown if c in columns.squeeze]
    if not prose:
        return {}
    others = sum(widths[c] for c in shown if c not in columns.squeeze) + gap * (len(shown) - 1)
    room = max(SQUEEZE_MIN, (available - others) // len(prose))
    return {c: room for c in prose if widths[c] > room}


def natural_widths(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> dict[str, int]:
    from rich.cells import cell_len

    def width(text: str) -> int:  # a cell may hold several lines: its widest one
        return max(cell_len(line) for line in text.split("\n"))

    return {c: max([width(c), *(width(row[i]) for row in rows)]) for i, c in enumerate(columns)}


def _printable(text: str) -> str:
    from spotcron.present.neutral import printable

    return printable(text, lines=True)  # a cell may hold lines of its own


def print_table(out: Any, columns: Columns, rows: Sequence[Sequence[str]], *,
                styles: Sequence[Mapping[str, str]] | None = None, title: str | None = None,
                hint: str = "--json has everything", sections: frozenset[int] = frozenset(),
                box: Any = None) -> list[str]:
    """Print `rows` (plain strings, one per column) and return the columns left out.

    `styles[i]` maps a column to a rich style for row i's cell. Cells are Text, never markup, so
    a value with square brackets prints as it is. A rule goes above each row numbered in
    `sections`; `box` is a rich box for tables that draw one under their header.
    """
    from rich.table import Table
    from rich.text import Text

    widths = natural_widths(columns.names, rows)
    gap = COLUMN_GAP + (0 if box is None else 1)  # a box draws a divider between two columns
    needed = sum(widths.values()) + gap * (len(widths) - 1)
    terminal = out.is_terminal
    fitting = {c: min(w, SQUEEZE_MIN) if c in columns.squeeze else w for c, w in widths.items()}
    shown = fit_columns(fitting, out.width, columns.drop_order, gap) if terminal else list(columns.names)
    squeezed = squeezed_widths(columns, widths, shown, out.width, gap) if terminal else {}
    # box=None, no edge padding and one space either side of a cell: COLUMN_GAP (2) between columns.
    table = Table(box=box, pad_edge=False, header_style="bold", title=title, title_justify="left",
                  show_edge=False)
    for column in shown:
        justify = "right" if column in columns.right else "left"
        if column in squeezed:
            table.add_column(column, no_wrap=True, overflow="ellipsis", max_width=squeezed[column], justify=justify)
            continue
        # In a terminal narrower than even the kept columns, cells fold onto more lines, never cut.
        table.add_column(column, no_wrap=not terminal, overflow="fold", min_width=None if terminal else widths[column],
                         justify=justify)
    positions = [columns.names.index(c) for c in shown]
    for number, row in enumerate(rows):
        if number in sections:
            table.add_section()
        style = styles[number] if styles else {}
        # Cells may hold what a job wrote (file names, reasons): never a terminal escape.
        table.add_row(*(Text(_printable(row[i]), style=style.get(columns.names[i], "")) for i in positions))
    if terminal:
        out.print(table)
    else:
        saved = out.width
        out.width = max(saved, needed)
        try:
            with out.capture() as captured:
                out.print(table)
        finally:
            out.width = saved
        # No padding after the last value: scripts split on whitespace and diff the lines.
        out.out("\n".join(line.rstrip() for line in captured.get().splitlines()), highlight=False)
    hidden = [c for c in columns.drop_order if c in columns.names and c not in shown]  # as dropped
    if hidden:
        out.print(f"[dim]left out to fit {out.width} columns: {', '.join(hidden)} ({hint})[/dim]")
    if squeezed:
        out.print(f"[dim]{', '.join(squeezed)} shortened with … to fit {out.width} columns ({hint})[/dim]")
    return hidden



def print_whole(out: Any, renderable: Any, *, page_width: int | None = None) -> None:
    """Print any rich renderable (a table with a caption, a few lines) as `print_table` prints its
    tables: in a terminal as it is, in a pipe at its natural width, so no word is folded in two.

    A table's title and caption start at its left edge. With `page_width` (the report's tables), a
    table wider than that in a pipe or a file is laid out for reading there: long text columns
    wrap at their words (sharing what the figures leave), and what is still too wide is split by columns into
    tables that each repeat the first column (the row's key); no figure is ever cut. The title and the
    caption are the page's, not a table's: they wrap at `page_width`, never at the width of a narrow part.
    """
    from rich.table import Table

    if isinstance(renderable, Table):
        renderable.title_justify = renderable.caption_justify = "left"
    if out.is_terminal:
        out.print(renderable)
        return
    if not (page_width and isinstance(renderable, Table)):
        _print_natural(out, renderable)
        return
    title, caption = _plain(renderable.title), _plain(renderable.caption)
    renderable.title = renderable.caption = None
    parts = split_wide(out, renderable, page_width)
    for number, part in enumerate(parts):
        if number:
            out.out("")  # a blank line between the parts of a split table
        if title:
            _print_words(out, f"{title} ({number + 1} of {len(parts)})" if len(parts) > 1 else title, page_width)
        _print_natural(out, part, trim=True)
    if caption:
        out.out("")
        _print_words(out, caption, page_width)


def _plain(text: Any) -> str:
    return "" if text is None else str(getattr(text, "plain", text))


def _print_words(out: Any, text: str, width: int) -> None:
    """`text` flush left, wrapped at its words at `width`; its own line breaks kept."""
    import textwrap

    lines = [part for line in text.split("\n")
             for part in textwrap.wrap(line, width, break_on_hyphens=False, break_long_words=False) or [""]]
    out.out("\n".join(lines), highlight=False)


def _print_natural(out: Any, renderable: Any, *, trim: bool = False) -> None:
    """At the renderable's natural width; `trim` drops the blank lines a table's edges leave below it."""
    from rich.measure import Measurement

    saved = out.width
    try:
        out.width = 10_000
        needed = Measurement.get(out, out.options, renderable).maximum
        out.width = max(saved, needed)
        with out.capture() as captured:
            out.print(renderable)
    finally:
        out.width = saved
    lines = [line.rstrip() for line in captured.get().splitlines()]
    while trim and lines and not lines[-1]:
        lines.pop()
    out.out("\n".join(lines), highlight=False)


TEXT_COLUMN_MIN = 24  # a column of words (hardware, a verdict) wraps, in a pipe, at no less than this


def split_wide(out: Any, table: Any, width: int) -> list[Any]:
    """`table` as tables no wider than `width` where that can be: text columns wrapped at their words,
    then the columns after the first split into groups, each a table repeating the first column."""
    from rich.cells import cell_len
    from rich.measure import Measurement

    def natural(column: Any) -> int:
        texts = [str(getattr(column.header, "plain", column.header))]
        texts += [str(getattr(cell, "plain", cell)) for cell in column.cells]
        return max((cell_len(line) for text in texts for line in text.split("\n")), default=0)

    gap = 1 + sum(table.padding[1::2]) if isinstance(table.padding, tuple) and len(table.padding) == 4 else 3

    def wraps(column: Any) -> bool:  # a column of words, not of figures
        return column.justify != "right" and any(" " in str(getattr(cell, "plain", cell)) for cell in column.cells)

    # Columns of words share what the others leave of `width`, each at least TEXT_COLUMN_MIN.
    text = [c for c in table.columns if wraps(c)]
    fixed = sum(natural(c) + gap for c in table.columns if not wraps(c))
    share = max(TEXT_COLUMN_MIN, (width - fixed) // len(text) - gap) if text else 0
    for column in text:
        if natural(column) > share:
            column.max_width, column.no_wrap, column.overflow = share, False, "fold"

    def measured(candidate: Any) -> int:
        saved = out.width
        try:
            out.width = 10_000
            return Measurement.get(out, out.options, candidate).maximum
        finally:
            out.width = saved

    if measured(table) <= width or len(table.columns) < 3:
        return [table]
    groups: list[list[int]] = [[]]
    for index in range(1, len(table.columns)):
        trial = [*groups[-1], index]
        if groups[-1] and measured(_part(table, [0, *trial])) > width:
            groups.append([index])
        else:
            groups[-1] = trial
    return [_part(table, [0, *group], number=number, count=len(groups)) for number, group in enumerate(groups)]


def _part(table: Any, indexes: list[int], *, number: int = 0, count: int = 1) -> Any:
    """The columns `indexes` of `table`, as part `number` of `count`: the caption under the last."""
    from rich.table import Table
    from rich.text import Text

    title = table.title
    if title is not None and count > 1:
        plain = str(getattr(title, "plain", title))
        title = Text(f"{plain} ({number + 1} of {count})")
    part = Table(title=title, caption=table.caption if number == count - 1 else None, box=table.box,
                 pad_edge=table.pad_edge, padding=table.padding, show_edge=table.show_edge, header_style=table.header_style,
                 title_justify="left", caption_justify="left", show_header=table.show_header)
    for index in indexes:
        column = table.columns[index]
        part.add_column(column.header, justify=column.justify, no_wrap=column.no_wrap, overflow=column.overflow,
                        min_width=column.min_width, max_width=column.max_width, style=column.style)
    for row in range(table.row_count):
        part.add_row(*(table.columns[i]._cells[row] for i in indexes), end_section=table.rows[row].end_section)
    return part
