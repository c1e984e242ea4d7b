"""What `spotcron up` shows while it runs.

In a terminal: a live panel (each job with its next fire time, the runs in flight with their
elapsed time) under a scrolling log of one line per run start and end (state, duration, cost),
per job-file problem (file:line) and per job added, removed, paused or resumed. In a pipe: the
same log lines, plain, one per event, and no panel. The view only listens: run events come from
the stack's event feed, reload results from the loader wrapper below; it never changes what the
stack does. What the lines and the panel look like is spotcron.present.live's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from spotcron.core.errors import Problem
from spotcron.core.spec import JobSpec
from spotcron.present.live import InFlight, ended_detail, log_line
from spotcron.present.live import panel as draw_panel


class UpView:
    """Run events and reload problems in; lines (and, in a terminal, a live panel) out."""

    def __init__(self, out: Any, *, now: Callable[[], datetime], read_record: Callable[[str, str], Any],
                 upcoming: Callable[[], Mapping[str, datetime]]):
        self.out = out
        self.now = now
        self.read_record = read_record
        self.upcoming = upcoming
        self.flying: dict[tuple[str, str], InFlight] = {}
        self.problems: list[Problem] = []
        self._lock = threading.Lock()
        self._live: Any = None

    # --- lifecycle -----------------------------------------------------------------------------
    def start(self) -> UpView:
        if self.out.is_terminal:
            from rich.live import Live

            self._live = Live(get_renderable=self.panel, console=self.out, refresh_per_second=2,
                              transient=True, redirect_stdout=False, redirect_stderr=False)
            self._live.start()
        return self

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    # --- what happens ----------------------------------------------------------------------------
    def on_event(self, event: Mapping[str, Any]) -> None:
        kind, job, run_id = event.get("type"), str(event.get("job")), str(event.get("run_id"))
        key = (job, run_id)
        now = self.now()
        with self._lock:
            if kind == "run.scheduled":
                self.flying[key] = InFlight(job, run_id, str(event.get("state")), now)
                return  # the start line comes with the VM
            if kind == "run.started":
                flight = self.flying.setdefault(key, InFlight(job, run_id, "running", now))
                flight.state, flight.vm = "running", str(event.get("vm") or "")
                self._line(now, f"{job}/{run_id}", "started", f"VM {flight.vm} in {event.get('zone')}")
                return
            if kind == "run.queued":
                flight = self.flying.setdefault(key, InFlight(job, run_id, "queued", now))
                flight.state = "queued"
                self._line(now, f"{job}/{run_id}", "queued", str(event.get("reason") or "waiting for room"))
                return
            if kind == "run.retrying":
                if key in self.flying:
                    self.flying[key].state = "retrying"
                self._line(now, f"{job}/{run_id}", "preempted",
                           f"attempt {event.get('attempt')} starts; {event.get('reason') or ''}".rstrip("; "))
                return
            if kind != "run.finished":
                return
            self.flying.pop(key, None)
        record = self.read_record(job, run_id)
        self._line(now, f"{job}/{run_id}", str(event.get("state")), ended_detail(record, event))

    def reloaded(self, specs: list[JobSpec], problems: list[Problem], kept: list[str]) -> None:
        """After a (re)load of the job files: say what is wrong, once per change."""
        with self._lock:
            if problems == self.problems:
                return
            self.problems = list(problems)
        now = self.now()
        for problem in problems:
            self._line(now, "", "error", str(problem))
        if problems:
            loaded = ", ".join(s.name for s in specs) or "none"
            held = f"; kept as loaded before: {', '.join(kept)}" if kept else ""
            count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''} in the job files"
            self._line(now, "", "warning", f"{count}; jobs running: {loaded}{held}")
        else:
            self._line(now, "", "reloaded", f"job files fixed; jobs running: {', '.join(s.name for s in specs) or 'none'}")

    def changed(self, before: Mapping[str, bool], after: Mapping[str, bool]) -> None:
        """After a reload: one line per job added, removed, paused or resumed (name -> paused)."""
        now = self.now()
        for name in sorted(before.keys() | after.keys()):
            if name not in before:
                self._line(now, name, "added", "")
            elif name not in after:
                self._line(now, name, "removed", "its job file is gone; runs in flight finish")
            elif after[name] and not before[name]:
                self._line(now, name, "paused", "no tick starts it until it is resumed")
            elif before[name] and not after[name]:
                self._line(now, name, "resumed", "")

    # --- drawing ---------------------------------------------------------------------------------
    def _line(self, at: datetime, subject: str, what: str, detail: str) -> None:
        text = log_line(at, subject, what, detail)
        # Printed above the panel in a terminal; a plain line in a pipe. Never cut: it wraps.
        (self._live.console if self._live is not None else self.out).print(text, soft_wrap=not self.out.is_terminal)

    def panel(self) -> Any:
        now = self.now()
        with self._lock:
            flying = list(self.flying.values())
            problems = len(self.problems)
        return draw_panel(self.upcoming(), flying, problems, now)


class JobLoader:
    """Loads jobs/ for the scheduler: valid files run, broken ones are reported, and a job whose
    file breaks keeps its last good version (its runs go on) until the file is fixed."""

    def __init__(self, jobs_dir: Path, grace: int, view: UpView | None):
        self.jobs_dir = jobs_dir
        self.grace = grace
        self.view = view
        self.good: dict[str, JobSpec] = {}
        self.loaded_once = False

    def __call__(self) -> list[JobSpec]:
        from spotcron.core.loader import check_jobs

        before = {n: s.paused for n, s in self.good.items()}
        specs, problems = check_jobs([self.jobs_dir], grace=self.grace)
        loaded = {s.name: s for s in specs}
        broken = {Path(p.file).stem for p in problems}
        existing = {p.stem for p in self.jobs_dir.glob("*.y*ml")}
        kept = sorted(n for n in self.good if n in broken and n in existing and n not in loaded)
        self.good = {**{n: self.good[n] for n in kept}, **loaded}
        if self.view is not None:
            self.view.reloaded(specs, problems, kept)
            if self.loaded_once:  # the first load is listed by up itself
                self.view.changed(before, {n: s.paused for n, s in self.good.items()})
        self.loaded_once = True
        return sorted(self.good.values(), key=lambda s: s.name)
