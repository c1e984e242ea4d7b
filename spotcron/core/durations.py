"""Durations as users write them in specs: `90s`, `10m`, `2h`, `1d`, or a bare number of seconds."""

from __future__ import annotations

import math
import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_PATTERN = re.compile(r"^\s*(\d+)\s*([smhd]?)\s*$")


def parse_duration(value: object) -> int:
    """Seconds in `value`; raises ValueError with the accepted forms when it is not a duration."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration; write e.g. 90s, 10m or 2h")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value!r} is negative; a duration is 0 or more seconds")
        return value
    if isinstance(value, str):
        match = _PATTERN.match(value)
        if match:
            return int(match.group(1)) * _UNITS[match.group(2) or "s"]
    raise ValueError(f"{value!r} is not a duration; write e.g. 90s, 10m or 2h")


def format_duration(seconds: float) -> str:
    """Short human form: 45s, 12m05s, 3h02m; `?` for what is no number of seconds (inf, NaN)."""
    if not math.isfinite(seconds):
        return "?"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
