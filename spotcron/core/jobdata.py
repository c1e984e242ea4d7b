"""JSON a job wrote (metrics.json, its manifest, anything later), parsed as hostile input.

A job's container controls these bytes completely, and the control plane that reads them serves
every job: Python's json module recurses once per nesting level (50,000 `[` raise RecursionError)
and accepts integers of any length (a 400-digit `value` raises OverflowError the moment it meets
a float). So every file a job wrote goes through `load_job_json`: bounded in size, in nesting
depth and in the digits of a number, with every failure turned into a `JobDataProblem` whose
message names the file, what is wrong and what is allowed. The callers keep that message on the
run (never an exception that stops a function or the sweep).

The reading side (a ranged read of `cap + 1` bytes, never the whole object) is in
engine/results.py; this module is pure: bytes in, a value or a problem out.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from spotcron.core.errors import SpotcronError

# The runner's manifest lists every results file (name, size, sha256): about 150 bytes a file.
MANIFEST_MAX_BYTES = 4 << 20
MAX_DEPTH = 64  # far more than any metrics or manifest needs, far less than Python's recursion limit
MAX_NUMBER_CHARS = 40  # digits of an integer: more is no measurement, and would overflow a float
MAX_PROBLEM_CHARS = 500  # a problem kept on a run record, per line
MAX_PROBLEM_LINES = 10  # the lines of one (metrics.json names each of its problems on a line)
# A string, where brackets do not count towards depth (escapes kept inside). Possessive, and an
# unterminated string runs to the end: one pass, however many quotes the input holds.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*+"?', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class JobDataProblem(SpotcronError):
    """A file a job wrote is unusable; the message says which file, what is wrong and the limit."""


def load_job_json(data: bytes, where: str, *, max_bytes: int, example: str = "") -> Any:
    """The JSON value in `data`, or JobDataProblem. Never raises anything else for any input."""
    hint = f"; write one object, e.g. {example}" if example else ""
    if len(data) > max_bytes:
        raise JobDataProblem(f"{where}: more than the {max_bytes} allowed bytes; ignored (keep bulky figures "
                             f"in another results file)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JobDataProblem(f"{where}: not UTF-8 text (byte {exc.start}); ignored{hint}") from None
    depth = nesting_depth(data)
    if depth > MAX_DEPTH:
        raise JobDataProblem(f"{where}: nested deeper than {MAX_DEPTH} levels; ignored{hint}")
    try:
        # NaN, Infinity and 1e999 parse as floats: the callers' own checks name the field they are in.
        return json.loads(text, parse_int=_integer(where))
    except JobDataProblem:
        raise
    except ValueError as exc:  # JSONDecodeError, and int() past Python's digit limit
        raise JobDataProblem(f"{where}: not JSON ({_short(str(exc))}){hint or '; ignored'}") from None
    except (RecursionError, OverflowError, MemoryError, TypeError) as exc:
        # Not reachable within the limits above; kept so that no input can escape as a crash.
        raise JobDataProblem(f"{where}: unreadable ({type(exc).__name__}); ignored{hint}") from None


def nesting_depth(data: bytes) -> int:
    """The deepest nesting of [ and { in JSON text, brackets inside strings not counted.

    Linear and iterative, so it is safe on input that would crash a recursive parser.
    """
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(accumulate((1 if bracket in b"[{" else -1 for bracket in brackets), initial=0))


def _integer(where: str):
    def parse(text: str) -> int:
        if len(text.lstrip("-")) > MAX_NUMBER_CHARS:
            raise JobDataProblem(f"{where}: a number of {len(text.lstrip('-'))} digits, more than the "
                                 f"{MAX_NUMBER_CHARS} allowed; ignored (write measurements as ordinary numbers)")
        return int(text)

    return parse


def problem_text(problem: Exception | str) -> str:
    """A problem as a run record keeps it: at most MAX_PROBLEM_CHARS characters a line and
    MAX_PROBLEM_LINES lines, whatever a job's names and values made of its message (every record
    read after carries it)."""
    lines = str(problem).split("\n")[:MAX_PROBLEM_LINES]
    return "\n".join(_short(line, MAX_PROBLEM_CHARS) for line in lines)


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
