r"""Job-written text made inert where it is exported: CSV cells and Markdown.

Anything a job wrote (its work unit, its hardware strings, metric names, problems, run ids it
cannot choose but configurations it can) reaches files people open in a spreadsheet or paste
into a page. A spreadsheet runs a cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage
return as a formula (`=HYPERLINK(...)`, `=cmd|...`), so such a cell gets a leading `'`, which
spreadsheets show as text (OWASP's advice for CSV injection). In Markdown every character that
could open a link, an image, emphasis, code, raw HTML or an entity is escaped with a backslash,
a web address is broken (`https\://`, `www\.`) wherever it starts, even inside a word (GitHub's
extended autolinks also start after `_` and other delimiters), and `@` is escaped so no e-mail
address becomes a mailto: link; a leading `#`, `>` or list marker is escaped, and line breaks become spaces, so job text stays one literal cell or line.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from typing import Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# CommonMark's ASCII punctuation that can start or end markup, and the table's cell separator.
# `@` too: GitHub's extended autolinks make `user@host.tld` a mailto: link.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>!|~&@])")
# GitHub's extended autolinks: a scheme's `://` and `www.` make a link of bare text, also right
# after `_` or another delimiter, so they are broken wherever they occur (no word boundary asked).
_AUTOLINK = re.compile(r"(?i)(https?|ftp|mailto|xmpp)(:)|(www)(\.)")
_LEADING = re.compile(r"^(\s*)([#>+\-=]|\d+[.)])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u0085\u2028\u2029]")


def csv_cell(value: Any) -> Any:
    """`value` as a CSV cell no spreadsheet runs: text that a formula could start gets a `'`."""
    if not isinstance(value, str):
        return value
    if value.lstrip(" ").startswith(FORMULA_STARTS):
        return "'" + value
    return value


class InertWriter:
    """A csv.writer whose every text cell goes through csv_cell."""

    def __init__(self, out: Any):
        self._writer = csv.writer(out, lineterminator="\n")

    def writerow(self, row: Iterable[Any]) -> None:
        self._writer.writerow([csv_cell(cell) for cell in row])


def md_text(text: str, *, line: bool = False) -> str:
    """`text` as literal Markdown: markup characters escaped, line breaks and controls as spaces.
    `line`: it starts a line (a list item's text), where `#`, `>` or a list marker would be markup."""
    flat = _CONTROL.sub(" ", text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ").replace("\t", " "))
    escaped = _MD_SPECIAL.sub(r"\\\1", flat)
    escaped = _AUTOLINK.sub(lambda m: f"{m.group(1) or m.group(3)}\\{m.group(2) or m.group(4)}", escaped)
    return _LEADING.sub(lambda m: f"{m.group(1)}\\{m.group(2)}", escaped) if line else escaped


# Every character Python does not call printable is escaped: controls (C0, DEL, C1: ESC starts a
# terminal escape sequence, CR rewrites a line), format characters that reorder or hide text (bidi
# marks and overrides, zero-width and tag characters, the soft hyphen, interlinear annotations),
# line and paragraph separators, unassigned and private-use code points. The space stays.


def _escaped(char: str) -> str:
    if char.isprintable():
        return char
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str, *, lines: bool = False) -> str:
    """`text` safe to print to a terminal: every control, invisible or reordering character shown
    as its escape (`\\x1b`, `\\u202e`, `\\U000e0069`), so job-written names cannot move the cursor,
    rewrite lines or change what the operator sees. `lines`: keep its line breaks (a message of
    several lines)."""
    if lines:
        return "\n".join(printable(line) for line in text.split("\n"))
    return text if text.isprintable() else "".join(_escaped(char) for char in text)


def line_text(text: str | None) -> str:
    """`text` (a run's reason, a problem a job wrote) as one printable line: runs of whitespace
    become one space, every other control or invisible character its escape (`printable`). What
    every terminal line that quotes a reason prints."""
    return printable(" ".join((text or "").split()))


def output_text(text: str) -> str:
    """A job's own output (its log) safe to write to a terminal or a pipe: newlines and tabs stay,
    a CRLF line end becomes a newline, and every other control (C0, DEL, C1: ESC, CSI, OSC, a
    lone carriage return, a backspace, a bell) or invisible character is shown as its escape, so
    no escape sequence (a screen clear, an OSC 8 link, an OSC 52 clipboard write) reaches the
    terminal as one."""
    if text.isprintable():
        return text
    return "\n".join("\t".join(printable(cell) for cell in line.split("\t"))
                     for line in text.replace("\r\n", "\n").split("\n"))
