"""Schedules for people: plain-English readings and what happens around clock changes.

The parsing and fire-time logic lives in `spotcron.core.cron.schedule`; this module only explains it.
"""

from __future__ import annotations

import zoneinfo
from datetime import date, datetime, timedelta

from spotcron.core.cron.schedule import (
    MINUTE,
    MONTH_TEXT,
    WEEKDAY_TEXT,
    CronSchedule,
    is_utc_like,
    join_words,
    transition_between,
    utc_naive,
    utc_offset,
)


def describe(s: CronSchedule) -> str:
    """Plain English, e.g. "at 09:30 on Monday through Friday"."""
    return _describe_time(tuple(sorted(s.minutes)), tuple(sorted(s.hours))) + _describe_days(s) + _describe_months(s.months)


def dst_notes(schedule: CronSchedule, tz: zoneinfo.ZoneInfo, after: datetime, days: int = 400) -> list[str]:
    """What happens to this job around the clock changes of `tz` in the `days` after `after`."""
    if is_utc_like(tz):
        return []
    notes: list[str] = []
    start = utc_naive(after)
    for t, old, new in _transitions(tz, start, start + timedelta(days=days)):
        lo, hi = (t + old, t + new) if new > old else (t + new, t + old)
        walls = [w for w in _minutes_between(lo, hi) if schedule.matches(w)]
        if not walls:
            continue
        day = lo.date()
        change = f"{day}: {tz.key} clocks {'jump forward' if new > old else 'go back'} from " \
                 f"{_clock(t + old, day)} to {_clock(t + new, day)}"
        times = _times(walls)
        if new > old and schedule.fixed_time:
            notes.append(f"{change}; {times} does not exist that day, so the job runs once right after "
                         f"the jump, at {_clock(t + new, day)} ({t:%H:%M} UTC)")
        elif new > old:
            notes.append(f"{change}; the runs at {times} are skipped that day (the schedule has '*' in its "
                         f"minute or hour field, so it follows the new clock and nothing is made up)")
        elif schedule.fixed_time:
            utc = join_words([f"{w - old:%H:%M}" for w in walls[:3]])
            notes.append(f"{change}; {times} happens twice and the job runs once, on the first pass "
                         f"({utc} UTC), not again on the second pass")
        else:
            notes.append(f"{change}; the runs at {times} happen on both passes (the schedule has '*' in "
                         f"its minute or hour field, so it keeps its real-time cadence)")
    if notes:
        notes.append("Cloud Scheduler documents only that jobs at such times 'may observe execution "
                     "anomalies'; these notes follow classic cron (Vixie/Debian) rules")
    if schedule.hours & {0, 1, 2, 3} and len(schedule.hours) < 24:  # a job in every hour has no hours to shift
        notes.append(f"This job runs between 00:00 and 04:00 {tz.key} time, when clocks usually change; "
                     f"Cloud Scheduler recommends UTC: consider time_zone: Etc/UTC with the hours shifted")
    return notes


def _transitions(tz, start: datetime, end: datetime) -> list[tuple[datetime, timedelta, timedelta]]:
    out, probe = [], start
    before = utc_offset(tz, probe)
    while probe < end:
        nxt = min(probe + timedelta(hours=6), end)
        after = utc_offset(tz, nxt)
        if after != before:
            t = transition_between(tz, probe, nxt)
            if start < t <= end:
                out.append((t, before, after))
        probe, before = nxt, after
    return out


def _minutes_between(lo: datetime, hi: datetime) -> list[datetime]:
    return [lo + i * MINUTE for i in range(int((hi - lo) / MINUTE))]


def _times(walls: list[datetime]) -> str:
    shown = [f"{w:%H:%M}" for w in walls]
    return join_words(shown) if len(shown) <= 4 else f"{shown[0]}, {shown[1]} ... {shown[-1]} ({len(shown)} runs)"


def _clock(wall: datetime, day: date) -> str:
    return "24:00" if wall.date() > day and wall.hour == wall.minute == 0 else f"{wall:%H:%M}"


# --- readings -------------------------------------------------------------------------------


def _runs(values: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for v in values:
        if runs and v == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return runs


def _phrase(values: list[int], show=str) -> str:
    items: list[str] = []
    for a, b in _runs(values):
        if b - a >= 2:
            items.append(f"{show(a)} through {show(b)}")
        else:
            items.extend(show(v) for v in range(a, b + 1))
    return join_words(items)


def _step(values: tuple[int, ...], high: int) -> int | None:
    if len(values) < 2 or values[0] != 0:
        return None
    n = values[1]
    return n if n > 1 and (high + 1) % n == 0 and values == tuple(range(0, high + 1, n)) else None


def _describe_time(minutes: tuple[int, ...], hours: tuple[int, ...]) -> str:
    every_hour, hour_step = len(hours) == 24, _step(hours, 23)
    minute_step = _step(minutes, 59)
    if len(minutes) < 60 and len(hours) * len(minutes) <= 4:
        return "at " + join_words([f"{h:02}:{m:02}" for h in hours for m in minutes])
    if len(minutes) == 60 or minute_step:
        text = "every minute" if len(minutes) == 60 else f"every {minute_step} minutes"
        if every_hour:
            return text
        if len(_runs(list(hours))) == 1:
            return f"{text} from {hours[0]:02}:00 through {hours[-1]:02}:59"
        return f"{text} during hours {_phrase(list(hours))}"
    at = f"at minute {minutes[0]}" if len(minutes) == 1 else f"at minutes {_phrase(list(minutes))}"
    if every_hour:
        return f"every hour, {at}"
    if hour_step:
        return f"every {hour_step} hours, {at}"
    if len(minutes) == 1 and len(hours) <= 6:
        return "at " + join_words([f"{h:02}:{minutes[0]:02}" for h in hours])
    return f"{at} past hours {_phrase(list(hours))}"


def _describe_days(s: CronSchedule) -> str:
    dom = None if len(s.days) == 31 else (
        f"day {min(s.days)} of the month" if len(s.days) == 1 else f"days {_phrase(sorted(s.days))} of the month")
    monday_first = sorted(s.weekdays, key=lambda d: (d + 6) % 7)
    dow = None if len(s.weekdays) == 7 else _phrase([(d + 6) % 7 for d in monday_first],
                                                    lambda i: WEEKDAY_TEXT[(i + 1) % 7])
    if dom and dow:
        joiner = " or on " if s.dom_restricted and s.dow_restricted else ", only when that day is "
        return f" on {dom}{joiner}{dow}"
    return f" on {dom or dow}" if dom or dow else ""


def _describe_months(months: frozenset[int]) -> str:
    return "" if len(months) == 12 else " in " + _phrase(sorted(months), lambda m: MONTH_TEXT[m - 1])
