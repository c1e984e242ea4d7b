"""The metrics contract: what a job may write to /results/metrics.json, checked when its run ends.

    {
      "work":    {"value": 6400, "unit": "samples"},
      "metrics": {"train_seconds": {"value": 41.2, "unit": "s"},
                  "accuracy":      {"value": 0.91, "unit": "1"}}
    }

`work` is how much the run processed (steps, samples, items): the report divides time and cost
by it. `metrics` are named values, each with its unit. Both are optional, but a file that has
neither holds nothing spotcron can use and is reported as such. Other top-level keys are the
job's own (details, per-task figures) and are left alone.

Pure: bytes in, a `RunMetrics` or a `MetricsProblem` naming the field, the value and the fix.
The run's record keeps whichever came out, so a malformed file is never silently dropped.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from spotcron.core.errors import SpotcronError
from spotcron.core.jobdata import JobDataProblem, load_job_json

METRICS_FILE = "metrics.json"  # inside the results folder: /results/metrics.json
MAX_BYTES = 1 << 20
MAX_METRICS = 64
UNIT_MAX = 32
MAX_LISTED = 8  # problems named one by one; a file with more says how many others there are
# \Z, not $: `$` also matches before a final line break, and "acc\n" is no metric name.
_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_.-]{0,63}\Z")
EXAMPLE = '{"work": {"value": 6400, "unit": "samples"}, "metrics": {"train_seconds": {"value": 41.2, "unit": "s"}}}'
# Units a time metric may be written in, as seconds.
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "min": 60.0, "h": 3600.0}


class MetricsProblem(SpotcronError):
    """metrics.json breaks the contract; the message names the field, the value and the fix, a line
    per problem when the file has several (`problems` lists them)."""

    def __init__(self, *problems: str):
        super().__init__(PROBLEM_SEPARATOR.join(problems))
        self.problems = problems


# A run record keeps a file's problems as one text, a line each (core/runs.py `metrics_problem`).
PROBLEM_SEPARATOR = "\n"


def problem_list(text: str | None) -> list[str]:
    """The problems of a record's `metrics_problem`, one each."""
    return [line for line in (text or "").split(PROBLEM_SEPARATOR) if line.strip()]


class Measure(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    value: float
    unit: str


class RunMetrics(BaseModel):
    """The checked contents of one run's metrics.json, as its run record keeps them."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    work: Measure | None = None
    metrics: dict[str, Measure] = {}

    def seconds(self, name: str) -> float | None:
        """Metric `name` in seconds, when it exists and has a time unit."""
        measure = self.metrics.get(name)
        if measure is None or measure.unit not in TIME_UNITS:
            return None
        seconds = measure.value * TIME_UNITS[measure.unit]
        return seconds if math.isfinite(seconds) else None  # 1e305 h is no time


def parse_metrics(data: bytes, where: str = f"results/{METRICS_FILE}") -> RunMetrics:
    """The file's work and metrics; MetricsProblem naming every break of the contract."""
    try:
        # A job wrote it: bounded in size, depth and digits (core/jobdata.py), never a crash.
        doc = load_job_json(data, where, max_bytes=MAX_BYTES, example=EXAMPLE)
    except JobDataProblem as problem:
        raise MetricsProblem(str(problem)) from None
    if not isinstance(doc, dict):
        raise MetricsProblem(f"{where}: a JSON {type(doc).__name__}, not an object; write e.g. {EXAMPLE}")
    if "work" not in doc and "metrics" not in doc:
        raise MetricsProblem(f"{where}: no \"work\" and no \"metrics\"; spotcron reads only those, e.g. {EXAMPLE}")
    # Every problem of the file is named at once, so one fix makes it right.
    problems: list[str] = []
    work = _checked(problems, doc["work"], f"{where}: work", positive=True) if "work" in doc else None
    metrics = doc.get("metrics", {})
    checked = {}
    if not isinstance(metrics, dict):
        problems.append(f"{where}: metrics is {_shown(metrics)}; write an object of named values, "
                        f"e.g. {{\"train_seconds\": {{\"value\": 41.2, \"unit\": \"s\"}}}}")
    elif len(metrics) > MAX_METRICS:
        problems.append(f"{where}: metrics has {len(metrics)} entries, more than {MAX_METRICS}; keep the "
                        f"ones to compare and put the rest in another results file")
    else:
        for name, value in metrics.items():
            if not _NAME.match(name):
                problems.append(f"{where}: metrics name {_shown_name(name)} is not allowed; use letters, digits, "
                                f"_ . - (at most 64, starting with a letter or _)")
                continue
            measure = _checked(problems, value, f"{where}: metrics.{name}", positive=False)
            if measure is not None:
                checked[name] = measure
    if len(problems) > MAX_LISTED:
        problems[MAX_LISTED:] = [f"{where}: and {len(problems) - MAX_LISTED} more problems like these"]
    if problems:
        raise MetricsProblem(*problems)
    return RunMetrics(work=work, metrics=checked)


def _checked(problems: list[str], value: Any, where: str, *, positive: bool) -> Measure | None:
    try:
        return _measure(value, where, positive=positive)
    except MetricsProblem as problem:
        problems.extend(problem.problems)
        return None


def check_time_metric(metrics: RunMetrics, name: str, where: str = f"results/{METRICS_FILE}") -> None:
    """A job whose benchmark.time_metric is `name` must write it, in a unit of time."""
    measure = metrics.metrics.get(name)
    if measure is None:
        have = ", ".join(sorted(metrics.metrics)) or "none"
        raise MetricsProblem(f"{where}: no metrics.{name}, which the job's benchmark.time_metric names; "
                             f"metrics there: {have}")
    if measure.unit not in TIME_UNITS:
        raise MetricsProblem(f"{where}: metrics.{name}.unit is {measure.unit!r}, but benchmark.time_metric needs "
                             f"a time: one of {', '.join(TIME_UNITS)}")


def _measure(value: Any, where: str, *, positive: bool) -> Measure:
    if not isinstance(value, dict):
        raise MetricsProblem(f"{where} is {_shown(value)}; write {{\"value\": NUMBER, \"unit\": \"...\"}}")
    problems = []
    number = value.get("value")
    if isinstance(number, bool) or not isinstance(number, int | float) or not math.isfinite(number):
        problems.append(f"{where}.value is {_shown(number)}; write a finite number")
    elif positive and number <= 0:
        problems.append(f"{where}.value is {number}; the work done must be more than 0 (steps, samples, "
                        f"items processed)")
    unit = value.get("unit")
    # Printable only: a unit is shown in tables and Markdown, where a line break would start lines of its own.
    if not isinstance(unit, str) or not unit.strip() or len(unit) > UNIT_MAX or not unit.isprintable():
        problems.append(f"{where}.unit is {_shown(unit)}; name the unit in at most {UNIT_MAX} printable "
                        f"characters, e.g. \"s\", \"samples\", \"1\" for a ratio")
    if problems:
        raise MetricsProblem(*problems)
    return Measure(value=float(number), unit=unit.strip())


def _shown_name(name: str) -> str:
    """A name a job wrote, as a message quotes it: at most 40 characters of it."""
    return repr(name) if len(name) <= 40 else repr(name[:39]) + f"… ({len(name)} characters)"


def _shown(value: Any) -> str:
    if value is None:
        return "missing"
    text = json.dumps(value)  # NaN and Infinity as JSON writes them
    return text if len(text) <= 40 else text[:39] + "…"
