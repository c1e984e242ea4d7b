"""What to write instead of `#` (the Nth weekday of the month), which Cloud Scheduler does not read.

Cloud Scheduler's page (https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules)
evaluates day-of-month and day-of-week as an inclusive OR unless one of them is `*`: day 1 with
SAT runs on the 1st *and* every Saturday. So `0 9 1-7 * MON`, the form that reads like "the
first Monday", fires on days 1-7 and on every Monday, about eleven times a month. No unix-cron
string fires on the Nth weekday only; the cheapest one that contains it is the weekly schedule
(day-of-month `*`, so the weekday alone decides: 4 or 5 runs a month), and the job itself goes
on only when the day of the month is in the Nth week (days 7N-6 to 7N).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_WEEKDAY_TEXT = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_ORDINALS = ("first", "second", "third", "fourth", "fifth")
_NTH = re.compile(r"([0-7]|[A-Za-z]{3})#([1-5])")


@dataclass(frozen=True)
class NthWeekday:
    """`DAY#N` read: the weekday (0 Sunday - 6 Saturday), N, and the advice for a schedule."""

    weekday: int
    nth: int
    suggested: str  # the whole five-field schedule to write instead

    @property
    def first_day(self) -> int:
        return 7 * self.nth - 6

    @property
    def last_day(self) -> int:
        return min(7 * self.nth, 31)

    def advice(self) -> str:
        name = _WEEKDAY_TEXT[self.weekday]
        days = f"{self.first_day}-{self.last_day}"
        return (f"write '{self.suggested}' (every {name}, 4 or 5 runs a month) and have the job exit early "
                f"unless the day of the month, in the job's time_zone, is {days} (the {_ORDINALS[self.nth - 1]} "
                f"{name}); not day-of-month {days} with day-of-week {_WEEKDAYS[self.weekday]}: Cloud Scheduler runs a job when "
                f"either field matches, every day {days} and every {name}")


def read_nth_weekday(fields: list[str]) -> NthWeekday | None:
    """The advice for five fields whose day-of-week is a single `DAY#N`; None for other uses of `#`."""
    if len(fields) != 5:
        return None
    match = _NTH.fullmatch(fields[4])
    if not match:
        return None
    day, nth = match.groups()
    if day.isdigit():
        weekday = int(day) % 7
    elif day.upper() in _WEEKDAYS:
        weekday = _WEEKDAYS.index(day.upper())
    else:
        return None
    suggested = " ".join([fields[0], fields[1], "*", fields[3], _WEEKDAYS[weekday]])
    return NthWeekday(weekday, int(nth), suggested)
