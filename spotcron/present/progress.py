"""`up --once` in a pipe or a file: a line when a run changes state, and a line every so often
while nothing does, so a log (CI, `make run | tee`) shows the wait is alive and what it waits for.

A terminal gets the live table (`live.wait_table`) instead, which a pipe cannot redraw. Pure:
records and `now` in, lines out; the caller prints them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime

from spotcron.core.durations import format_duration
from spotcron.core.runs import RunRecord
from spotcron.present.neutral import line_text
from spotcron.present.notes import ended_words, metrics_flag
from spotcron.present.views import UNKNOWN, took_text

HEARTBEAT_S = 15.0


class PipeProgress:
    """The lines to print for each look at the runs: what changed, else a heartbeat."""

    def __init__(self, started: datetime, heartbeat_s: float = HEARTBEAT_S):
        self.started = started
        self.heartbeat_s = heartbeat_s
        self._states: dict[tuple[str, str], tuple[str, str]] = {}  # state, and why a queued run waits
        self._last_line = started

    def lines(self, records: Iterable[RunRecord], now: datetime) -> list[str]:
        records = list(records)
        out = []
        for record in records:
            key = (record.job, record.run_id)
            why = queued_reason(record)
            if self._states.get(key) == (record.state, why):
                continue
            self._states[key] = (record.state, why)
            took = took_text(record, now)  # the work, as `runs` says it, and a local run's wait for its turn
            flag = metrics_flag(record)  # said in full under the table at the end
            took = f" in {took}" if not took.startswith(UNKNOWN) else ""
            detail = f"{took}{f', but {flag}' if flag else ended_words(record)}" if record.terminal else ""
            detail = f": {why}" if why else detail
            out.append(f"{now.astimezone(UTC):%H:%M:%S} {record.job}/{record.run_id} {record.state}{detail}")
        if not out and (now - self._last_line).total_seconds() >= self.heartbeat_s:
            counts = Counter(str(r.state) for r in records)
            said = ", ".join(f"{count} {state}" for state, count in sorted(counts.items()))
            waited = format_duration((now - self.started).total_seconds())
            out.append(f"{now.astimezone(UTC):%H:%M:%S} waiting {waited}: {said or 'no run recorded yet'}")
        if out:
            self._last_line = now
        return out


def queued_reason(record: RunRecord) -> str:
    """Why a queued run waits (the limit it waits for), on one line; "" for a run not queued."""
    if record.state != "queued":
        return ""
    return line_text(record.reason or "waiting for room")


def outcome_lines(records: Iterable[RunRecord], now: datetime) -> list[str]:
    """One line per ended run that did not succeed, with why: what a terminal's live table has no
    room for (its last frame shows `failed`, not the exit code or the reason), said under it."""
    out = []
    for record in records:
        if not record.terminal or record.state == "succeeded":
            continue
        took = took_text(record, now)
        took = f" in {took}" if not took.startswith(UNKNOWN) else ""
        out.append(f"{record.job}/{record.run_id} {record.state}{took}{ended_words(record)}")
    return out


class StartLines:
    """`spotcron run`'s word for each run it asked for: `started`, or `queued` with the limit it waits
    for, said once the run's record shows which (a new run is `scheduled` until start_job decides),
    and `started` again when a queued run gets its VM."""

    def __init__(self, suffix: str = ""):
        self.suffix = suffix  # " on the running `spotcron up`"
        self._said: dict[tuple[str, str], str] = {}

    def lines(self, records: Iterable[RunRecord]) -> list[str]:
        out = []
        for record in records:
            key = (record.job, record.run_id)
            if record.state == "scheduled":
                continue
            word = "queued" if record.state == "queued" else "started"
            if self._said.get(key) == word:
                continue
            was = self._said.get(key)
            self._said[key] = word
            if word == "queued":
                why = f": {line_text(record.reason)}" if record.reason else ""
                out.append(f"queued {record.job}/{record.run_id}{self.suffix}{why}; it starts when there is room")
            else:
                out.append(f"started {record.job}/{record.run_id}{self.suffix}" + (" (was queued)" if was else ""))
        return out

    def rest(self, runs: Iterable[tuple[str, str]]) -> list[str]:
        """`started` for the runs no record has shown yet (so every run is named once)."""
        out = []
        for job, run_id in runs:
            if (job, run_id) not in self._said:
                self._said[(job, run_id)] = "started"
                out.append(f"started {job}/{run_id}{self.suffix}")
        return out
