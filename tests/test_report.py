"""Benchmark reports: time and cost per matrix entry relative to a base, charts, `spotcron report`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from spotcron.cli import SpotcronGroup
from spotcron.cli.report import report as report_command
from spotcron.core import layout
from spotcron.core.errors import SpotcronError
from spotcron.core.loader import load_job_file
from spotcron.core.runs import Attempt, RunRecord
from spotcron.cost.prices import load_prices
from spotcron.present.charts import chart_name, chart_pngs, relative_chart, write_charts
from spotcron.present.report import benchmark_report, format_ratio, format_usd, rich_tables

ROOT = Path(__file__).resolve().parents[1]
T0 = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MACHINES = {"highcpu-16": ("n1-highcpu-16", None), "e2-std-4": ("e2-standard-4", None),
            "t4": ("n1-standard-8", "nvidia-tesla-t4 x1")}


def bench_run(variant: str, work_s: float, week: int = 0, *, state: str = "succeeded",
              preempted_first: bool = False) -> RunRecord:
    """One dl-benchmark run: the VM lives 60 s longer than the container (boot, pull, upload)."""
    machine, gpu = MACHINES[variant]
    start = T0 + timedelta(weeks=week)
    attempts = []
    if preempted_first:
        attempts.append(Attempt(number=1, vm_name="a1", machine_type=machine, gpu=gpu, disk_gb=30, created_at=start,
                                deleted_at=start + timedelta(seconds=600), outcome="preempted"))
    number = len(attempts) + 1
    created = start + timedelta(seconds=700 if preempted_first else 0)
    attempts.append(Attempt(number=number, vm_name=f"a{number}", machine_type=machine, gpu=gpu, disk_gb=30,
                            created_at=created, started_at=created + timedelta(seconds=40),
                            finished_at=created + timedelta(seconds=40 + work_s),
                            deleted_at=created + timedelta(seconds=60 + work_s), outcome="exited", exit_code=0))
    run_id = f"{start:%Y%m%d-%H%M}-{variant}"
    return RunRecord(job="dl-benchmark", run_id=run_id, variant=variant, state=state, created_at=start,
                     updated_at=start, attempts=tuple(attempts),
                     results_prefix=layout.attempt_prefix("dl-benchmark", run_id, number))


@pytest.fixture(scope="module")
def table():
    return load_prices()


@pytest.fixture(scope="module")
def spec():
    return load_job_file(ROOT / "jobs" / "dl-benchmark.yaml")


@pytest.fixture(scope="module")
def records():
    return [
        bench_run("highcpu-16", 1200, 0), bench_run("highcpu-16", 1000, 1), bench_run("highcpu-16", 1100, 2),
        bench_run("e2-std-4", 3000, 0), bench_run("e2-std-4", 3300, 1, preempted_first=True),
        bench_run("e2-std-4", 0, 2, state="failed"),
        bench_run("t4", 300, 0), bench_run("t4", 340, 1),
    ]


def vm_cost(machine_hourly: float, gpu_hourly: float, seconds: float, fns: float) -> float:
    return (machine_hourly + gpu_hourly) * max(seconds, 60) / 3600 + 30 * 0.04 * seconds / (730 * 3600) + fns


def test_rows_follow_the_matrix_and_compare_with_the_base(table, spec, records):
    result = benchmark_report("dl-benchmark", records, table, "us-central1", spec=spec)
    assert [r.variant for r in result.rows] == ["highcpu-16", "e2-std-4", "t4"]
    assert result.base == "highcpu-16" and result.time_basis == "container time"
    base, e2, t4 = result.rows
    assert (base.runs, base.other_runs, base.median_seconds) == (3, 0, 1100)
    assert (e2.runs, e2.other_runs, e2.median_seconds) == (2, 1, 3150)
    assert t4.machine == "n1-standard-8 + T4 x1, spot"
    assert base.machine == "n1-highcpu-16, spot"
    fns = 2 * (0.40 / 1e6 + 2.0 * table.functions.per_second)  # start_job + one job_done
    assert base.cost_per_run == pytest.approx(vm_cost(0.15595, 0, 1160, fns), rel=1e-6)
    assert t4.cost_per_run == pytest.approx(vm_cost(0.10448, 0.14, 380, fns), rel=1e-3)  # median of two runs
    assert base.relative_time == 1 and base.relative_cost == 1
    assert t4.relative_time == pytest.approx(320 / 1100)
    assert t4.relative_cost == pytest.approx(t4.cost_per_run / base.cost_per_run)
    # The preempted attempt's 600 s are part of that run's cost.
    preempted = (0.0588 * (600 + 3360) / 3600 + 30 * 0.04 * (600 + 3360) / (730 * 3600)
                 + 0.40 / 1e6 * 3 + 3 * 2.0 * table.functions.per_second)
    plain = vm_cost(0.0588, 0, 3060, fns)
    assert e2.cost_per_run == pytest.approx((preempted + plain) / 2, rel=1e-4)


def test_another_base_and_metrics(table, spec, records):
    metrics = {"t4": [{"train_seconds": 200, "accuracy": 0.91, "note": "x"}, {"train_seconds": 220, "accuracy": 0.93}],
               "highcpu-16": [{"train_seconds": 1000, "accuracy": 0.92}]}
    result = benchmark_report("dl-benchmark", records, table, "us-central1", spec=spec, base="t4",
                              metrics=metrics, time_metric="train_seconds")
    assert result.base == "t4" and result.time_basis == "train_seconds"
    assert result.row("t4").median_seconds == 210
    assert result.row("t4").metrics == {"accuracy": 0.92, "train_seconds": 210}
    assert result.row("highcpu-16").relative_time == pytest.approx(1000 / 210)
    assert result.row("e2-std-4").median_seconds is None and result.row("e2-std-4").relative_time is None


def test_unknown_base_and_no_records(table, spec, records):
    with pytest.raises(SpotcronError) as err:
        benchmark_report("dl-benchmark", records, table, "us-central1", spec=spec, base="k80")
    assert str(err.value) == ("job 'dl-benchmark' has no configuration 'k80' for --base; "
                              "choose one of highcpu-16, e2-std-4, t4")
    with pytest.raises(SpotcronError, match="no run records to report on"):
        benchmark_report("other", records, table, "us-central1")


def test_without_a_spec_rows_come_from_the_records(table, records):
    result = benchmark_report("dl-benchmark", records, table, "us-central1")
    assert [r.variant for r in result.rows] == ["e2-std-4", "highcpu-16", "t4"]
    assert result.row("t4").machine == "n1-standard-8 + T4 x1, spot"


def test_rich_table_and_json(table, spec, records):
    from rich.console import Console

    result = benchmark_report("dl-benchmark", records, table, "us-central1", spec=spec)
    console = Console(width=80, record=True)
    tables = rich_tables(result)
    assert len(tables) == 1  # no metrics, no metrics table
    for table_ in tables:
        console.print(table_)
    text = console.export_text()
    assert "highcpu-16 *" in text and "1.00x" in text and "0.29x" in text and "18m20s" in text
    assert "2/3" in text  # e2-std-4: two succeeded of three ended runs
    assert "n1-standard-8 + T4 x1," in text and "$0.0508" in text  # figures never fold at 80 columns
    data = result.to_json()
    assert data["base"] == "highcpu-16" and data["rows"][2]["relative_time"] == pytest.approx(0.2909, abs=1e-4)
    assert format_usd(0.0508) == "$0.0508" and format_usd(12.345) == "$12.35" and format_usd(None) == "-"
    assert format_usd(0.000219) == "$0.00022" and format_usd(0) == "$0"
    assert format_ratio(0.5) == "0.50x"


def test_charts_are_pngs_per_metric(table, spec, records, tmp_path):
    result = benchmark_report("dl-benchmark", records, table, "us-central1", spec=spec)
    charts = chart_pngs(result)
    assert set(charts) == {"dl-benchmark-relative-time.png", "dl-benchmark-relative-cost.png"}
    for png in charts.values():
        assert png.startswith(PNG_MAGIC) and len(png) > 5000
    assert relative_chart(result, "time") == charts[chart_name("dl-benchmark", "time")]  # deterministic
    paths = write_charts(result, tmp_path / "charts")
    assert sorted(p.name for p in paths) == sorted(charts)
    empty = benchmark_report("dl-benchmark", [bench_run("t4", 0, state="failed")], table, "us-central1", spec=spec)
    assert chart_pngs(empty) == {}


def test_report_command(tmp_path, records, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("SPOTCRON_JOBS", "SPOTCRON_STACK", "SPOTCRON_PRICES"):
        monkeypatch.delenv(name, raising=False)
    bucket = tmp_path / "bucket"
    for rec in records:
        path = bucket / layout.run_record(rec.job, rec.run_id)
        path.parent.mkdir(parents=True)
        path.write_bytes(rec.to_json())
        if rec.state == "succeeded":  # the job times runs by metrics.json's total_seconds
            metrics = bucket / rec.results_prefix / "results" / "metrics.json"
            metrics.parent.mkdir(parents=True)
            seconds = 250 if rec.variant == "t4" else 1000
            metrics.write_text(json.dumps({"total_seconds": seconds, "accuracy": 0.9}))
    group = SpotcronGroup("spotcron")
    group.add_command(report_command)

    def run(*args):
        return CliRunner().invoke(group, ["report", "dl-benchmark", "--jobs", str(ROOT / "jobs"), *args],
                                  terminal_width=200)

    result = run("--history", str(bucket), "--charts", str(tmp_path / "charts"), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["base"] == "highcpu-16" and [r["variant"] for r in data["rows"]] == ["highcpu-16", "e2-std-4", "t4"]
    assert data["rows"][2]["metrics"] == {"accuracy": 0.9, "total_seconds": 250}
    assert data["time_basis"] == "total_seconds" and data["rows"][2]["relative_time"] == 0.25
    assert sorted(Path(p).name for p in data["charts"]) == ["dl-benchmark-relative-cost.png",
                                                            "dl-benchmark-relative-time.png"]
    result = run("--history", str(bucket))
    assert result.exit_code == 0, result.output
    assert "highcpu-16 *" in result.output and "accuracy" in result.output
    result = run()  # no --history: the local bucket, and there is none here
    assert result.exit_code == 2 and "no local runs yet (.spotcron/bucket does not exist)" in result.output


def test_report_reads_the_bucket_by_default(records):
    import contextlib

    from spotcron.cli._bucket import RunsContext
    from spotcron.testing.memory import MemoryBlobs

    blobs = MemoryBlobs("spotcron-local")
    for rec in records:
        blobs.write(layout.run_record(rec.job, rec.run_id), rec.to_json())
        if rec.variant == "t4" and rec.state == "succeeded":
            blobs.write(rec.results_prefix + "results/metrics.json",
                        json.dumps({"train_seconds": 250, "total_seconds": 260}).encode())
    group = SpotcronGroup("spotcron")
    group.add_command(report_command)
    result = CliRunner().invoke(group, ["report", "dl-benchmark", "--jobs", str(ROOT / "jobs"), "--json"],
                                obj=RunsContext(open_blobs=lambda bucket, state_dir: contextlib.nullcontext(blobs)))
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [r["variant"] for r in data["rows"]] == ["highcpu-16", "e2-std-4", "t4"]
    assert data["rows"][2]["metrics"] == {"total_seconds": 260, "train_seconds": 250}


def test_an_unknown_time_metric_is_an_error_that_lists_the_metrics(records, tmp_path):
    import contextlib

    from spotcron.cli._bucket import RunsContext
    from spotcron.testing.memory import MemoryBlobs

    blobs = MemoryBlobs("spotcron-local")
    for rec in records:
        blobs.write(layout.run_record(rec.job, rec.run_id), rec.to_json())
        if rec.variant == "t4" and rec.state == "succeeded":
            blobs.write(rec.results_prefix + "results/metrics.json",
                        json.dumps({"train_seconds": 250, "accuracy": 0.9, "note": "text"}).encode())
    group = SpotcronGroup("spotcron")
    group.add_command(report_command)
    context = RunsContext(open_blobs=lambda bucket, state_dir: contextlib.nullcontext(blobs))

    job_text = (ROOT / "jobs" / "dl-benchmark.yaml").read_text()
    job_file = tmp_path / "dl-benchmark.yaml"

    def run(time_metric):
        job_file.write_text(job_text.replace("time_metric: total_seconds", f"time_metric: {time_metric}"))
        return CliRunner().invoke(group, ["report", "dl-benchmark", "--jobs", str(tmp_path)], obj=context)

    result = run("nope")
    assert result.exit_code == 2
    assert result.output.strip() == (f"error: {job_file}: benchmark.time_metric 'nope': no run of dl-benchmark has "
                                     "that number in its metrics.json; numbers there: accuracy, train_seconds")
    result = run("train_second")
    assert result.exit_code == 2 and "did you mean 'train_seconds'?" in result.output
    assert run("train_seconds").exit_code == 0
    for name in [n for n in blobs.list("runs/") if n.endswith("metrics.json")]:
        blobs.delete(name)
    result = run("train_seconds")
    assert result.exit_code == 2
    assert (f"error: {job_file}: benchmark.time_metric 'train_seconds': no run of dl-benchmark wrote a metrics.json; "
            "remove the setting to use the container time") in result.output
