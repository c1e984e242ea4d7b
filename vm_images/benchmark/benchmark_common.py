"""What benchmark.py and benchmark_numpy.py share: tasks kept across a preemption, and metrics.json.

A finished task is saved in the checkpoint directory with the run's settings (`config`); the next
attempt restores it only under the same settings, so figures of another device, size or version
are never passed off as this run's. Both Dockerfiles copy this file beside the two scripts.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def writable_dir(path: Path) -> Path | None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
        return path
    except OSError:
        return None


class Progress:
    """The tasks finished under `config`, kept in `directory`/`filename` (nowhere if not writable)."""

    def __init__(self, directory: Path, filename: str, config: dict[str, Any]):
        self.directory = writable_dir(directory)
        self.filename, self.config = filename, config
        self.done = self._load()

    def _load(self) -> dict[str, Any]:
        if self.directory is None or not (self.directory / self.filename).exists():
            return {}
        try:
            saved = json.loads((self.directory / self.filename).read_text())
        except (OSError, ValueError):
            return {}
        return saved.get("done", {}) if isinstance(saved, dict) and saved.get("config") == self.config else {}

    def _save(self) -> None:
        if self.directory is None:
            return
        tmp = self.directory / (self.filename + ".tmp")
        tmp.write_text(json.dumps({"config": self.config, "done": self.done}, indent=2))
        tmp.replace(self.directory / self.filename)  # atomic: a preemption never leaves half a file

    def restored(self, tasks: list[str]) -> str:
        """The tasks restored, as the end of the run's first line ("; mlp, cnn restored from DIR"), or ""."""
        names = [t for t in tasks if t in self.done]
        return f"; {', '.join(names)} restored from {self.directory}" if names else ""

    def run(self, tasks: list[str], run_task: Callable[[str], dict[str, Any]],
            line: Callable[[str, dict[str, Any]], str]) -> dict[str, Any]:
        """Each task's figures: restored when kept, else run and kept at once; one line printed each."""
        results: dict[str, Any] = {}
        for task in tasks:
            if task in self.done:
                results[task] = {**self.done[task], "resumed": True}
            else:
                results[task] = self.done[task] = run_task(task)
                self._save()
            print(line(task, results[task]), flush=True)
        return results


def totals(results: dict[str, Any]) -> tuple[float, int]:
    """The timed seconds and the samples trained, over every task."""
    return sum(m["seconds"] for m in results.values()), sum(m["steps"] * m["batch"] for m in results.values())


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def write_metrics(results_dir: Path, metrics: dict[str, Any], environ: dict[str, str], started_at: datetime) -> Path:
    """metrics.json in `results_dir`: `metrics`, then the run's id, attempt, start and (now) finish."""
    record = {**metrics, "run_id": environ.get("SPOTCRON_RUN_ID"), "attempt": int(environ.get("SPOTCRON_ATTEMPT", "1")),
              "started_at": _stamp(started_at), "finished_at": _stamp(datetime.now(UTC))}
    results_dir.mkdir(parents=True, exist_ok=True)
    path = results_dir / "metrics.json"
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


def learned_text(m: dict[str, Any], margin: float) -> str:
    """Whether the held-out loss fell by the margin; when it did not, by how much it did, since a
    short local run (a few dozen steps) may learn less than the margin and is not broken for it."""
    if m["heldout_fell"]:
        return "fell"
    start = m["heldout_loss_start"]
    fell = 1 - m["heldout_loss"] / start if start else 0.0
    return f"fell {fell:.0%}, short of the {margin:.0%} this check asks: a short run may not get there"
