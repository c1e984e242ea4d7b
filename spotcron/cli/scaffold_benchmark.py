"""What `spotcron init --benchmark` writes: a matrix job given as axes, a training script timed in
tasks, the small module that writes its metrics.json, and the image's Dockerfile.

The script needs only Python's standard library, so `spotcron up --once` runs it as it is; each
task is a fixed amount of work timed on its own (after an untimed warm-up), so its time compares
across configurations, and the job compares every task (`benchmark.compare`) and their geometric mean.
"""

from __future__ import annotations

JOB_NAME = "benchmark"
FOLDER = "benchmark"

JOB_TEXT = """\
# A benchmark: the same training script on several machines and settings, compared per task.
# Every field: docs/jobs.md and docs/benchmarks.md in the spotcron source.
#   spotcron up --once                  run each entry's repeats locally (they take turns on this host)
#   spotcron report benchmark           per configuration and per task, relative to the base
description: Training time and cost per machine and batch size
schedule: "0 3 * * 1"           # Mondays 03:00 UTC
time_zone: Etc/UTC
build: benchmark                # benchmark/Dockerfile: `spotcron deploy` builds it and runs it by digest
machine:
  spot: true
timeout: 30m
repeat: 4                       # runs per entry and tick, each on its own VM: 4 a side is the fewest whose
                                # interval reaches 95% (3 give 90%); 5 is MLPerf's count
benchmark:
  base: e2-2-b64                # the entry every other is compared with (1.00x)
  time_metric: train_seconds    # a run's time: its timed tasks (the same work in every run)
  compare: [fit_seconds, score_seconds]   # each task compared on its own
  overall: true                 # and the geometric mean of the per-task ratios
# The matrix as a cross product: one entry per machine and batch size, named by their labels
# (e2-2-b64, e2-2-b256, e2-4-b64, e2-4-b256).
axes:
  - e2-2: {machine: {type: e2-standard-2}}
    e2-4: {machine: {type: e2-standard-4}}
  - b64: {env: {BATCH: "64"}}
    b256: {env: {BATCH: "256"}}
local:
  # What `spotcron up` runs without a container runtime: the same script, from this folder, with
  # less work (a second or so a run), the same in every entry so their times compare.
  command: python3 benchmark/train.py --samples 102400 --passes 80
"""

METRICS_HELPER = '''\
"""Write spotcron's /results/metrics.json: the work done and named figures, each with its unit.

    metrics = Metrics()
    with metrics.timed("fit_seconds"):
        fit()
    metrics.work(6400, "samples")
    metrics.write()        # $SPOTCRON_RESULTS_DIR/metrics.json (on a VM: /results/metrics.json)

Standard library only: copy this file beside your own script.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from contextlib import contextmanager
from pathlib import Path

_NAME = re.compile(r"\\A[A-Za-z_][A-Za-z0-9_.-]{0,63}\\Z")


class Metrics:
    def __init__(self) -> None:
        self.figures: dict[str, dict[str, object]] = {}
        self.done: dict[str, object] | None = None

    def add(self, name: str, value: float, unit: str) -> None:
        """A named figure: seconds ("s"), a rate ("samples/s"), a ratio ("1")."""
        if not _NAME.match(name) or not math.isfinite(value) or not 1 <= len(unit) <= 32:
            raise ValueError(f"metric {name!r}: a name of letters, digits, _ . - (at most 64), a finite value and "
                             f"a unit of 1-32 characters")
        self.figures[name] = {"value": float(value), "unit": unit}

    def work(self, value: float, unit: str) -> None:
        """How much the run processed (samples, steps): the report divides time and cost by it."""
        if not value > 0:
            raise ValueError("the work done must be more than 0")
        self.done = {"value": float(value), "unit": unit}

    @contextmanager
    def timed(self, name: str):
        """Times the block; add `sync()` of your device at its end (a GPU runs ahead of Python)."""
        started = time.perf_counter()
        yield
        self.add(name, time.perf_counter() - started, "s")

    def write(self, results_dir: str | None = None) -> Path:
        folder = Path(results_dir or os.environ.get("SPOTCRON_RESULTS_DIR", "/results"))
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "metrics.json"
        document = {"metrics": self.figures, **({"work": self.done} if self.done else {})}
        path.write_text(json.dumps(document, indent=2) + "\\n")
        return path
'''

TRAIN_TEXT = '''\
\"\"\"A training benchmark in two tasks, each a fixed amount of work timed on its own: fit a logistic
regression by SGD on --samples samples, then score the held-out samples --passes times. Replace
the tasks with yours; keep the shape:

- warm up untimed first (caches, allocations; a GPU's clocks);
- give every run the same work, sized to take seconds (a loop of milliseconds measures the timer,
  not the machine): then a task's time says how fast the configuration does it, and samples per
  second how much it gets through. (Timed to a budget of seconds instead, every run would take the
  budget, whatever the machine: only the rate would tell them apart.);
- write metrics.json with the work done and one `TASK_seconds` per task (spotcron_metrics.py).
\"\"\"

from __future__ import annotations

import argparse
import math
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spotcron_metrics import Metrics  # noqa: E402

FEATURES = 32


def samples(count: int, seed: int) -> list[tuple[list[float], int]]:
    teacher = random.Random(1234)
    weights = [teacher.uniform(-1, 1) for _ in range(FEATURES)]
    rng = random.Random(seed)
    data = []
    for _ in range(count):
        x = [rng.gauss(0, 1) for _ in range(FEATURES)]
        data.append((x, int(sum(w * v for w, v in zip(weights, x)) > 0)))
    return data


def sgd_step(model: list[float], batch: list[tuple[list[float], int]], rate: float = 0.1) -> None:
    gradient = [0.0] * FEATURES
    for x, y in batch:
        p = 1 / (1 + math.exp(-max(-30.0, min(30.0, sum(w * v for w, v in zip(model, x))))))
        for i, v in enumerate(x):
            gradient[i] += (p - y) * v
    for i in range(FEATURES):
        model[i] -= rate * gradient[i] / len(batch)


def accuracy(model: list[float], data: list[tuple[list[float], int]]) -> float:
    return sum(int(sum(w * v for w, v in zip(model, x)) > 0) == y for x, y in data) / len(data)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=int(os.environ.get("BATCH", "64")))
    parser.add_argument("--samples", type=int, default=1_024_000,
                        help="training samples to fit: the work, the same in every configuration")
    parser.add_argument("--passes", type=int, default=400, help="times the held-out samples are scored")
    args = parser.parse_args()
    if args.batch < 1 or args.samples < args.batch or args.passes < 1:
        parser.error("--batch, --passes and --samples must be at least 1, and --samples at least --batch")
    train, held_out = samples(args.batch * 20, seed=1), samples(1000, seed=2)
    model = [0.0] * FEATURES
    metrics = Metrics()

    def fit(i: int) -> None:
        start = (i % 20) * args.batch
        sgd_step(model, train[start:start + args.batch])

    for i in range(3):  # warm-up, untimed
        fit(i)
    steps = args.samples // args.batch  # the same samples whatever the batch size
    with metrics.timed("fit_seconds"):
        for i in range(steps):
            fit(i)
    with metrics.timed("score_seconds"):
        for _ in range(args.passes):
            accuracy(model, held_out)
    fit_seconds = metrics.figures["fit_seconds"]["value"]
    score_seconds = metrics.figures["score_seconds"]["value"]
    metrics.add("train_seconds", fit_seconds + score_seconds, "s")
    metrics.add("fit_samples_per_second", steps * args.batch / fit_seconds, "samples/s")
    metrics.add("heldout_accuracy", accuracy(model, held_out), "1")
    metrics.work(steps * args.batch, "samples")
    path = metrics.write()
    print(f"fit {steps * args.batch} samples in batches of {args.batch} in {fit_seconds:.2f} s "
          f"({steps * args.batch / fit_seconds:,.0f} samples/s), scored {args.passes} times in {score_seconds:.2f} s, "
          f"held-out accuracy {accuracy(model, held_out):.2f}; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

DOCKERFILE_TEXT = """\
# The benchmark's image: `spotcron deploy` builds it (the job's build: benchmark) and runs it by digest.
FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /app
COPY train.py spotcron_metrics.py /app/
# /results is mounted by spotcron; SPOTCRON_RESULTS_DIR names it.
ENTRYPOINT ["python", "/app/train.py"]
"""


def files() -> dict[str, str]:
    """Relative path → text."""
    return {f"jobs/{JOB_NAME}.yaml": JOB_TEXT, f"{FOLDER}/train.py": TRAIN_TEXT,
            f"{FOLDER}/spotcron_metrics.py": METRICS_HELPER, f"{FOLDER}/Dockerfile": DOCKERFILE_TEXT}
