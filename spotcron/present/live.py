"""What `spotcron up` draws while it runs: one log line per event, the live panel above them (each
job's next fire time, the runs in flight) and, with --once, the table of the runs it waits for.

Data in, rich renderables or text out: `now` is passed in, and the caller (the command's view,
which listens to the stack) owns the console and decides when to print.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from spotcron.core.durations import format_duration
from spotcron.core.runs import RunRecord, RunState
from spotcron.present.neutral import line_text, printable
from spotcron.present.notes import ended_words, metrics_flag
from spotcron.present.progress import queued_reason
from spotcron.present.views import STATE_STYLES, run_cost_text, took_text


@dataclass
class InFlight:
    """A run `up` has seen start and not yet end."""

    job: str
    run_id: str
    state: str
    since: datetime
    vm: str = ""


def line_style(what: str) -> str:
    """A log line's word: a run state in its colour, an error red, a warning yellow."""
    return STATE_STYLES.get(what, "red" if what == "error" else "yellow" if what == "warning" else "")


def log_line(at: datetime, subject: str, what: str, detail: str) -> Any:
    """`12:00:00 bot/r1 succeeded  in 12s, $0.0001, exit 0` as rich Text.

    The detail may quote what a job wrote (a reason, an event's words): it goes out printable
    (neutral.printable), never as a terminal escape, whichever caller built it."""
    from rich.text import Text

    text = Text(f"{at.astimezone(UTC):%H:%M:%S} ", style="dim")
    if subject:
        text.append(printable(subject) + " ")
    text.append(printable(what), style=line_style(what))
    if detail:
        text.append(f"  {printable(detail, lines=True)}")
    return text


def ended_detail(record: RunRecord | None, event: Mapping[str, Any]) -> str:
    """`in 12s, $0.0001, exit 0` (+ the reason when it did not succeed, or what was wrong with the
    metrics.json of one that did)."""
    if record is None:
        return line_text(str(event.get("reason") or ""))
    parts = []
    if record.duration_seconds is not None:
        parts.append(f"in {took_text(record, None)}")  # and a local run's wait for its turn, left out of both
    parts.append(run_cost_text(record))
    if record.exit_code is not None:
        parts.append(f"exit {record.exit_code}")
    return ", ".join(parts) + ended_words(record)


JOB_COLUMNS = ("job", "next run (UTC)", "in")
FLIGHT_COLUMNS = ("run", "state", "for", "vm")


def job_rows(upcoming: Mapping[str, datetime], now: datetime) -> list[tuple[str, str, str]]:
    """Each job with its next fire time and how long until then, soonest first."""
    return [(name, f"{fire.astimezone(UTC):%Y-%m-%d %H:%M}", format_duration(max(0.0, (fire - now).total_seconds())))
            for name, fire in sorted(upcoming.items(), key=lambda item: item[1])]


def flight_rows(flying: Iterable[InFlight], now: datetime) -> list[tuple[str, str, str, str]]:
    """Each run in flight with its state, how long it has been on, and its VM; oldest first."""
    return [(f"{f.job}/{f.run_id}", f.state, format_duration(max(0.0, (now - f.since).total_seconds())), f.vm)
            for f in sorted(flying, key=lambda f: f.since)]


def panel(upcoming: Mapping[str, datetime], flying: Iterable[InFlight], problems: int, now: datetime) -> Any:
    """The live panel: the jobs table, the runs in flight (when there are any) and a footer."""
    from rich.console import Group
    from rich.text import Text

    jobs = _table("jobs", JOB_COLUMNS)
    for row in job_rows(upcoming, now):
        jobs.add_row(*row)
    parts: list[Any] = [jobs]
    flights = flight_rows(flying, now)
    if flights:
        runs = _table("runs in flight", FLIGHT_COLUMNS)
        for run, state, since, vm in flights:
            runs.add_row(run, Text(state, style=STATE_STYLES.get(state, "")), since, vm)
        parts.append(runs)
    footer = "Ctrl-C stops everything."
    if problems:
        footer = f"[red]{problems} problem(s) in the job files (above).[/red] " + footer
    parts.append(Text.from_markup(f"[dim]{footer}[/dim]"))
    return Group(*parts)


def _table(title: str, columns: Sequence[str]) -> Any:
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold", title=title, title_justify="left")
    for column in columns:
        table.add_column(column, no_wrap=True)
    return table


WAIT_COLOURS: Mapping[str, str] = {RunState.SUCCEEDED: "green", RunState.RUNNING: "cyan",
                                   RunState.STARTING: "yellow", RunState.QUEUED: "magenta"}


def wait_rows(records: Iterable[RunRecord], now: datetime) -> list[tuple[str, str, str, str, str, str]]:
    """`up --once`'s runs while it waits: run, state, its colour, attempts, how long it took (an
    ended run's work, and its wait for its turn) or has taken so far, and a note (a succeeded run's
    metrics.json problems, or why a queued run waits)."""

    rows = []
    for record in records:
        colour = WAIT_COLOURS.get(record.state, "red" if record.terminal else "white")
        age = format_duration(((record.updated_at if record.terminal else now) - record.created_at).total_seconds())
        if record.terminal and record.duration_seconds is not None:
            age = took_text(record, now, short=True)  # the work, and a local run's wait for its turn
        rows.append((f"{record.job}/{record.run_id}", str(record.state), colour, str(len(record.attempts)),
                     age, queued_reason(record) or metrics_flag(record)))
    return rows


def wait_table(records: Iterable[RunRecord], now: datetime) -> Any:
    """The live table `up --once` shows while it waits: one row per run."""
    from rich.table import Table
    from rich.text import Text

    rows = wait_rows(records, now)
    noted = any(row[-1] for row in rows)
    table = Table(box=None, pad_edge=False)
    for column in ("run", "state", "attempt", "for", *(["note"] if noted else [])):
        table.add_column(column)
    for run, state, colour, attempts, took, note in rows:
        table.add_row(run, f"[{colour}]{state}[/]", attempts, took, *([Text(note, style="yellow")] if noted else []))
    return table
