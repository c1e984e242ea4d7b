"""The statistics of benchmark reports: spread of a sample, a ratio of medians with its interval,
and the regression flag of a history.

- Spread: median, quartiles (the "inclusive" method: linear between order statistics, as numpy's
  default percentile), IQR, standard deviation, min and max.
- Ratio of medians (a configuration against the base): a percentile bootstrap. Both samples are
  resampled with replacement, independently, `RESAMPLES` times from a fixed seed, so the same
  runs always give the same interval; the 2.5th and 97.5th percentiles of the resampled ratios
  bound the 95% interval. A ratio whose interval contains 1.0 is a difference the spread does not
  support. With fewer than two runs on either side there is no interval at all. With three runs
  a side the bootstrap can only pick among few medians, so intervals are coarse (and honest).
- Regression flag: the latest tick's value against the ticks before it (up to `WINDOW` of them,
  at least `MIN_HISTORY`). The band is median ± max(`OUTLIER_Z` / 0.6745 × MAD, `BAND_FLOOR` ×
  median): Iglewicz and Hoaglin's modified z-score rule (|0.6745 (x − median) / MAD| > 3.5), with
  a floor so that a perfectly steady history does not flag noise of a few percent.

Pure and deterministic: plain floats in, dataclasses out; a numpy Generator seeded with `SEED`,
created per call, is the only source of randomness (vectorised: 4,000 resamples of 3,000 runs
take about a second; `python -m bench --only report` times it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 4000
SEED = 2017  # any fixed value: the interval must not change between two prints of one report
WINDOW = 12
MIN_HISTORY = 4
OUTLIER_Z = 3.5
BAND_FLOOR = 0.05


@dataclass(frozen=True)
class Spread:
    n: int
    median: float
    q1: float
    q3: float
    stdev: float | None  # None below two values
    low: float
    high: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    def to_json(self, digits: int | None = None) -> dict[str, float | int | None]:
        """Full precision unless `digits` asks for rounding: a cost per sample of 3.14e-06 must
        not become 3e-06 in an export that scripts compute with."""
        def r(value: float | None) -> float | None:
            return value if value is None or digits is None else round(value, digits)

        return {"n": self.n, "median": r(self.median), "q1": r(self.q1), "q3": r(self.q3), "iqr": r(self.iqr),
                "stdev": r(self.stdev), "min": r(self.low), "max": r(self.high)}


def spread(values: Sequence[float]) -> Spread | None:
    """The spread of `values`; None for no values."""
    data = sorted(float(v) for v in values)
    if not data:
        return None
    q1, q3 = (data[0], data[0]) if len(data) == 1 else _quartiles(data)
    return Spread(n=len(data), median=statistics.median(data), q1=q1, q3=q3,
                  stdev=statistics.stdev(data) if len(data) > 1 else None, low=data[0], high=data[-1])


def _quartiles(data: list[float]) -> tuple[float, float]:
    q1, _, q3 = statistics.quantiles(data, n=4, method="inclusive")
    return q1, q3


@dataclass(frozen=True)
class Ratio:
    value: float
    low: float | None = None  # the interval; None when either side has fewer than two runs
    high: float | None = None

    @property
    def supported(self) -> bool | None:
        """True: the interval excludes 1.0; False: it contains it; None: no interval."""
        if self.low is None or self.high is None:
            return None
        return not self.low <= 1.0 <= self.high

    @property
    def mark(self) -> str:
        """`~` where the spread does not support a difference, `?` where there is no interval."""
        return {True: "", False: "~", None: "?"}[self.supported]

    def to_json(self, digits: int | None = None) -> dict[str, float | bool | None]:
        def r(value: float | None) -> float | None:
            return value if value is None or digits is None else round(value, digits)

        return {"ratio": r(self.value), "low": r(self.low), "high": r(self.high), "supported": self.supported}


def ratio_of_medians(sample: Sequence[float], base: Sequence[float], *, confidence: float = CONFIDENCE,
                     resamples: int = RESAMPLES, seed: int = SEED) -> Ratio | None:
    """median(sample) / median(base) with its bootstrap interval; None when either is empty or the base is 0."""
    if not sample or not base:
        return None
    base_median = statistics.median(base)
    if base_median == 0:
        return None
    value = statistics.median(sample) / base_median
    if len(sample) < 2 or len(base) < 2:
        return Ratio(value)
    rng = np.random.default_rng(seed)
    numerators = _resampled_medians(np.asarray(sample, dtype=float), resamples, rng)
    denominators = _resampled_medians(np.asarray(base, dtype=float), resamples, rng)
    keep = denominators != 0
    ratios = sorted((numerators[keep] / denominators[keep]).tolist())
    if not ratios:
        return Ratio(value)
    tail = (1 - confidence) / 2
    return Ratio(value, _percentile(ratios, tail), _percentile(ratios, 1 - tail))


def _resampled_medians(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The medians of `resamples` resamples of `values` with replacement, a block at a time."""
    block = max(1, 2_000_000 // len(values))  # about 16 MB of indices per block, however many runs
    medians = []
    for start in range(0, resamples, block):
        picks = rng.integers(0, len(values), size=(min(block, resamples - start), len(values)))
        medians.append(np.median(values[picks], axis=1))
    return np.concatenate(medians)


def _percentile(data: Sequence[float], q: float) -> float:
    """Linear interpolation between the order statistics of sorted `data` (numpy's default)."""
    position = q * (len(data) - 1)
    below = math.floor(position)
    above = min(below + 1, len(data) - 1)
    return data[below] + (data[above] - data[below]) * (position - below)


Direction = Literal["higher", "lower"]


@dataclass(frozen=True)
class Band:
    center: float
    low: float
    high: float
    history: int  # how many earlier ticks made it
    latest: float
    flag: Direction | None  # the latest value is above or below the band

    def to_json(self, digits: int | None = None) -> dict[str, float | int | str | None]:
        def r(value: float) -> float:
            return value if digits is None else round(value, digits)

        return {"center": r(self.center), "low": r(self.low), "high": r(self.high), "history": self.history,
                "latest": r(self.latest), "flag": self.flag}


def regression_band(series: Sequence[float], *, window: int = WINDOW, min_history: int = MIN_HISTORY,
                    z: float = OUTLIER_Z, floor: float = BAND_FLOOR) -> Band | None:
    """The band the ticks before the last one set, and whether the last one falls outside it.

    `series` is one configuration's value per tick, oldest first. None while there are fewer than
    `min_history` earlier ticks.
    """
    if len(series) < min_history + 1:
        return None
    earlier = [float(v) for v in series[-window - 1:-1]]
    latest = float(series[-1])
    center = statistics.median(earlier)
    mad = statistics.median(abs(v - center) for v in earlier)
    half = max(z / 0.6745 * mad, floor * abs(center))
    low, high = center - half, center + half
    flag: Direction | None = "higher" if latest > high else "lower" if latest < low else None
    return Band(center, low, high, len(earlier), latest, flag)
