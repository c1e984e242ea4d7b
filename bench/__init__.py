"""Benchmarks that print every speed or cost figure beside a baseline measured in the same run.

Each bench module exposes `run(quick: bool = False) -> Section`. A Section is a table of
Figures: what spotcron does, what the baseline does, and their ratio (spotcron / baseline),
so a reader never has to trust a number taken on another day or another machine.

    python -m bench            # everything (a few minutes)
    python -m bench --quick    # small sizes, a smoke run
    python -m bench --only cost
"""

from __future__ import annotations

import math
import platform
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

Unit = Literal["usd", "s", "ms", "calls", "runs/s", "samples/s", "count", "share"]


@dataclass(frozen=True)
class Figure:
    """One row: a measured quantity for spotcron and for the baseline, in the same unit."""

    name: str
    spotcron: float
    baseline: float
    unit: Unit
    better: Literal["lower", "higher"] = "lower"
    baseline_label: str = ""  # what the baseline is, when the section's title does not say it

    @property
    def ratio(self) -> float | None:
        if self.baseline == 0 or math.isnan(self.baseline) or math.isnan(self.spotcron):
            return None
        return self.spotcron / self.baseline

    def to_json(self) -> dict:
        return {**asdict(self), "ratio": self.ratio}


@dataclass
class Section:
    """A bench's result: its figures, the notes a reader needs to read them, and its run time."""

    key: str
    title: str
    baseline: str  # one line: what every row's baseline is
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unavailable: str | None = None  # why the section has no figures (a missing part), if so
    seconds: float = 0.0

    def add(self, name: str, spotcron: float, baseline: float, unit: Unit, **kwargs) -> Figure:
        figure = Figure(name, float(spotcron), float(baseline), unit, **kwargs)
        self.figures.append(figure)
        return figure

    def to_json(self) -> dict:
        return {"key": self.key, "title": self.title, "baseline": self.baseline, "notes": list(self.notes),
                "unavailable": self.unavailable, "seconds": round(self.seconds, 2),
                "figures": [f.to_json() for f in self.figures]}


# --- formatting ----------------------------------------------------------------------------------


def fmt(value: float, unit: Unit) -> str:
    if math.isnan(value):
        return "n/a"
    if unit == "usd":
        return f"${value:.4f}" if abs(value) < 0.1 else f"${value:.3f}" if abs(value) < 10 else f"${value:,.2f}"
    if unit == "s":
        return f"{value:.3f} s" if abs(value) < 1 else f"{value:.2f} s" if abs(value) < 100 else f"{value:,.0f} s"
    if unit == "ms":
        return f"{value:.1f} ms" if abs(value) < 100 else f"{value:,.0f} ms"
    if unit == "runs/s":
        return f"{value:.2f} runs/s"
    if unit == "samples/s":
        return f"{value:,.0f} samples/s"
    if unit == "share":
        return f"{value:.3f}"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def fmt_ratio(figure: Figure) -> str:
    ratio = figure.ratio
    if ratio is None:
        return "n/a"
    text = f"{ratio:.3f}x" if ratio < 0.1 else f"{ratio:.2f}x"
    return text


def machine_line() -> str:
    """What the figures were taken on: CPU count, memory, Python."""
    import os

    cpus = os.cpu_count() or 0
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
        memory = f"{pages * size / 2**30:.0f} GiB"
    except (ValueError, OSError, AttributeError):
        memory = "unknown memory"
    return f"{cpus} CPU cores, {memory}, Python {platform.python_version()} ({platform.system()})"


# --- small statistics helpers shared by the benches ------------------------------------------------


def median(values: Iterable[float]) -> float:
    values = list(values)
    return statistics.median(values) if values else float("nan")


def maximum(values: Sequence[float]) -> float:
    return max(values) if values else float("nan")
