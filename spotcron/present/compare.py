"""What a benchmark report adds to each configuration's time and cost: one comparison per time
metric (each task of a benchmark), the overall figure as the geometric mean of the per-metric
ratios, the cost of the measured work (the articles' "seconds x price"), the phases of a run,
and the warnings a benchmarker's tools give (outlier runs, high noise, a busy host).

- Per metric: the median of the metric, its ratio to the base's median with the rank interval of
  `spotcron.present.stats`, and the ratio of the work cost (the metric's seconds times the
  configuration's per-second price).
- Overall: the geometric mean of a configuration's per-metric ratios (every metric weighs the
  same, however long it runs: a sum of times would be the slowest task's). Its interval is the
  rank interval of the runs' own geometric means, against the base's.
- Work cost: time x (machine + GPUs) per-second price, with no one-minute minimum, boot, disk or
  function calls: what the 2017 articles called a run's cost. The VM-life cost (every attempt
  from creation to deletion, per second after a one-minute minimum, plus its disk and calls) is
  what the bill says; both are shown, each named.
- Phases, from the run record of the attempt that succeeded: boot and image pull (VM created to
  container start; the record has no mark between the two), set-up (the container's time outside
  the measured work), the measured work (the time metric), upload and teardown (container end to
  VM deleted). A local VM that waited for its turn on the host (or its GPUs) has the wait left
  out of its boot and its cost, and shown on its own: a VM of its own on Google Cloud would not
  have waited for another run.
- Outliers: a run at `OUTLIER_RATIO` (1.5) times its configuration's median or more, or at
  1/1.5 or less (a ratio scale: 2x and 0.5x are as far); two runs that far apart are said to
  disagree, as neither can be called the outlier; noise: an IQR over `NOISY_IQR` of the median
  (pyperf warns at a standard deviation of 10% of the mean).

Pure: run records, prices and samples in, values out.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from spotcron.core.runs import RunRecord
from spotcron.cost.billing import BILLING_MINIMUM_S, billed_vm_seconds, vm_items
from spotcron.cost.local_wait import without_wait
from spotcron.cost.prices import PriceTable
from spotcron.present.stats import Ratio, Spread, ratio_of_medians, spread

NOISY_IQR = 0.10
OUTLIER_RATIO = 1.5  # a run at 1.5x its configuration's median or more, or at 1/1.5 (0.67x) or less
PHASES = ("boot_pull", "setup", "measured", "upload")
PHASE_NAMES = {"boot_pull": "boot + pull", "setup": "set-up", "measured": "measured", "upload": "upload"}
COST_BASIS = (f"cost: the VM's life x its price, every attempt from creation to deletion (boot, image pull, "
              f"set-up, the job, upload), per second after a {BILLING_MINIMUM_S}-second minimum, plus boot disk "
              f"and function calls")
OVERALL = "overall (geomean)"


def work_cost_basis(time_basis: str) -> str:
    return f"work cost: {time_basis} x the machine's (and GPUs') per-second price, the articles' formula"


@dataclass(frozen=True)
class Phases:
    """Median seconds of each phase over a configuration's runs (None: not recorded)."""

    boot_pull: float | None = None
    setup: float | None = None
    measured: float | None = None
    upload: float | None = None
    vm: float | None = None  # the VM's life, first creation to last deletion, every attempt
    wait: float | None = None  # a local VM's wait for its turn on the host, left out of the rest

    def to_json(self) -> dict[str, float | None]:
        return {"boot_pull_s": self.boot_pull, "setup_s": self.setup, "measured_s": self.measured,
                "upload_s": self.upload, "vm_s": self.vm, "local_wait_s": self.wait}


def run_phases(record: RunRecord, measured: float | None) -> dict[str, float | None]:
    """The phases of the run's last attempt (the one that succeeded) and its VMs' whole life."""
    attempt = record.current_attempt
    phases: dict[str, float | None] = dict.fromkeys((*PHASES, "vm"))
    if attempt is None:
        return phases
    if attempt.created_at and attempt.started_at:
        phases["boot_pull"] = max(0.0, (attempt.started_at - attempt.created_at).total_seconds())
    container = attempt.container_seconds
    if container is not None:
        phases["measured"] = measured if measured is not None else container
        phases["setup"] = max(0.0, container - phases["measured"]) if measured is not None else 0.0
    if attempt.finished_at and attempt.deleted_at:
        phases["upload"] = max(0.0, (attempt.deleted_at - attempt.finished_at).total_seconds())
    lives = [a.vm_seconds for a in record.attempts if a.vm_seconds is not None]
    phases["vm"] = sum(lives) if lives else None
    return phases


def median_phases(runs: Sequence[Mapping[str, float | None]]) -> Phases | None:
    if not runs:
        return None

    def median(name: str) -> float | None:
        values = [run[name] for run in runs if run.get(name) is not None]
        return statistics.median(values) if values else None

    return Phases(**{name: median(name) for name in (*PHASES, "vm", "wait")})


def hourly_price(record: RunRecord, table: PriceTable | None, region: str) -> float | None:
    """The machine's and its GPUs' price per hour for the run's last attempt: from the table, else
    from what the record was billed (its compute and GPU items over its billed seconds)."""
    attempt = record.current_attempt
    if attempt is None:
        return None
    if table is not None:
        try:
            items = vm_items(attempt.machine_type, attempt.provisioning_model == "SPOT", attempt.gpu, 0, 3600,
                             table, region, None)
        except Exception:  # noqa: BLE001 - a machine the table does not price: no work cost, the rest stays
            return None
        return items["compute"] + items["gpu"]
    # A record priced without its local wait (local_wait_s) paid for the VM's life less the wait.
    attempts = without_wait(record)[0].attempts if record.local_wait_s is not None else record.attempts
    billed = sum(billed_vm_seconds(a.vm_seconds) for a in attempts if a.vm_seconds is not None)
    paid = record.cost_items.get("compute", 0.0) + record.cost_items.get("gpu", 0.0)
    return paid / billed * 3600 if billed and paid else None


@dataclass(frozen=True)
class MetricRow:
    """One configuration's figures for one time metric."""

    name: str  # the configuration row's name
    time: Spread | None
    relative_time: Ratio | None
    work_cost: Spread | None
    relative_work_cost: Ratio | None

    def to_json(self) -> dict[str, Any]:
        def part(value: Any) -> Any:
            return value.to_json() if value is not None else None

        return {"configuration": self.name, "time_s": part(self.time), "relative_time": part(self.relative_time),
                "work_cost_usd": part(self.work_cost), "relative_work_cost": part(self.relative_work_cost)}


@dataclass(frozen=True)
class MetricComparison:
    metric: str  # a metrics.json name, or OVERALL
    rows: tuple[MetricRow, ...]

    def row(self, name: str) -> MetricRow | None:
        return next((r for r in self.rows if r.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "rows": [r.to_json() for r in self.rows]}


def compare_metric(metric: str, runs: Mapping[str, Sequence[tuple[float | None, float | None]]],
                   base: str) -> MetricComparison:
    """`runs`: per configuration row, each run's (seconds of `metric`, per-second price)."""
    def times(name: str) -> list[float]:
        return [t for t, _ in runs[name] if t is not None]

    def costs(name: str) -> list[float]:
        return [t * p for t, p in runs[name] if t is not None and p is not None]

    rows = []
    for name in runs:
        rows.append(MetricRow(name, spread(times(name)), ratio_of_medians(times(name), times(base)),
                              spread(costs(name)), ratio_of_medians(costs(name), costs(base))))
    return MetricComparison(metric, tuple(rows))


def overall(comparisons: Sequence[MetricComparison],
            runs: Mapping[str, Sequence[Mapping[str, float]]], base: str) -> MetricComparison | None:
    """The geometric mean of each configuration's per-metric ratios; its interval from the runs'
    own geometric means (over the metrics each run wrote all of). None below two metrics."""
    metrics = [c.metric for c in comparisons]
    if len(metrics) < 2:
        return None

    def scores(name: str) -> list[float]:
        out = []
        for run in runs[name]:
            values = [run.get(m) for m in metrics]
            if all(v is not None and v > 0 for v in values):
                out.append(geomean(values))
        return out

    rows = []
    for name in runs:
        ratios = [c.row(name).relative_time for c in comparisons if c.row(name) is not None]
        values = [r.value for r in ratios if r is not None]
        interval = ratio_of_medians(scores(name), scores(base))
        if len(values) != len(metrics) or not all(v > 0 for v in values):
            rows.append(MetricRow(name, spread(scores(name)), None, None, None))
            continue
        value = geomean(values)
        ratio = Ratio(value, interval.low, interval.high, interval.confidence) if interval else Ratio(value)
        rows.append(MetricRow(name, spread(scores(name)), ratio, None, None))
    return MetricComparison(OVERALL, tuple(rows))


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


# --- warnings ------------------------------------------------------------------------------------


def outliers(values: Sequence[tuple[str, float]]) -> list[tuple[str, float, float]]:
    """(run id, value, how many times the median) of each run at `OUTLIER_RATIO` times its
    configuration's median or more, or at 1/`OUTLIER_RATIO` or less: on a ratio scale, because a
    run is as far off at 0.5x as at 2x, and a MAD rule over three runs flags a run at 0.9x beside
    two alike while a run at 0.12x beside two far apart passes. Under three runs the median cannot
    say which run is off (`disagreement` says they differ)."""
    numbers = [v for _, v in values]
    if len(numbers) < 3:
        return []
    center = statistics.median(numbers)
    if center <= 0:
        return []
    return [(run, v, v / center) for run, v in values
            if v / center >= OUTLIER_RATIO or v / center <= 1 / OUTLIER_RATIO]


def disagreement(values: Sequence[float]) -> float | None:
    """How many times the slower of exactly two runs took the faster, when that is `OUTLIER_RATIO`
    or more: neither is the outlier until a third run says which."""
    if len(values) != 2 or min(values) <= 0:
        return None
    factor = max(values) / min(values)
    return factor if factor >= OUTLIER_RATIO else None


def noisy(time: Spread | None) -> float | None:
    """The IQR as a share of the median when it exceeds NOISY_IQR (with at least 3 runs), else None."""
    if time is None or time.n < 3 or time.median <= 0:
        return None
    share = time.iqr / time.median
    return share if share > NOISY_IQR else None
