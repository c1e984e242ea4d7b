"""Which rounds (ticks) a benchmark report pools, and rounds that disagree.

A round is a tick: the runs of every configuration started for one scheduled time (or one
manual request). Pooling rounds is right when they measure the same thing, and wrong when one
ran on a quiet host and the next beside other work: the medians then fall between two clusters
and the verdicts flip, with nothing to say why. hyperfine, pyperf and pytest-benchmark compare
one sitting; asv and conbench keep each commit's results apart.

- `--tick latest` or `--tick "2026-11-23 03:00"` (a tick as `--history` prints it) reports that
  round alone; `--since 2026-11-01` the rounds from that day on.
- Otherwise every round is pooled unless two of a configuration's rounds disagree beyond their
  spread: each has at least two runs and their ranges do not overlap. Then the report keeps the
  latest round only and names the rounds that disagree (`--all-rounds` pools them anyway).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from spotcron.core.errors import SpotcronError
from spotcron.core.runs import RunRecord, RunState
from spotcron.present.tick_labels import tick_label


def choose_rounds(records: Sequence[RunRecord], seconds: Callable[[RunRecord], float | None], *,
                  tick: str | None = None, since: datetime | None = None,
                  pool: bool = False) -> tuple[list[RunRecord], str, list[str]]:
    """(the records to report, which rounds they are in words, notes for the report)."""
    chosen = list(records)
    words = "every round"
    if since is not None:
        cutoff = since if since.tzinfo else since.replace(tzinfo=UTC)
        chosen = [r for r in chosen if (r.tick or r.created_at) >= cutoff]
        words = f"the rounds since {cutoff:%Y-%m-%d %H:%M} UTC"
        if not chosen:
            raise SpotcronError(f"--since {cutoff:%Y-%m-%d %H:%M}: no run of this job started since then; "
                                f"choose an earlier time (spotcron report JOB --history lists the ticks)")
    if tick is not None:
        labels = sorted({tick_label(r) for r in chosen})
        if not labels:
            raise SpotcronError("--tick: the job has no runs to report on")
        wanted = labels[-1] if tick == "latest" else tick.strip()
        matching = [label for label in labels if label.startswith(wanted)]
        if not matching:
            raise SpotcronError(f"--tick {tick!r}: no round of this job starts with it; rounds: "
                                f"{', '.join(labels[-5:])} (or latest)")
        chosen = [r for r in chosen if tick_label(r) in matching]
        return chosen, f"the round {matching[0]}" if len(matching) == 1 else f"{len(matching)} rounds from {wanted}", []
    disagreements = disagreeing(chosen, seconds)
    if not disagreements or pool:
        notes = [f"rounds disagree beyond their spread and are pooled (--all-rounds): {d}" for d in disagreements]
        return chosen, words, notes
    latest = max(tick_label(r) for r in chosen)
    notes = [f"rounds disagree beyond their spread, so they are not pooled: {d}; this report is the latest round, "
             f"{latest} (--tick to choose another, --all-rounds to pool them anyway)" for d in disagreements]
    return [r for r in chosen if tick_label(r) == latest], f"the latest round, {latest}", notes


def disagreeing(records: Sequence[RunRecord], seconds: Callable[[RunRecord], float | None]) -> list[str]:
    """`e2-std-2: 2026-11-23 03:00 (6.1-9.7 s, median 7.9 s) against 2026-11-24 03:00 (30.2-36.0 s, ...)`,
    for each configuration with two rounds of 2+ runs each whose ranges do not overlap."""
    rounds: dict[str, dict[str, list[float]]] = {}
    for record in records:
        value = seconds(record) if record.state == RunState.SUCCEEDED else None
        if value is not None:
            rounds.setdefault(record.variant or "(default)", {}).setdefault(tick_label(record), []).append(value)
    found = []
    for variant, ticks in rounds.items():
        judged = [(label, sorted(values)) for label, values in sorted(ticks.items()) if len(values) >= 2]
        for (one, a), (two, b) in zip(judged, judged[1:], strict=False):
            if a[-1] < b[0] or b[-1] < a[0]:
                found.append(f"{variant}: {one} ({_range(a)}) against {two} ({_range(b)})")
    return found


def _range(values: list[float]) -> str:
    return f"{values[0]:.3g}-{values[-1]:.3g} s, median {statistics.median(values):.3g} s"
