"""The local stand-in for Cloud Scheduler: fire each job at its cron times, in its time zone.

Like a Cloud Scheduler entry, a fire publishes the job's name and spec digest to the start topic
and nothing more; the tick is worked out by start_job from the publish time. The sweep fires on its own
interval. Job files are re-read when they change or on SIGHUP; a reload never loses a tick, because
fire times come from the schedule and the instant up to which ticks were already handled, not from
the moment the reload ran.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from spotcron.core.cron.schedule import load_time_zone, parse_schedule
from spotcron.core.spec import JobSpec
from spotcron.engine.deployed import start_message

log = logging.getLogger("spotcron.local")

Publish = Callable[[str, bytes, dict], str]


class LocalScheduler:
    def __init__(self, load: Callable[[], list[JobSpec]], publish: Publish, clock, *, start_topic: str,
                 sweep_topic: str, sweep_interval_s: float, watch: list[Path] | None = None,
                 on_fire: Callable[[JobSpec, datetime], None] | None = None, poll_s: float = 2.0):
        self._load = load
        self._publish = publish
        self.clock = clock
        self.start_topic = start_topic
        self.sweep_topic = sweep_topic
        self.sweep_interval = timedelta(seconds=sweep_interval_s)
        self._watch = watch or []
        self._on_fire = on_fire
        self._poll_s = poll_s
        self._stop = threading.Event()
        self._reload = threading.Event()
        self._thread: threading.Thread | None = None
        self.specs: list[JobSpec] = []
        self._next: dict[str, datetime] = {}
        self._next_sweep: datetime | None = None
        # Every tick at or before this instant has been handled (fired, or collapsed into a fire).
        self._handled_until: datetime | None = None
        self._stamp = self._fingerprint()

    # --- control -------------------------------------------------------------------------------
    def start(self) -> LocalScheduler:
        self.reload()
        self._thread = threading.Thread(target=self._loop, name="spotcron-scheduler", daemon=True)
        self._thread.start()
        return self

    def request_reload(self) -> None:
        """Safe from a signal handler."""
        self._reload.set()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def reload(self) -> None:
        specs = self._load()
        if self._handled_until is None:
            self._handled_until = self.clock.now()
        # Not "after now": a file noticed just past a tick (the poll runs every few seconds) would
        # move that tick's run to the next one, with no record and no log line.
        since = self._handled_until
        self.specs = specs
        self._next = {}
        for spec in specs:
            if spec.paused:
                continue
            fire = parse_schedule(spec.schedule).next_after(since, load_time_zone(spec.time_zone))
            self._next[spec.name] = fire
        self._stamp = self._fingerprint()
        log.info("scheduler loaded %d jobs", len(specs))

    def upcoming(self) -> dict[str, datetime]:
        return dict(self._next)

    # --- the loop ------------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                wake = self.step()
            except Exception:  # noqa: BLE001 - a dead thread would stop every job without a word
                # A fire that failed to publish stays due, so the next step tries it again.
                log.exception("scheduler step failed; trying again in %ss", self._poll_s)
                wake = self.clock.now() + timedelta(seconds=self._poll_s)
            self._stop.wait(max(0.05, min(self._poll_s, (wake - self.clock.now()).total_seconds())))

    def step(self) -> datetime:
        """Reload if asked or if a job file changed, fire what is due now; returns the next wake-up."""
        now = self.clock.now()
        if self._next_sweep is None:
            self._next_sweep = now + self.sweep_interval
        if self._reload.is_set() or self._fingerprint() != self._stamp:
            self._reload.clear()
            try:
                self.reload()
            except Exception:  # noqa: BLE001 - keep the old specs; the error is logged
                log.exception("reloading jobs failed; keeping the jobs loaded before")
                self._stamp = self._fingerprint()
        for spec in self.specs:
            fire = self._next.get(spec.name)
            if fire is not None and fire <= now:
                self._fire(spec, fire)
                # Missed ticks (a suspended laptop) collapse into this one fire, as with Cloud Scheduler.
                self._next[spec.name] = parse_schedule(spec.schedule).next_after(now, load_time_zone(spec.time_zone))
        self._handled_until = now
        if now >= self._next_sweep:
            self._publish(self.sweep_topic, b"{}", {})
            self._next_sweep = now + self.sweep_interval
        return min([*self._next.values(), self._next_sweep])

    def _fire(self, spec: JobSpec, fire: datetime) -> None:
        log.info("firing %s for %s", spec.name, fire.isoformat())
        self._publish(self.start_topic, start_message(spec), {})
        if self._on_fire is not None:
            self._on_fire(spec, fire)

    def _fingerprint(self) -> tuple:
        stamps = []
        for root in self._watch:
            paths = sorted(root.glob("*.y*ml")) if root.is_dir() else [root]
            stamps.extend((str(p), p.stat().st_mtime_ns) for p in paths if p.exists())
        return tuple(stamps)
