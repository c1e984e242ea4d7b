"""What the control plane reads of what a job wrote: its metrics.json and its attempt's manifest.

Read once, when the run ends: the record then carries the work figure and the named metrics (or
the reason they are unusable), so reports and the page read records only.

A job controls these objects (its container writes the results; one that reaches the metadata
server can rewrite its attempt's manifest), so each is read with a ranged read of its cap plus
one byte, never whole, and parsed by core/jobdata.py; whatever is wrong becomes a message on the
run, never an exception that stops job_done or the sweep.
"""

from __future__ import annotations

from typing import Any

from spotcron.core import layout
from spotcron.core.errors import EncodedObject
from spotcron.core.hardware import MAX_BYTES as HARDWARE_MAX_BYTES
from spotcron.core.hardware import HardwareProblem, parse_hardware
from spotcron.core.jobdata import MANIFEST_MAX_BYTES, JobDataProblem, load_job_json, problem_text
from spotcron.core.metrics import MAX_BYTES, METRICS_FILE, MetricsProblem, check_time_metric, parse_metrics
from spotcron.core.spec import JobSpec
from spotcron.engine.deps import Deps
from spotcron.engine.ports import Blobs


def read_capped(blobs: Blobs, name: str, cap: int, where: str) -> bytes | None:
    """The object's bytes, None when it does not exist; JobDataProblem when it is bigger than `cap`
    or stored compressed.

    One ranged read of cap + 1 stored bytes: memory stays that size whatever the object holds
    (the Blobs port never inflates a gzip- or deflate-encoded object; it refuses it)."""
    try:
        data = blobs.read_range(name, 0, cap + 1)
    except EncodedObject:
        raise JobDataProblem(f"{where}: stored compressed (with a Content-Encoding); ignored (upload it "
                             f"uncompressed)") from None
    if data is not None and len(data) > cap:
        raise JobDataProblem(f"{where}: more than the {cap} allowed bytes; ignored (keep bulky figures in "
                             f"another results file)")
    return data


def metrics_changes(deps: Deps, job: str, run_id: str, attempt: int, spec: JobSpec) -> dict[str, Any]:
    """Record fields for what the ended attempt left: its metrics.json and its hardware.json."""
    return {**_metrics_fields(deps, job, run_id, attempt, spec), **hardware_changes(deps, job, run_id, attempt)}


def _metrics_fields(deps: Deps, job: str, run_id: str, attempt: int, spec: JobSpec) -> dict[str, Any]:
    """`metrics`, or `metrics_problem`, or none.

    No file is fine for a job that does not time itself by a metric; every other problem is
    kept in the record, never dropped.
    """
    name = layout.results_prefix(job, run_id, attempt) + METRICS_FILE
    where = f"results/{METRICS_FILE} of attempt {attempt}"
    try:
        data = read_capped(deps.blobs, name, MAX_BYTES, where)
        if data is None:
            if spec.benchmark.time_metric is not None:
                raise MetricsProblem(f"{where}: missing; the job's benchmark.time_metric "
                                     f"{spec.benchmark.time_metric!r} needs it")
            return {}
        metrics = parse_metrics(data, where)
        if spec.benchmark.time_metric is not None:
            check_time_metric(metrics, spec.benchmark.time_metric, where)
    except (MetricsProblem, JobDataProblem) as problem:
        return {"metrics_problem": problem_text(problem)}
    return {"metrics": metrics}


def hardware_changes(deps: Deps, job: str, run_id: str, attempt: int) -> dict[str, Any]:
    """Record fields for the attempt's hardware.json (what the runner measured): `hardware`,
    `hardware_problem`, or none when the runner wrote none (an older runner)."""
    where = f"hardware.json of attempt {attempt}"
    try:
        data = read_capped(deps.blobs, layout.hardware(job, run_id, attempt), HARDWARE_MAX_BYTES, where)
        if data is None:
            return {}
        return {"hardware": parse_hardware(data, where)}
    except (HardwareProblem, JobDataProblem) as problem:
        return {"hardware_problem": problem_text(problem)}


def manifest_present(deps: Deps, job: str, run_id: str, attempt: int) -> bool:
    """Whether the attempt's manifest exists: one byte read, whatever its size (or how it is stored:
    a compressed one exists, and reading it later says what is wrong with it)."""
    try:
        return deps.blobs.read_range(layout.manifest(job, run_id, attempt), 0, 1) is not None
    except EncodedObject:
        return True


def manifest_document(deps: Deps, job: str, run_id: str, attempt: int) -> tuple[dict | None, str | None]:
    """(the manifest as an object, None), (None, None) when there is none, or (None, the problem)."""
    where = f"manifest.json of attempt {attempt}"
    try:
        data = read_capped(deps.blobs, layout.manifest(job, run_id, attempt), MANIFEST_MAX_BYTES, where)
        if data is None:
            return None, None
        document = load_job_json(data, where, max_bytes=MANIFEST_MAX_BYTES)
    except JobDataProblem as problem:
        return None, problem_text(problem)
    if not isinstance(document, dict):
        return None, f"{where}: not a JSON object; ignored"
    return document, None
