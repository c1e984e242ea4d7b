"""Cron schedules exactly as Cloud Scheduler reads them, and when they fire.

What Cloud Scheduler documents ("Configure cron job schedules",
https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules):

- unix-cron: five fields, in order minute (0-59), hour (0-23), day of month (1-31), month (1-12 or
  JAN-DEC) and day of week (0-6 or SUN-SAT, 7 is Sunday too). `*` stands for first-last; `a-b` is an
  inclusive range; "following a range with /NUMBER" gives a step (`0-23/2`, `*/2`); lists are
  comma-separated. `L` (last day of the month) is explicitly unsupported. Nothing else is documented:
  no seconds or year field, no `W`, `#`, `?`, no `@hourly`-style macros, no `TZ=` prefix, so we
  reject them. A step after a single number (`5/15`) is not a documented form either: we reject it
  and suggest the range form (`5-59/15`). Names are documented in upper case; we accept any case
  and keep the upper-case form in `CronSchedule.expression`, which is the string to deploy.
- The time zone is a separate job field (default Etc/UTC). Jobs run on wall-clock time; "in instances
  where a time can occur twice (such as when clocks go backwards) ... your scheduled job may observe
  execution anomalies", and UTC is recommended to avoid the problem. The page says nothing more.
- Day of month and day of week follow crontab(5), which the page links to: when both fields are
  restricted (do not start with `*`) a day matches if either matches; when one starts with `*`
  (even `*/2`) both must match, as in Vixie cron and cronie.

Where the documentation is silent (what exactly happens around DST changes) we follow Vixie/Debian
cron, cron(8): "If the time has moved forwards, those jobs which would have run in the time that was
skipped will be run soon after the change. Conversely, if the time has moved backwards by less than 3
hours, those jobs that fall into the repeated time will not be re-run. Only jobs that run at a
particular time (not specified as @hourly, nor with '*' in the hour or minute specifier) are affected.
Jobs which are specified with wildcards are run based on the new time immediately." Concretely:

- fixed-time job (neither minute nor hour field starts with `*`), local time skipped by a jump
  forward: runs once, at the instant of the jump (02:30 on a 02:00->03:00 night fires at 03:00);
- fixed-time job, local time repeated by a jump back: runs once, on the first pass (never twice,
  unlike kubernetes/kubernetes#121594);
- wildcard job (`*/30 * * * *`, `0 */4 * * *`): follows the clock as it is; skipped local times do
  not run, repeated local times run on both passes, so the real-time cadence is kept.

All instants are aware UTC datetimes; fire times are whole minutes.
"""

from __future__ import annotations

import difflib
import re
import zoneinfo
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

from spotcron.core.cron.nth_weekday import read_nth_weekday
from spotcron.core.errors import CronError

MINUTE = timedelta(minutes=1)
_EPOCH = datetime(1970, 1, 1)
_GREGORIAN_CYCLE_DAYS = 146097  # 400 years: every feasible date pattern recurs within one cycle
_LOOKBACK_DAYS = 400

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_WEEKDAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
MONTH_TEXT = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
               "October", "November", "December")
WEEKDAY_TEXT = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)  # most a month can have

# (name, low, high, names); day-of-week accepts 7 as Sunday and folds it to 0 after parsing.
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day-of-month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _WEEKDAYS),
)
_TOKEN = re.compile(r"^(\*|[0-9A-Za-z]+)(?:-([0-9A-Za-z]+))?(?:/([0-9A-Za-z]+))?$")
_FORMAT = "five fields: minute hour day-of-month month day-of-week, e.g. '0 */4 * * *'"
_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
           "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_LEGACY_ZONES = {"EST5EDT": "'America/New_York'", "CST6CDT": "'America/Chicago'", "MST7MDT": "'America/Denver'",
                 "PST8PDT": "'America/Los_Angeles'", "EST": "'America/New_York' (with DST) or 'Etc/GMT+5'",
                 "MST": "'America/Phoenix'", "HST": "'Pacific/Honolulu'", "CET": "'Europe/Berlin'",
                 "MET": "'Europe/Berlin'", "EET": "'Europe/Athens'", "WET": "'Europe/Lisbon'",
                 "GB": "'Europe/London'"}
_UTC_ALIASES = frozenset({"GMT", "GMT0", "GMT+0", "GMT-0", "Greenwich", "UCT", "Universal", "Zulu"})


@dataclass(frozen=True)
class CronSchedule:
    """A parsed five-field schedule. Build it with `parse_schedule`; weekdays run 0=Sunday..6."""

    expression: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    dom_restricted: bool
    dow_restricted: bool
    fixed_time: bool = True  # Vixie's "runs at a particular time": no '*' leading the minute or hour field
    _m: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _h: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _d: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, values in (("_m", self.minutes), ("_h", self.hours), ("_d", self.days)):
            object.__setattr__(self, name, tuple(sorted(values)))

    # --- matching ---------------------------------------------------------------------------

    def _day_ok(self, day: date) -> bool:
        dom = day.day in self.days
        dow = (day.weekday() + 1) % 7 in self.weekdays
        return (dom or dow) if self.dom_restricted and self.dow_restricted else (dom and dow)

    def matches(self, wall: datetime) -> bool:
        """Whether a local wall-clock time (naive or aware, seconds ignored) is one of the schedule's."""
        return (wall.minute in self.minutes and wall.hour in self.hours and wall.month in self.months
                and self._day_ok(wall))

    def _days_only(self) -> bool:
        return not (self.dom_restricted and self.dow_restricted) and len(self.weekdays) == 7

    def _next_wall(self, wall: datetime, limit: int) -> datetime | None:
        """First matching naive wall minute >= wall, skipping whole months, days and hours."""
        ordinal, hour, minute = wall.toordinal(), wall.hour, wall.minute
        while ordinal <= limit:
            day = date.fromordinal(ordinal)
            if day.month not in self.months:
                ordinal, hour, minute = _month_start_after(day, self.months), 0, 0
                continue
            if self._days_only():
                i = bisect_left(self._d, day.day)
                if i == len(self._d) or self._d[i] > _month_length(day.year, day.month):
                    ordinal, hour, minute = _month_start_after(day, self.months), 0, 0
                    continue
                if self._d[i] != day.day:
                    ordinal, hour, minute = ordinal + self._d[i] - day.day, 0, 0
                    day = date.fromordinal(ordinal)
            if self._day_ok(day):
                h = bisect_left(self._h, hour)
                if h < len(self._h) and self._h[h] == hour:
                    m = bisect_left(self._m, minute)
                    if m < len(self._m):
                        return datetime(day.year, day.month, day.day, hour, self._m[m])
                    h += 1
                if h < len(self._h):
                    return datetime(day.year, day.month, day.day, self._h[h], self._m[0])
            ordinal, hour, minute = ordinal + 1, 0, 0
        return None

    def _prev_wall(self, wall: datetime, limit: int) -> datetime | None:
        """Last matching naive wall minute <= wall, scanning back no further than ordinal `limit`."""
        ordinal, hour, minute = wall.toordinal(), wall.hour, wall.minute
        while ordinal >= limit:
            day = date.fromordinal(ordinal)
            if day.month not in self.months:
                ordinal, hour, minute = date(day.year, day.month, 1).toordinal() - 1, 23, 59
                continue
            if self._day_ok(day):
                h = bisect_right(self._h, hour) - 1
                if h >= 0 and self._h[h] == hour:
                    m = bisect_right(self._m, minute) - 1
                    if m >= 0:
                        return datetime(day.year, day.month, day.day, hour, self._m[m])
                    h -= 1
                if h >= 0:
                    return datetime(day.year, day.month, day.day, self._h[h], self._m[-1])
            ordinal, hour, minute = ordinal - 1, 23, 59
        return None

    # --- fire instants ----------------------------------------------------------------------

    def next_after(self, after: datetime, tz: zoneinfo.ZoneInfo) -> datetime:
        """The first fire instant strictly after `after` (aware), as aware UTC."""
        after_utc, local = utc_naive(after), after.astimezone(tz)
        start = local.replace(tzinfo=None, second=0, microsecond=0, fold=0)
        o0, o1 = local.replace(fold=0).utcoffset(), local.replace(fold=1).utcoffset()
        first_pass = local.fold == 0 and o0 > o1
        limit = start.toordinal() + _GREGORIAN_CYCLE_DAYS
        best = self._forward(start, after_utc, tz, limit, accept_second=not first_pass)
        if first_pass and not self.fixed_time:
            # Inside the first pass of a repeated hour the second pass comes before later wall times.
            t = transition_between(tz, after_utc, after_utc + (o0 - o1))
            w = self._next_wall(t + o1, limit)
            if w is not None and w < t + o0 and (best is None or w - o1 < best):
                best = w - o1
        if best is None:
            raise CronError(f"schedule {self.expression!r} does not fire within 400 years of {after}")
        return best.replace(tzinfo=UTC)

    def _forward(self, wall: datetime, after: datetime, tz: zoneinfo.ZoneInfo, limit: int,
                 accept_second: bool) -> datetime | None:
        # Works on naive wall times and naive UTC. PEP 495 gives fold=0 the offset from before a
        # change, so o0 > o1 marks a wall time that happens twice and o0 < o1 one that is skipped.
        while (w := self._next_wall(wall, limit)) is not None:
            o0, o1 = w.replace(tzinfo=tz).utcoffset(), w.replace(tzinfo=tz, fold=1).utcoffset()
            wall = w + MINUTE
            if o0 == o1:
                if w - o0 > after:
                    return w - o0
            elif o0 > o1:  # repeated local time
                if w - o0 > after:
                    return w - o0
                if accept_second and not self.fixed_time and w - o1 > after:
                    return w - o1
            elif self.fixed_time:  # skipped local time: run at the jump
                t = transition_between(tz, w - o1, w - o0)
                if t > after:
                    return t
                wall = t + o1  # the rest of the gap maps to the same instant
        return None

    def latest_at_or_before(self, at: datetime, tz: zoneinfo.ZoneInfo) -> datetime | None:
        """The most recent fire instant <= `at` (aware), as aware UTC; None if none within 400 days."""
        at_utc, local = utc_naive(at), at.astimezone(tz)
        start = local.replace(tzinfo=None, second=0, microsecond=0, fold=0)
        limit = start.toordinal() - _LOOKBACK_DAYS
        best = self._backward(start, at_utc, tz, limit)
        o0, o1 = local.replace(fold=0).utcoffset(), local.replace(fold=1).utcoffset()
        if local.fold == 1 and o0 > o1:
            # Inside the second pass: first-pass runs at later wall times are still in the past.
            t = transition_between(tz, at_utc - (o0 - o1), at_utc)
            w = self._prev_wall(t + o0 - MINUTE, limit)
            if w is not None and w >= t + o1 and (best is None or w - o0 > best):
                best = w - o0
        return None if best is None else best.replace(tzinfo=UTC)

    def _backward(self, wall: datetime, at: datetime, tz: zoneinfo.ZoneInfo, limit: int) -> datetime | None:
        while (w := self._prev_wall(wall, limit)) is not None:
            o0, o1 = w.replace(tzinfo=tz).utcoffset(), w.replace(tzinfo=tz, fold=1).utcoffset()
            wall = w - MINUTE
            if o0 == o1:
                if w - o0 <= at:
                    return w - o0
            elif o0 > o1:
                if not self.fixed_time and w - o1 <= at:
                    return w - o1
                if w - o0 <= at:
                    return w - o0
            elif self.fixed_time:
                t = transition_between(tz, w - o1, w - o0)
                if t <= at:
                    return t
                wall = t + o0 - MINUTE
        return None

    def readings(self, tick: datetime, tz: zoneinfo.ZoneInfo) -> list[datetime]:
        """Every instant a scheduler may plausibly fire the fire instant `tick` at: aware UTC, sorted.

        Cloud Scheduler documents no DST behaviour. Besides our (Vixie) reading, `tick` itself, a
        fixed-time job's skipped wall time may be read with the offset from before the jump (02:30
        on a 02:00->03:00 night fires at 03:30, the jump shifted by the gap), and a repeated wall time
        on its second pass. `latest_at_or_before` maps each of these back to `tick`.
        """
        at = utc_naive(tick)
        found = {at}
        if self.fixed_time:
            before, after = utc_offset(tz, at - MINUTE), utc_offset(tz, at)
            if after > before:  # `tick` is a jump forward: the skipped wall times fired here
                jump = at + before
                wall = jump
                while wall < jump + (after - before):
                    if self.matches(wall):
                        found.add(wall - before)
                    wall += MINUTE
            wall = at + after
            first, second = wall.replace(tzinfo=tz).utcoffset(), wall.replace(tzinfo=tz, fold=1).utcoffset()
            if first > second and at == wall - first:  # the first pass of a repeated wall time
                found.add(wall - second)
        return sorted(moment.replace(tzinfo=UTC) for moment in found)

    def upcoming(self, after: datetime, tz: zoneinfo.ZoneInfo, count: int) -> list[datetime]:
        """The next `count` fire instants strictly after `after`, as aware UTC."""
        out: list[datetime] = []
        while len(out) < count:
            after = self.next_after(after, tz)
            out.append(after)
        return out


# --- parsing ----------------------------------------------------------------------------------


def _schedule_error(detail: str) -> CronError:
    return CronError(f"schedule {detail}", detail=detail)


def parse_schedule(expression: str) -> CronSchedule:
    """Parse a Cloud Scheduler unix-cron string; CronError says what is wrong and what is allowed."""
    if not isinstance(expression, str):
        raise _schedule_error(f"must be a string like '0 */4 * * *', not {expression!r}")
    text = expression.strip()
    where = repr(text)
    if not text:
        raise _schedule_error(f"is empty: write {_FORMAT}")
    prefix = re.match(r"(?i)(CRON_TZ|TZ)=(\S*)", text)
    if prefix:
        raise _schedule_error(f"{where}: the {prefix.group(1)}= prefix is not accepted by Cloud Scheduler; put "
                              f"the zone in time_zone: {prefix.group(2) or 'Etc/UTC'} and keep only the five "
                              f"fields")
    if text.startswith("@"):
        macro = text.split()[0]
        hint = f"write '{_MACROS[macro.lower()]}' instead" if macro.lower() in _MACROS else f"write {_FORMAT}"
        raise _schedule_error(f"{where}: '{macro}' macros are not part of Cloud Scheduler's unix-cron format; "
                              f"{hint}")
    parts = text.split()
    if parts[0].lower() == "every":
        raise _schedule_error(f"{where}: the App Engine 'every N minutes' form is not supported; write {_FORMAT}")
    if len(parts) != 5:
        extra = (f"; Cloud Scheduler has no seconds or year field (is '{parts[0]}' seconds or "
                 f"'{parts[-1]}' a year?)" if len(parts) > 5 else "")
        raise _schedule_error(f"{where} has {len(parts)} field{'s' * (len(parts) != 1)}; it needs exactly "
                              f"{_FORMAT}{extra}")
    nth = read_nth_weekday(parts) if "#" in parts[4] else None
    if nth is not None:
        raise _schedule_error(f"{where}: day-of-week '{parts[4]}' uses '#' (nth weekday of the month), which Cloud "
                              f"Scheduler does not support; {nth.advice()}")
    sets = [_parse_field(where, token, *spec) for token, spec in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(v % 7 for v in sets[4])
    canonical = " ".join(p.upper() for p in parts)
    schedule = CronSchedule(canonical, frozenset(sets[0]), frozenset(sets[1]), frozenset(sets[2]),
                            frozenset(sets[3]), weekdays, not parts[2].startswith("*"),
                            not parts[4].startswith("*"),
                            not parts[0].startswith("*") and not parts[1].startswith("*"))
    _check_can_fire(where, schedule)
    return schedule


def _parse_field(where: str, text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> set[int]:
    allowed = f"{low}-{high}" + (f" or {names[0]}-{names[-1]}" if names else "")
    if name == "day-of-week":
        allowed = "0-6 or SUN-SAT (7 is also Sunday)"
    values: set[int] = set()
    for token in text.split(","):
        bad = f"{where}: {name} field '{text}'"
        if not token:
            raise _schedule_error(f"{bad} has an empty list item; separate values with single commas")
        match = _TOKEN.match(token)
        if not match:
            _reject_special(bad, token)
            raise _schedule_error(f"{bad}: '{token}' is not a value, range (a-b), list (a,b) or step (*/n, a-b/n); "
                                  f"allowed values: {allowed}")
        start, end, step = match.groups()
        if start == "*":
            if end is not None:
                raise _schedule_error(f"{bad}: '{token}' mixes '*' and a range; use '*' or a range a-b")
            first, last = low, (6 if name == "day-of-week" else high)
        else:
            # A field of one value says it once: "hour 25 is out of range", not the field, then the value.
            said = f"{where}: {name}" if token == text == start else f"{bad}:"
            first = _value(bad, token, start, name, low, high, names, allowed, said, text)
            last = first if end is None else _value(bad, token, end, name, low, high, names, allowed, said, text)
            if last < first:
                raise _schedule_error(f"{bad}: range '{token}' is reversed; write the smaller value first "
                                      f"(wrap-around ranges are not supported)")
            if step is not None and end is None:
                top = names[-1] if start.isalpha() else (6 if name == "day-of-week" else high)
                raise _schedule_error(f"{bad}: '{token}' puts a step after a single value; Cloud Scheduler takes "
                                      f"steps after '*' or a range: write '{start}-{top}/{step}'")
        stride = 1
        if step is not None:
            if not step.isdigit():
                raise _schedule_error(f"{bad}: step '{step}' in '{token}' must be a whole number")
            stride = int(step)
            if not 1 <= stride <= high - low + 1:
                raise _schedule_error(f"{bad}: step {stride} is out of range: allowed "
                                      f"1-{high - low + 1}")
        values.update(range(first, last + 1, stride))
    return values


def _value(bad: str, token: str, text: str, name: str, low: int, high: int, names: tuple[str, ...],
           allowed: str, said: str, field_text: str) -> int:
    if text.isdigit():
        number = int(text)
        if not low <= number <= high:
            where = "" if token in (text, field_text) else f" in '{token}'"
            raise _schedule_error(f"{said} {number}{where} is out of range: allowed {allowed}")
        return number
    if text.upper() in names:
        return names.index(text.upper()) + (1 if name == "month" else 0)
    _reject_special(bad, token)
    raise _schedule_error(f"{bad}: '{text}' in '{token}' is not a {name} value: allowed {allowed}")


def _reject_special(bad: str, token: str) -> None:
    upper = token.upper()
    if "#" in token:
        raise _schedule_error(f"{bad}: '{token}' uses '#' (nth weekday of the month), which Cloud Scheduler does "
                              f"not support; write the weekday alone with day-of-month '*' (a weekly schedule) and have "
                              f"the job exit early outside the week it wants (days 1-7 for the first)")
    if "?" in token:
        raise _schedule_error(f"{bad}: '{token}' uses '?', which Cloud Scheduler does not accept; use '*'")
    if re.fullmatch(r"L|LW|L-\d+|\d+L", upper):
        raise _schedule_error(f"{bad}: '{token}' uses 'L' (last day), which Cloud Scheduler does not support; "
                              f"list the days instead, e.g. 28-31 with a check in the job")
    if re.fullmatch(r"\d+W|W", upper):
        raise _schedule_error(f"{bad}: '{token}' uses 'W' (nearest weekday), which Cloud Scheduler does not "
                              f"support; combine days of the month with MON-FRI instead")


def _check_can_fire(where: str, schedule: CronSchedule) -> None:
    if schedule.dom_restricted and schedule.dow_restricted:
        return  # either field may match, and every weekday comes round
    if any(day <= _MONTH_DAYS[month - 1] for month in schedule.months for day in schedule.days):
        return
    months = join_words([MONTH_TEXT[m - 1] for m in sorted(schedule.months)])
    days = join_words([str(d) for d in sorted(schedule.days)])
    raise _schedule_error(f"{where} can never fire: {months} {'has' if len(schedule.months) == 1 else 'have'} "
                          f"no day {days} (February 29 is fine)")


# --- time zones -------------------------------------------------------------------------------


def load_time_zone(name: str) -> zoneinfo.ZoneInfo:
    """An IANA Area/Location zone (or UTC); CronError with a suggestion for anything else."""
    if not isinstance(name, str) or not name:
        raise _zone_error(f"must be an IANA name like 'Europe/Berlin' or 'Etc/UTC', not {name!r}")
    if name in _LEGACY_ZONES or name in _UTC_ALIASES or (
            "/" not in name and name != "UTC" and re.fullmatch(r"[A-Za-z0-9+\-_]+", name)):
        hint = _LEGACY_ZONES.get(name) or ("'Etc/UTC'" if name in _UTC_ALIASES else None)
        suggestion = f"use {hint}" if hint else "use an Area/Location name like 'Europe/Berlin'"
        raise _zone_error(f"'{name}' is a legacy or abbreviation-style zone name; {suggestion} "
                          f"(or 'Etc/UTC', which never changes its clock)")
    if not name.startswith(("posix/", "right/")) and re.fullmatch(r"[A-Za-z0-9+\-_]+(/[A-Za-z0-9+\-_]+)*", name):
        try:
            return zoneinfo.ZoneInfo(name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            pass
    known = sorted(z for z in zoneinfo.available_timezones() if "/" in z or z == "UTC")
    by_lower = {z.lower(): z for z in known}
    close = [by_lower[name.lower()]] if name.lower() in by_lower else difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean '{close[0]}'? " if close else ""
    advice = f"{hint}use an IANA name such as 'Etc/UTC' or 'Europe/Berlin'"
    raise CronError(f"unknown time_zone '{name}': {advice}", detail=f"'{name}' is not a known time zone: {advice}")


def _zone_error(detail: str) -> CronError:
    return CronError(f"time_zone {detail}", detail=detail)


def is_utc_like(tz: zoneinfo.ZoneInfo) -> bool:
    return tz.key == "UTC" or tz.key.startswith("Etc/")


# --- helpers ----------------------------------------------------------------------------------


def utc_naive(moment: datetime) -> datetime:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"{moment!r} must be timezone-aware")
    return moment.astimezone(UTC).replace(tzinfo=None)


def utc_offset(tz: zoneinfo.ZoneInfo, utc_naive: datetime) -> timedelta:
    return utc_naive.replace(tzinfo=UTC).astimezone(tz).utcoffset()


def transition_between(tz: zoneinfo.ZoneInfo, lo: datetime, hi: datetime) -> datetime:
    """First second in (lo, hi] (naive UTC) whose offset differs from lo's; they must differ."""
    before = utc_offset(tz, lo)
    a, b = int((lo - _EPOCH).total_seconds()), int((hi - _EPOCH).total_seconds())
    while b - a > 1:
        mid = (a + b) // 2
        if utc_offset(tz, _EPOCH + timedelta(seconds=mid)) == before:
            a = mid
        else:
            b = mid
    return _EPOCH + timedelta(seconds=b)


def _month_length(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return _MONTH_DAYS[month - 1]


def _month_start_after(day: date, months: frozenset[int]) -> int:
    """Ordinal of the first day of the next allowed month after `day`'s month."""
    later = [m for m in sorted(months) if m > day.month]
    year, month = (day.year, later[0]) if later else (day.year + 1, min(months))
    return date(year, month, 1).toordinal()


def join_words(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
