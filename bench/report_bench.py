"""Report statistics: how often the 95% interval of a ratio of medians holds the true ratio, by
the number of repeats, beside the 95% it claims; and how long one report's intervals take.

Run times are drawn from a log-normal distribution (σ = 8%, the spread of separate cloud VMs
running one benchmark) for a base and a configuration 1.5x slower, `TRIALS` times per size,
from a fixed seed. The baseline of the coverage rows is the nominal 0.95, so the ratio column
says how far a percentile bootstrap on few runs falls short of it (the reason docs/benchmarks.md
asks for more repeats before trusting a narrow interval).
"""

from __future__ import annotations

import time

import numpy as np

from bench import Section
from spotcron.present.stats import CONFIDENCE, ratio_of_medians

TRUE_RATIO = 1.5
SIGMA = 0.08
SIZES = (3, 5, 10, 20)


def coverage(n: int, trials: int, rng: np.random.Generator) -> float:
    held = 0
    for _ in range(trials):
        base = np.exp(rng.normal(np.log(100.0), SIGMA, n)).tolist()
        other = np.exp(rng.normal(np.log(100.0 * TRUE_RATIO), SIGMA, n)).tolist()
        ratio = ratio_of_medians(other, base)
        held += ratio.low <= TRUE_RATIO <= ratio.high
    return held / trials


def run(quick: bool = False) -> Section:
    trials = 40 if quick else 400
    section = Section("report", "Report statistics: interval coverage by repeats",
                      baseline=f"the nominal {CONFIDENCE:.0%} coverage the interval claims")
    rng = np.random.default_rng(15)
    for n in SIZES[:2] if quick else SIZES:
        section.add(f"coverage of the 95% interval, {n} runs a side", coverage(n, trials, rng), CONFIDENCE,
                    "share", better="higher")
    runs = 300 if quick else 3000
    values = np.exp(rng.normal(np.log(100.0), SIGMA, runs)).tolist()
    started = time.perf_counter()
    ratio_of_medians(values, values[::-1])
    section.add(f"one ratio's interval, {runs} runs a side", time.perf_counter() - started, 1.0, "s",
                baseline_label="1 s")
    section.notes.append(f"{trials} simulated benchmarks per size; run times log-normal, sigma {SIGMA:.0%}, "
                         f"true ratio {TRUE_RATIO}x; coverage is a share (1.00 = always)")
    return section
