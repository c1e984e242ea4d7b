"""Report statistics: how often a ratio's interval holds the true ratio, by the number of repeats,
beside the confidence the report states for that many; how often it calls two identical
configurations different; and how long one report's intervals take.

Run times are drawn from a log-normal distribution (σ = 8%, the spread of separate cloud VMs
running one benchmark) for a base and a configuration 1.5x slower, `TRIALS` times per size,
from a fixed seed. The baseline of each coverage row is the confidence the report states at that
run count (90% at 3 runs a side, the most 3 a side allow; 97% at 4 and 5): the ratio column is
1.00x or above when the interval means its label. The example job's repeats are marked.
"""

from __future__ import annotations

import time

import numpy as np

from bench import Section
from spotcron.present.stats import achieved_confidence, ratio_of_medians

TRUE_RATIO = 1.5
SIGMA = 0.08
SIZES = (3, 4, 5, 10, 20)
EXAMPLE_REPEATS = 3  # jobs/dl-benchmark.yaml's repeat


def coverage(n: int, trials: int, rng: np.random.Generator, true_ratio: float = TRUE_RATIO) -> float:
    held = 0
    for _ in range(trials):
        base = np.exp(rng.normal(np.log(100.0), SIGMA, n)).tolist()
        other = np.exp(rng.normal(np.log(100.0 * true_ratio), SIGMA, n)).tolist()
        ratio = ratio_of_medians(other, base)
        held += ratio.low <= true_ratio <= ratio.high
    return held / trials


def run(quick: bool = False) -> Section:
    trials = 200 if quick else 4000
    section = Section("report", "Report statistics: interval coverage by repeats",
                      baseline="the confidence the report states at that many runs a side")
    rng = np.random.default_rng(15)
    for n in SIZES[:2] if quick else SIZES:
        stated = achieved_confidence(n, n)
        example = " (the example's repeats)" if n == EXAMPLE_REPEATS else ""
        section.add(f"coverage of the interval stated as {stated:.1%}, {n} runs a side{example}",
                    coverage(n, trials, rng), stated, "share", better="higher")
    same = coverage(EXAMPLE_REPEATS, trials, rng, true_ratio=1.0)
    section.add(f"identical configurations called different, {EXAMPLE_REPEATS} runs a side", 1 - same,
                1 - achieved_confidence(EXAMPLE_REPEATS, EXAMPLE_REPEATS), "share")
    runs = 300 if quick else 3000
    values = np.exp(rng.normal(np.log(100.0), SIGMA, runs)).tolist()
    started = time.perf_counter()
    ratio_of_medians(values, values[::-1])
    section.add(f"one ratio's interval, {runs} runs a side", time.perf_counter() - started, 1.0, "s",
                baseline_label="1 s")
    section.notes.append(f"{trials} simulated benchmarks per size; run times log-normal, sigma {SIGMA:.0%}, "
                         f"true ratio {TRUE_RATIO}x; coverage is a share (1.00 = always); the interval is the "
                         f"exact rank (Mann-Whitney) interval of the ratio, whose confidence is stated per ratio")
    return section
