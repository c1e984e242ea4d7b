"""The statistics of benchmark reports: spread of a sample, a ratio of medians with its interval,
and the regression flag of a history.

- Spread: median, quartiles (the "inclusive" method: linear between order statistics, as numpy's
  default percentile), IQR, standard deviation, min and max.
- Ratio of medians (a configuration against the base), with an exact rank interval: the
  Mann-Whitney (Hodges-Lehmann) confidence interval of the shift between the two samples' log
  times, i.e. of the ratio between them. The pairwise ratios a_i / b_j are sorted, and the k-th
  smallest and k-th largest bound the interval, k chosen from the exact distribution of the
  Mann-Whitney U statistic so that the confidence is at least `CONFIDENCE` where the run counts
  allow it, else the most they allow. Its confidence is exact and known, whatever the
  distribution of run times, when the configurations differ by a factor (the same spread shape),
  and it is stated with the interval: three runs a side give at most 90% (1 - 2/20; the interval
  is then the ratio of the ranges), five a side 97%. A percentile bootstrap would say 95% at
  three runs a side and hold the true ratio 90.7% of the time (`python -m bench --only report`
  measures the coverage at each run count). A ratio whose
  interval contains 1.0 is a difference the spread does not support. With fewer than two runs
  on either side there is no interval at all.
- Regression flag: the latest tick's value against the ticks before it (up to `WINDOW` of them,
  at least `MIN_HISTORY`). The band is median ± max(`OUTLIER_Z` / 0.6745 × MAD, `BAND_FLOOR` ×
  median): Iglewicz and Hoaglin's modified z-score rule (|0.6745 (x − median) / MAD| > 3.5), with
  a floor so that a perfectly steady history does not flag noise of a few percent.

Pure and deterministic: plain floats in, dataclasses out, no randomness. Up to `EXACT_PAIRS`
pairs every pairwise ratio is computed; above it, the k-th smallest is found by bisection over
sorted samples (3,000 runs a side: `python -m bench --only report` times it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

CONFIDENCE = 0.95
EXACT_PAIRS = 1_000_000  # pairwise ratios computed outright up to this many
EXACT_U = 120  # run counts (both sides together) up to which U's distribution is counted exactly
REPEATS_FOR_CONFIDENCE = 4  # the fewest runs a side whose interval reaches 95% (97.1%; 3 a side: 90%)
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


def reciprocal(value: Spread | None, values: Sequence[float] = ()) -> Spread | None:
    """The spread of 1/x from the spread of x: median, quartiles and range are the reciprocals of
    `value`'s (swapped), so a rate and the time per unit it comes from always agree (1 / 12.2 ns is
    82M/s), where medians taken apart would not with an even count of runs (a mean of the two middle
    times against a mean of the two middle rates). The standard deviation is that of `values` (the
    rates themselves). None where a time is not above 0: its rate is no number."""
    if value is None or value.low <= 0:
        return None
    rates = [float(v) for v in values]
    return Spread(n=value.n, median=1 / value.median, q1=1 / value.q3, q3=1 / value.q1,
                  stdev=statistics.stdev(rates) if len(rates) > 1 else None, low=1 / value.high, high=1 / value.low)


def _quartiles(data: list[float]) -> tuple[float, float]:
    q1, _, q3 = statistics.quantiles(data, n=4, method="inclusive")
    return q1, q3


@dataclass(frozen=True)
class Ratio:
    value: float
    low: float | None = None  # the interval; None when either side has fewer than two runs
    high: float | None = None
    confidence: float | None = None  # what the interval achieves at these run counts (exact)
    alike: bool = False  # every run of each side took the same: the interval's width is 0 for that reason

    def interval(self, digits: int = 2) -> str | None:
        """`0.31-0.45`; where the bounds meet, why there is no spread rather than `1.93-1.93`; where
        they differ only in the digit after `digits`, that digit; below it, how narrow it is, in
        words. None: no interval."""
        if self.low is None or self.high is None:
            return None
        if self.low == self.high:
            # Short: a page's numeric cells do not wrap.
            return "no spread: runs alike" if self.alike else "no spread: ratios tie"
        for places in (digits, digits + 1):
            low, high = f"{self.low:.{places}f}", f"{self.high:.{places}f}"
            if low != high:
                return f"{low}-{high}"
        return f"under {10 ** -digits:g} wide"

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

        return {"ratio": r(self.value), "low": r(self.low), "high": r(self.high), "supported": self.supported,
                "confidence": self.confidence}


def ratio_of_medians(sample: Sequence[float], base: Sequence[float], *,
                     confidence: float = CONFIDENCE) -> Ratio | None:
    """median(sample) / median(base) with its exact rank interval and the confidence that interval
    has; None when either is empty or the base's median is 0. Without an interval below two runs
    a side, or when a value is not above 0 (a ratio of logs needs positive values)."""
    if not sample or not base:
        return None
    base_median = statistics.median(base)
    if base_median == 0:
        return None
    value = statistics.median(sample) / base_median
    if len(sample) < 2 or len(base) < 2 or min(sample) <= 0 or min(base) <= 0:
        return Ratio(value)
    k, achieved = rank_bound(len(sample), len(base), confidence)
    pairs = len(sample) * len(base)
    return Ratio(value, _kth_ratio(sample, base, k), _kth_ratio(sample, base, pairs - k + 1), achieved,
                 alike=len(set(sample)) == 1 and len(set(base)) == 1)


def achieved_confidence(n: int, m: int, confidence: float = CONFIDENCE) -> float:
    """The confidence the interval has with `n` runs against `m` (0.9 at 3 a side, 0.968 at 5)."""
    return rank_bound(n, m, confidence)[1]


def rank_bound(n: int, m: int, confidence: float = CONFIDENCE) -> tuple[int, float]:
    """(k, its confidence): the largest k with P(U < k) <= (1 - confidence) / 2, at least 1.

    The interval [k-th smallest, k-th largest pairwise difference] then holds the true shift with
    probability 1 - 2 P(U <= k - 1) exactly (U: the Mann-Whitney statistic under no difference).
    """
    tail = (1 - confidence) / 2
    if n + m <= EXACT_U:
        cdf = np.cumsum(_u_counts(n, m))
        cdf = cdf / cdf[-1]
        # P(U <= j) for j = 0, 1, ...: k - 1 is the last j whose lower tail stays within `tail`.
        within = int(np.searchsorted(cdf, tail * (1 + 1e-12), side="right"))
        k = max(1, within)
        return k, float(1 - 2 * cdf[k - 1])
    # Many runs: U is close to normal (mean nm/2, variance nm(n+m+1)/12).
    z = statistics.NormalDist().inv_cdf(1 - tail)
    k = max(1, math.floor(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12)))
    mean, sd = n * m / 2, math.sqrt(n * m * (n + m + 1) / 12)
    return k, 1 - 2 * statistics.NormalDist(mean, sd).cdf(k - 0.5)


def _u_counts(n: int, m: int) -> np.ndarray:
    """How many of the C(n+m, n) orderings give each U = 0..nm: f(n, m, u) = f(n-1, m, u-m) + f(n, m-1, u)."""
    # table[j] holds the counts for (i, j) while i runs up to n; floats: C(120, 60) is about 1e35.
    table = [np.ones(1) for _ in range(m + 1)]  # i = 0: U is 0 in the one ordering
    for i in range(1, n + 1):
        row = [np.ones(1)]  # j = 0: U is 0
        for j in range(1, m + 1):
            counts = np.zeros(i * j + 1)
            above = table[j]  # (i-1, j): the largest value is one of the n sample's, beating all j
            counts[j:j + len(above)] += above
            left = row[j - 1]  # (i, j-1): the largest is one of the base's, beating none
            counts[:len(left)] += left
            row.append(counts)
        table = row
    return table[m]


def _kth_ratio(sample: Sequence[float], base: Sequence[float], k: int) -> float:
    """The k-th smallest (1-based) of the pairwise ratios sample_i / base_j."""
    if len(sample) * len(base) <= EXACT_PAIRS:
        ratios = np.divide.outer(np.asarray(sample, dtype=float), np.asarray(base, dtype=float)).ravel()
        return float(np.partition(ratios, k - 1)[k - 1])
    # In logs a ratio is a difference, and the count of differences below a value is monotone in it.
    a_sorted = np.sort(np.log(np.asarray(sample, dtype=float)))
    b_sorted = np.sort(np.log(np.asarray(base, dtype=float)))

    def at_most(t: float) -> int:  # how many differences are <= t
        return int((len(b_sorted) - np.searchsorted(b_sorted, a_sorted - t, side="left")).sum())

    low, high = float(a_sorted[0] - b_sorted[-1]), float(a_sorted[-1] - b_sorted[0])
    for _ in range(200):  # bisection on the value: the count is monotone in t
        middle = (low + high) / 2
        if middle in (low, high):
            break
        if at_most(middle) >= k:
            high = middle
        else:
            low = middle
    return math.exp(high)


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
