"""VM-hours per UTC day: each VM's hours count against each day they fall in, exactly once.

An admission covers an interval, from its admission time for timeout + grace hours, and is
written under *every* UTC day that interval reaches (`limits/DAY/admitted/VM~AT~GPUS~HOURS`), so
one listing of a day sees every VM that may run in it, however long ago it was admitted (a
timeout of days counts on each of its days). A day counts of each VM only the part of its
interval inside that day; a VM admitted more than once (a redelivery after midnight, a delivery
that held its admission long) counts the union of its intervals, once. When its run ends, a
settlement under each of those days (`limits/DAY/used/VM~HOURS`) replaces the admission with the
hours the VM really ran within that day (0 for a VM never created).

Pure helpers here; engine/limits.py writes admissions and checks the limits.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from spotcron.core import layout
from spotcron.core.errors import PreconditionFailed
from spotcron.core.runs import RunRecord

log = logging.getLogger("spotcron.engine")

DAY = timedelta(days=1)


def day_name(at: datetime) -> str:
    return at.strftime("%Y-%m-%d")


def day_start(day: str) -> datetime:
    return datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC)


def days_between(start: datetime, end: datetime) -> list[str]:
    """Every UTC day from `start`'s to `end`'s, both included."""
    day = start.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    days = []
    while day <= end:
        days.append(day_name(day))
        day += DAY
    return days


def overlap_hours(start: datetime, end: datetime, day: str) -> float:
    """Hours of [start, end) inside UTC day `day`."""
    begin = day_start(day)
    seconds = (min(end, begin + DAY) - max(start, begin)).total_seconds()
    return max(0.0, seconds) / 3600


@dataclass(frozen=True)
class Admission:
    vm: str
    at: datetime
    gpus: int
    hours: float  # admitted from `at`: the attempt's timeout + grace
    manual: bool = False  # a manual run's: held to the limits' manual share too

    @property
    def until(self) -> datetime:
        return self.at + timedelta(hours=self.hours)


@dataclass(frozen=True)
class DayUsage:
    """One UTC day's admissions and what their VMs really ran in it, read from one listing."""

    day: str = ""
    admitted: dict[str, Admission] = field(default_factory=dict)  # VM name → its latest admission
    used: dict[str, float] = field(default_factory=dict)  # VM name → hours it ran in this day, once settled
    spans: dict[str, tuple[datetime, datetime]] = field(default_factory=dict)  # VM → union of its admissions

    @property
    def hours(self) -> float:
        """What ended runs really used this day, plus the admissions still open, each VM once."""
        return sum(self.hours_of(vm) for vm in self.admitted)

    @property
    def manual_hours(self) -> float:
        """The part of `hours` that manual runs' VMs hold."""
        return sum(self.hours_of(vm) for vm, entry in self.admitted.items() if entry.manual)

    def hours_of(self, vm: str) -> float:
        if vm not in self.admitted:
            return 0.0
        if vm in self.used:
            return self.used[vm]
        start, end = self.spans[vm]
        return overlap_hours(start, end, self.day) if self.day else (end - start).total_seconds() / 3600


@functools.lru_cache(maxsize=8192)
def _fact(rest: str) -> Admission | tuple[str, float] | None:
    """One listed name after the day's prefix: an admission, a settlement (VM, hours), or None.

    A name never changes what it says, and every start lists the whole day again: each is parsed
    once per process (an instance handling many starts, the simulation's thousands)."""
    kind, _, facts = rest.partition("/")
    fields = facts.split("~")
    try:
        if kind == "admitted" and (len(fields) == 4 or (len(fields) == 5 and fields[4] == "m")):
            return Admission(vm=fields[0], at=datetime.fromtimestamp(int(fields[1]), UTC), gpus=int(fields[2]),
                             hours=float(fields[3]), manual=len(fields) == 5)
        if kind == "used" and len(fields) == 2:
            return fields[0], float(fields[1])
    except (ValueError, OverflowError):
        pass
    return None


def read_day(blobs, day: str) -> DayUsage:
    prefix = layout.usage_day(day)
    admitted: dict[str, Admission] = {}
    spans: dict[str, tuple[datetime, datetime]] = {}
    used: dict[str, float] = {}
    for name in blobs.list(prefix):
        fact = _fact(name[len(prefix):])
        if isinstance(fact, Admission):
            if fact.vm not in admitted or admitted[fact.vm].at < fact.at:
                admitted[fact.vm] = fact
            start, end = spans.get(fact.vm, (fact.at, fact.until))
            spans[fact.vm] = (min(start, fact.at), max(end, fact.until))
        elif fact is not None:
            used[fact[0]] = fact[1]
        else:
            log.warning("limits: %s is neither an admission nor a settlement; ignored", name)
    return DayUsage(day=day, admitted=admitted, used=used, spans=spans)


def admitted_days(at: datetime, hours: float) -> list[str]:
    """The UTC days a admission of `hours` from `at` reaches (its admission is written under each)."""
    return days_between(at, at + timedelta(hours=hours) - timedelta(microseconds=1))


def settle(deps, record: RunRecord) -> None:
    """At run end: replace each attempt's admission with what its VM really ran, day by day."""
    settle_attempts(deps, record, record.attempts)


def settle_ended_attempts(deps, record: RunRecord, current: str) -> None:
    """Before a retry is counted: settle the run's earlier attempts whose VMs have ended, so its
    own dead attempts hold what they ran, not their worst case, against its next attempt."""
    ended = [a for a in record.attempts if a.vm_name != current and a.vm_seconds is not None]
    if ended:
        settle_attempts(deps, record, ended)


def settle_attempts(deps, record: RunRecord, attempts) -> None:
    """Replace the admissions of `attempts` (of `record`) with what their VMs really ran, day by day."""
    # A VM that was never created used nothing; one whose deletion time is unknown (lost) keeps
    # its admission, the worst case it could have run.
    ran: dict[str, tuple[datetime, datetime] | None] = {}
    for a in attempts:
        if a.created_at is None:
            ran[a.vm_name] = None
        elif a.vm_seconds is not None:
            ran[a.vm_name] = (a.created_at, a.created_at + timedelta(seconds=a.vm_seconds))
    if not ran:
        return
    for day in _settle_days(record, deps.clock.now(), deps.settings.grace):
        usage = read_day(deps.blobs, day)
        for vm, interval in ran.items():
            if vm in usage.admitted and vm not in usage.used:
                hours = 0.0 if interval is None else overlap_hours(*interval, day)
                write_once(deps.blobs, layout.usage_used(day, vm, min(usage.hours_of(vm), hours)))


def _settle_days(record: RunRecord, now: datetime, grace: int) -> Iterable[str]:
    """Every day an admission of the run may be under: from the run's creation to as far as a
    admission made by now reaches (a run that ends before midnight settles tomorrow too)."""
    timeout = int((record.spec or {}).get("timeout") or 0)
    # From the earliest moment any handler wrote of it: instances' clocks differ by a little, so
    # one that admitted the run just before midnight may have written after its record was created.
    start = min([record.created_at, *(change.at for change in record.history)])
    return days_between(start, now + timedelta(seconds=timeout + grace))


def write_once(blobs, name: str) -> bool:
    """Create `name` empty; False when it was there already (written by a concurrent delivery)."""
    try:
        blobs.write(name, b"", if_generation_match=0)
    except PreconditionFailed:
        return False
    return True
