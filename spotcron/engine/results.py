"""What the run end reads of an attempt's results: its metrics.json, checked against the contract.

Read once, when the run ends, by the control plane: the record then carries the work figure and
the named metrics (or the reason they are unusable), so reports and the page read records only.
"""

from __future__ import annotations

from typing import Any

from spotcron.core import layout
from spotcron.core.metrics import METRICS_FILE, MetricsProblem, check_time_metric, parse_metrics
from spotcron.core.spec import JobSpec
from spotcron.engine.deps import Deps


def metrics_changes(deps: Deps, job: str, run_id: str, attempt: int, spec: JobSpec) -> dict[str, Any]:
    """Record fields for the attempt's metrics.json: `metrics`, or `metrics_problem`, or none.

    No file is fine for a job that does not time itself by a metric; every other problem is
    kept in the record, never dropped.
    """
    name = layout.results_prefix(job, run_id, attempt) + METRICS_FILE
    where = f"results/{METRICS_FILE} of attempt {attempt}"
    blob = deps.blobs.read(name)
    try:
        if blob is None:
            if spec.benchmark.time_metric is not None:
                raise MetricsProblem(f"{where}: missing; the job's benchmark.time_metric "
                                     f"{spec.benchmark.time_metric!r} needs it")
            return {}
        metrics = parse_metrics(blob.data, where)
        if spec.benchmark.time_metric is not None:
            check_time_metric(metrics, spec.benchmark.time_metric, where)
    except MetricsProblem as problem:
        return {"metrics_problem": str(problem)}
    return {"metrics": metrics}
