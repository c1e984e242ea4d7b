"""A run's round (tick) as reports name it: the scheduled minute, or the manual request it came from."""

from __future__ import annotations

import re
from datetime import datetime

from spotcron.core.runs import RunRecord

_MANUAL = re.compile(r"^m(\d{8}-\d{6})-([0-9a-f]+)")


def tick_label(record: RunRecord) -> str:
    """The scheduled tick; for a manual run, the request it came from (its id names the second
    and a nonce), so the repeats of one "run now" are one point and two requests are two."""
    if record.tick is not None:
        return f"{record.tick:%Y-%m-%d %H:%M}"
    match = _MANUAL.match(record.run_id)
    if match:
        at = datetime.strptime(match[1], "%Y%m%d-%H%M%S")
        return f"{at:%Y-%m-%d %H:%M:%S} manual {match[2]}"
    return f"{record.created_at:%Y-%m-%d %H:%M}"
