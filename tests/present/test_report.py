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
from spotcron.core.metrics import parse_metrics
from spotcron.core.runs import Attempt, RunRecord
from spotcron.core.spec import Benchmark
from spotcron.cost.prices import load_prices
from spotcron.present import exports
from spotcron.present.charts import chart_name, chart_pngs, frontier, relative_chart, write_charts
from spotcron.present.history import benchmark_history
from spotcron.present.report import benchmark_report
from tests.examples import copy_examples, example

T0 = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MACHINES = {"highcpu-16": ("n1-highcpu-16", None), "e2-std-4": ("e2-standard-4", None),
            "t4": ("n1-standard-8", "nvidia-tesla-t4 x1")}


def bench_run(variant: str, work_s: float, week: int = 0, *, state: str = "succeeded",
              preempted_first: bool = False, repeat: int | None = None, metrics: str | None = None,
              problem: str | None = None) -> RunRecord:
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
    run_id = f"{start:%Y%m%d-%H%M}-{variant}" + (f"-r{repeat}" if repeat else "")
    return RunRecord(job="dl-benchmark", run_id=run_id, variant=variant, repeat=repeat, state=state, created_at=start,
                     updated_at=start, tick=start, attempts=tuple(attempts),
                     results_prefix=layout.attempt_prefix("dl-benchmark", run_id, number),
                     metrics=parse_metrics(metrics.encode()) if metrics else None, metrics_problem=problem)


def trained(seconds: float, samples: int = 6400) -> str:
    """A metrics.json in the contract, as the example benchmark writes it."""
    return json.dumps({"work": {"value": samples, "unit": "samples"},
                       "metrics": {"train_seconds": {"value": seconds, "unit": "s"},
                                   "accuracy": {"value": 0.9, "unit": "1"}}})


@pytest.fixture(scope="module")
def table():
    return load_prices()


@pytest.fixture(scope="module")
def spec():
    """The example job, timed by the container's wall time."""
    spec = load_job_file(example("dl-benchmark"))
    return spec.model_copy(update={"benchmark": Benchmark(base="highcpu-16")})


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
    assert (base.time.q1, base.time.q3, base.time.n) == (1050, 1150, 3)
    assert (e2.runs, e2.other_runs, e2.median_seconds) == (2, 1, 3150)
    assert t4.machine == "n1-standard-8 + T4 x1, spot"
    assert base.machine == "n1-highcpu-16, spot"
    fns = 2 * (0.40 / 1e6 + 2.0 * table.functions.per_second)  # start_job + one job_done
    assert base.cost_per_run == pytest.approx(vm_cost(0.15595, 0, 1160, fns), rel=1e-6)
    assert t4.cost_per_run == pytest.approx(vm_cost(0.10448, 0.14, 380, fns), rel=1e-3)  # median of two runs
    assert base.relative_time.value == 1 and base.relative_cost.value == 1
    assert t4.relative_time.value == pytest.approx(320 / 1100)
    assert t4.relative_cost.value == pytest.approx(t4.cost_per_run / base.cost_per_run)
    # Every resampled t4 median (300..340) over every base median (1000..1200): far below 1, supported.
    assert 300 / 1200 <= t4.relative_time.low < t4.relative_time.high <= 340 / 1000
    assert t4.relative_time.supported is True
    # The preempted attempt's 600 s are part of that run's cost.
    preempted = (0.0588 * (600 + 3360) / 3600 + 30 * 0.04 * (600 + 3360) / (730 * 3600)
                 + 0.40 / 1e6 * 3 + 3 * 2.0 * table.functions.per_second)
    plain = vm_cost(0.0588, 0, 3060, fns)
    assert e2.cost_per_run == pytest.approx((preempted + plain) / 2, rel=1e-4)


def test_work_units_time_metric_and_metrics_problems(table):
    spec = load_job_file(example("dl-benchmark"))  # benchmark.time_metric: train_seconds
    runs = [bench_run("highcpu-16", 900 + 10 * i, 0, repeat=i, metrics=trained(800 + 10 * i)) for i in (1, 2, 3)]
    runs += [bench_run("t4", 200, 0, repeat=1, metrics=trained(100, samples=6400)),
             bench_run("t4", 220, 0, repeat=2, metrics=trained(120, samples=6400)),
             bench_run("t4", 210, 0, repeat=3, problem="results/metrics.json of attempt 1: work is 6400; ...")]
    result = benchmark_report("dl-benchmark", runs, table, "us-central1", spec=spec)
    assert result.time_basis == "train_seconds"
    base, t4 = result.row("highcpu-16"), result.row("t4")
    assert (base.median_seconds, base.work_unit) == (820, "samples")
    assert base.time_per_unit.median == pytest.approx(820 / 6400)
    assert base.throughput.median == pytest.approx(6400 / 820)
    assert base.cost_per_unit.median == pytest.approx(base.cost_per_run / 6400)
    # The run whose metrics.json broke the contract is measured for cost, not for time, and is listed.
    assert (t4.runs, t4.time.n, t4.cost.n, t4.median_seconds) == (3, 2, 3, 110)
    assert t4.metrics_problems == ((runs[-1].run_id, "results/metrics.json of attempt 1: work is 6400; ..."),)
    assert t4.metrics == {"accuracy": (0.9, "1"), "train_seconds": (110, "s")}
    assert t4.relative_time.value == pytest.approx(110 / 820)
    assert exports.problem_lines(result) == [f"t4/{runs[-1].run_id}: results/metrics.json of attempt 1: work is "
                                             f"6400; ..."]


def test_base_and_order_without_a_spec_come_from_the_records(table, spec, records):
    variant_spec = {v.variant: v.to_payload() for v in spec.model_copy(
        update={"benchmark": Benchmark(base="t4")}).configurations()}
    with_specs = [r.model_copy(update={"spec": variant_spec[r.variant]}) for r in records]
    result = benchmark_report("dl-benchmark", with_specs, table, "us-central1")
    assert result.base == "t4" and [r.variant for r in result.rows] == ["t4", "e2-std-4", "highcpu-16"]
    assert result.row("t4").machine == "n1-standard-8 + T4 x1, spot"
    assert benchmark_report("dl-benchmark", records, table, "us-central1").base == "e2-std-4"  # no setting: by name
    with pytest.raises(SpotcronError, match="no run records to report on"):
        benchmark_report("other", records, table, "us-central1")


def test_rich_table_markdown_csv_and_json(table, spec, records):
    import csv
    import io

    from rich.console import Console

    result = benchmark_report("dl-benchmark", records, table, "us-central1", spec=spec)
    console = Console(width=100, record=True)
    tables = exports.rich_tables(result)
    assert len(tables) == 3  # the comparison, what ran and the phases; no metrics, no metrics table
    console.print(tables[0])
    text = console.export_text()
    lines = text.splitlines()
    row = next(i for i, line in enumerate(lines) if line.lstrip().startswith("t4 "))
    # Median, spread (IQR/2 as a share of the median) and the interval under them: columns stay narrow.
    assert lines[row].split()[-5:] == ["2/2", "5m20s", "$0.0260", "0.29x", "0.51x"]
    assert lines[row + 1].split()[-4:] == ["±3%", "±3%", "(0.25-0.34)", "(0.45-0.59)"]
    assert "highcpu-16 *" in text and "1.00x base" in text and "18m20s" in text
    assert "1.16x ~" in text  # e2-std-4 costs more, but the spread does not support it
    assert "2/3" in text  # e2-std-4: two succeeded of three ended runs
    assert "~ = the interval includes 1.00x" in " ".join(text.split())
    assert max(len(line) for line in lines) <= 100

    md = exports.markdown(result)
    lines = md.splitlines()
    assert lines[2] == "| configuration | machine | runs | time | cost | rel. time | rel. cost |"
    assert lines[3] == "|:---|:---|---:|---:|---:|---:|---:|"
    assert lines[6] == ("| t4 | n1-standard-8 + T4 x1, spot | 2/2 | 5m20s ±3% | $0.0260 ±3% | 0.29x (0.25-0.34) | "
                        "0.51x (0.45-0.59) |")
    assert "| 1.16x \\~ (0.93-1.43) |" in lines[5]

    rows = list(csv.DictReader(io.StringIO(exports.csv_text(result))))
    assert [r["configuration"] for r in rows] == ["highcpu-16", "e2-std-4", "t4"]
    assert rows[0]["base"] == "True" and rows[2]["base"] == "False"
    assert float(rows[0]["time_s_median"]) == 1100 and float(rows[0]["time_s_iqr"]) == 100
    assert float(rows[2]["relative_time"]) == pytest.approx(0.2909, abs=1e-4)
    assert rows[2]["relative_time_supported"] == "True" and rows[2]["cost_per_unit_usd_median"] == ""

    data = json.loads(exports.json_text(result, charts=[]))
    assert data["base"] == "highcpu-16" and data["confidence"] == 0.95
    assert data["rows"][2]["relative_time"]["ratio"] == pytest.approx(0.2909, abs=1e-4)
    assert data["rows"][0]["time_s"] == {"n": 3, "median": 1100, "q1": 1050, "q3": 1150, "iqr": 100,
                                         "stdev": 100, "min": 1000, "max": 1200}
    assert exports.format_usd(0.0508) == "$0.0508" and exports.format_usd(12.345) == "$12.35"
    assert exports.format_usd(0.000219) == "$0.00022" and exports.format_usd(0) == "$0"
    assert exports.format_usd(None) == "-" and exports.format_seconds(2.345) == "2.35s"


def weekly(variant: str, seconds: list[float]) -> list[RunRecord]:
    return [bench_run(variant, s, week) for week, s in enumerate(seconds)]


def test_history_per_tick_flags_a_regression(table, spec):
    runs = weekly("highcpu-16", [1000, 1010, 990, 1005, 995, 1300]) + weekly("t4", [300, 310, 290, 305, 295, 300])
    result = benchmark_report("dl-benchmark", runs, table, "us-central1", spec=spec)
    history = benchmark_history(result, runs)
    cpu, e2, t4 = history.series
    assert [p.tick for p in cpu.points] == [f"{T0 + timedelta(weeks=w):%Y-%m-%d %H:%M}" for w in range(6)]
    assert [p.seconds for p in cpu.points] == [1000, 1010, 990, 1005, 995, 1300]
    assert cpu.time_band.flag == "higher" and cpu.cost_band.flag == "higher"
    assert cpu.flag_text() == "! slower, costlier"
    assert t4.time_band.flag is None and t4.flag_text() == "" and e2.points == ()
    assert [s.variant for s in history.flagged] == ["highcpu-16"]
    md = exports.history_markdown(history)
    assert "| highcpu-16 | 2026-12-28 03:00 | 1 | 21m40s |" in md and "! slower, costlier |" in md
    csv_lines = exports.history_csv(history).splitlines()
    assert csv_lines[0] == "configuration,tick,runs,time_s,cost_usd,time_flag,cost_flag,hardware,hardware_changed"
    assert csv_lines[6].startswith("highcpu-16,2026-12-28 03:00,1,1300.0,")
    assert csv_lines[6].endswith(",higher,higher,not recorded,False")
    assert json.loads(json.dumps(history.to_json()))["series"][0]["time_band"]["flag"] == "higher"


def test_the_history_caption_does_not_call_too_few_ticks_free_of_regressions(table, spec):
    from spotcron.present.charts import chart_captions

    def caption(runs: list[RunRecord]) -> str:
        result = benchmark_report("dl-benchmark", runs, table, "us-central1", spec=spec)
        return chart_captions(result, benchmark_history(result, runs))["dl-benchmark-history.png"]

    assert caption(weekly("highcpu-16", [1000, 1010])) == (
        "dl-benchmark: time and cost per tick; regressions: not judged yet (2 ticks; the latest is judged "
        "against at least 4 ticks before it)")
    steady = weekly("highcpu-16", [1000, 1010, 990, 1005, 995, 1000])
    assert caption(steady).endswith("; regressions: none")
    assert caption(steady[:-1] + weekly("highcpu-16", [0, 0, 0, 0, 0, 1300])[-1:]).endswith(
        "; regressions: highcpu-16 slower, costlier")


def test_repeats_of_a_tick_are_one_point_of_the_history(table, spec):
    runs = [bench_run("t4", s, 0, repeat=i) for i, s in enumerate([300, 320, 340], 1)]
    result = benchmark_report("dl-benchmark", runs, table, "us-central1", spec=spec)
    [point] = benchmark_history(result, runs).series[2].points
    assert (point.runs, point.seconds) == (3, 320)
    assert result.row("t4").runs == 3


def test_charts_are_pngs(table, spec, records, tmp_path):
    result = benchmark_report("dl-benchmark", records, table, "us-central1", spec=spec)
    history = benchmark_history(result, records)
    charts = chart_pngs(result, history)
    assert list(charts) == ["dl-benchmark-relative-time.png", "dl-benchmark-relative-cost.png",
                            "dl-benchmark-cost-vs-time.png", "dl-benchmark-phases.png", "dl-benchmark-history.png"]
    for png in charts.values():
        assert png.startswith(PNG_MAGIC) and len(png) > 5000
    assert relative_chart(result, "time") == charts[chart_name("dl-benchmark", "time")]  # deterministic
    paths = write_charts(result, tmp_path / "charts", history)
    assert [p.name for p in paths] == list(charts)
    empty = benchmark_report("dl-benchmark", [bench_run("t4", 0, state="failed")], table, "us-central1", spec=spec)
    assert chart_pngs(empty) == {}
    # t4 is both faster and cheaper than the others: alone on the frontier.
    assert [r.variant for r in frontier(list(result.rows))] == ["t4"]


def test_the_frontier_keeps_the_cheapest_for_each_speed():
    from spotcron.present.report import ConfigRow
    from spotcron.present.stats import spread

    def row(name, seconds, cost):
        return ConfigRow(name, "m", 1, 0, time=spread([seconds]), cost=spread([cost]))

    rows = [row("fast-dear", 100, 5.0), row("mid", 200, 2.0), row("slow-dearer", 300, 3.0), row("slow-cheap", 400, 1.0)]
    assert [r.variant for r in frontier(rows)] == ["fast-dear", "mid", "slow-cheap"]


def test_report_command(tmp_path, records, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("SPOTCRON_JOBS", "SPOTCRON_STACK", "SPOTCRON_PRICES"):
        monkeypatch.delenv(name, raising=False)
    bucket = tmp_path / "bucket"
    for rec in records:
        path = bucket / layout.run_record(rec.job, rec.run_id)
        path.parent.mkdir(parents=True)
        path.write_bytes(rec.to_json())
        if rec.state == "succeeded":  # records from before the run end checked metrics.json: checked now
            metrics = bucket / rec.results_prefix / "results" / "metrics.json"
            metrics.parent.mkdir(parents=True)
            metrics.write_text(trained(250 if rec.variant == "t4" else 1000))
    group = SpotcronGroup("spotcron")
    group.add_command(report_command)

    def run(*args):
        return CliRunner().invoke(group, ["report", "dl-benchmark", "--jobs", str(copy_examples(tmp_path / "jobs")), *args],
                                  terminal_width=200)

    result = run("--records", str(bucket), "--charts", str(tmp_path / "charts"), "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["base"] == "highcpu-16" and [r["variant"] for r in data["rows"]] == ["highcpu-16", "e2-std-4", "t4"]
    assert data["rows"][2]["metrics"] == {"accuracy": {"median": 0.9, "unit": "1"},
                                          "train_seconds": {"median": 250, "unit": "s"}}
    assert data["time_basis"] == "train_seconds" and data["rows"][2]["relative_time"]["ratio"] == 0.25
    assert data["rows"][2]["work_unit"] == "samples"
    assert [Path(p).name for p in data["charts"]] == ["dl-benchmark-relative-time.png",
                                                      "dl-benchmark-relative-cost.png",
                                                      "dl-benchmark-cost-vs-time.png", "dl-benchmark-phases.png",
                                                      "dl-benchmark-history.png"]
    assert run("--records", str(bucket), "--json").output == run("--records", str(bucket), "--format", "json").output
    result = run("--records", str(bucket))
    assert result.exit_code == 0, result.output
    assert "highcpu-16 *" in result.output and "accuracy" in result.output and "cost/1k samples" in result.output
    result = run("--records", str(bucket), "--format", "md")
    assert result.exit_code == 0 and result.output.startswith("**dl-benchmark**: per configuration, relative to")
    result = run("--records", str(bucket), "--format", "csv")
    assert result.exit_code == 0
    assert result.output.splitlines()[0].startswith("configuration,hardware_row,machine,hardware,base,runs,")
    assert len(result.output.splitlines()) == 4
    result = run("--records", str(bucket), "--format", "csv-runs")
    assert result.exit_code == 0 and result.output.splitlines()[0].startswith("configuration,hardware_row,run_id,")
    assert len(result.output.splitlines()) == 1 + 7  # every succeeded run
    result = run("--records", str(bucket), "--history", "--format", "csv")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].startswith("highcpu-16,2026-11-23 03:00,1,1000.0,0.055")
    result = run("--records", str(bucket), "--history")
    assert result.exit_code == 0 and "each configuration per tick" in result.output
    result = run("--records", str(bucket), "--format", "xml")
    assert result.exit_code == 2 and "'xml' is not one of 'table', 'md', 'csv', 'csv-runs', 'json'" in result.output
    result = run()  # no --records: the local bucket, and there is none here
    assert result.exit_code == 2 and "no local runs yet (.spotcron/bucket does not exist)" in result.output


def test_report_tables_in_a_pipe_never_break_a_word(tmp_path, records, monkeypatch):
    """A pipe (`| less`, a CI log, `make run`) gets the tables at their natural width: 80 columns
    would fold `configuration` into `configurat` + `ion`."""
    import contextlib

    from spotcron.cli._bucket import RunsContext
    from spotcron.testing.memory import MemoryBlobs

    monkeypatch.chdir(tmp_path)
    blobs = MemoryBlobs("spotcron-local")
    for rec in records:
        blobs.write(layout.run_record(rec.job, rec.run_id), rec.to_json())
        if rec.state == "succeeded":
            # as the example benchmark writes it: a time per task besides the training time
            metrics = json.loads(trained(250 if rec.variant == "t4" else 1000))
            metrics["metrics"].update({f"{task}_seconds": {"value": 80.5, "unit": "s"}
                                       for task in ("mlp", "cnn", "lstm", "transformer")})
            blobs.write(rec.results_prefix + "results/metrics.json", json.dumps(metrics).encode())
    group = SpotcronGroup("spotcron")
    group.add_command(report_command)
    context = RunsContext(open_blobs=lambda bucket, state_dir: contextlib.nullcontext(blobs))
    jobs = copy_examples(tmp_path / "jobs")

    def words(*args: str, columns: int) -> set[str]:
        result = CliRunner().invoke(group, ["report", "dl-benchmark", "--jobs", str(jobs), *args], obj=context,
                                    env={"COLUMNS": str(columns)})
        assert result.exit_code == 0, result.output
        return {word for word in result.output.split() if word.strip("─")}

    for args in ((), ("--history",)):
        narrow, wide = words(*args, columns=80), words(*args, columns=1000)
        assert "configuration" in narrow and narrow == wide, sorted(narrow ^ wide)


def test_report_reads_the_bucket_by_default(records, tmp_path):
    import contextlib

    from spotcron.cli._bucket import RunsContext
    from spotcron.testing.memory import MemoryBlobs

    blobs = MemoryBlobs("spotcron-local")
    for rec in records:
        if rec.variant == "t4" and rec.state == "succeeded":
            rec = rec.model_copy(update={"metrics": parse_metrics(trained(250).encode())})
        blobs.write(layout.run_record(rec.job, rec.run_id), rec.to_json())
    group = SpotcronGroup("spotcron")
    group.add_command(report_command)
    result = CliRunner().invoke(group, ["report", "dl-benchmark", "--jobs", str(copy_examples(tmp_path / "jobs")), "--json"],
                                obj=RunsContext(open_blobs=lambda bucket, state_dir: contextlib.nullcontext(blobs)))
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [r["variant"] for r in data["rows"]] == ["highcpu-16", "e2-std-4", "t4"]
    assert data["rows"][2]["metrics"]["train_seconds"] == {"median": 250, "unit": "s"}


def test_an_unknown_time_metric_is_an_error_that_lists_the_metrics(records, tmp_path):
    import contextlib

    from spotcron.cli._bucket import RunsContext
    from spotcron.testing.memory import MemoryBlobs

    blobs = MemoryBlobs("spotcron-local")
    for rec in records:
        blobs.write(layout.run_record(rec.job, rec.run_id), rec.to_json())
        if rec.variant == "t4" and rec.state == "succeeded":
            blobs.write(rec.results_prefix + "results/metrics.json", trained(250).encode())
    group = SpotcronGroup("spotcron")
    group.add_command(report_command)
    context = RunsContext(open_blobs=lambda bucket, state_dir: contextlib.nullcontext(blobs))
    # These runs wrote train_seconds and accuracy only: the example's per-task comparisons are left out here.
    job_text = "".join(line for line in example("dl-benchmark").read_text().splitlines(keepends=True)
                       if not line.startswith(("  compare:", "  overall:")))
    jobs = copy_examples(tmp_path / "jobs")  # with the folder its images build from
    job_file = jobs / "dl-benchmark.yaml"

    def run(time_metric):
        job_file.write_text(job_text.replace("time_metric: train_seconds", f"time_metric: {time_metric}"))
        return CliRunner().invoke(group, ["report", "dl-benchmark", "--jobs", str(jobs)], obj=context)

    result = run("nope")
    assert result.exit_code == 2
    assert result.output.strip() == (f"error: {job_file}: benchmark.time_metric 'nope': no run of dl-benchmark has "
                                     "that metric in its metrics.json; metrics there: accuracy, train_seconds")
    result = run("train_second")
    assert result.exit_code == 2 and "did you mean 'train_seconds'?" in result.output
    assert run("train_seconds").exit_code == 0
    job_file.write_text(job_text.replace("  time_metric: train_seconds", "  time_metric: train_seconds\n"
                                         "  compare: [train_seconds, acuracy]"))
    typo = CliRunner().invoke(group, ["report", "dl-benchmark", "--jobs", str(jobs), "--format", "md"],
                              obj=context)
    assert typo.exit_code == 0  # a typo in compare is said, not left as a blank comparison
    assert "benchmark.compare 'acuracy': no run wrote it in a unit of time" in typo.output
    assert "did you mean 'accuracy'?" in typo.output
    for name in [n for n in blobs.list("runs/") if n.endswith("metrics.json")]:
        blobs.delete(name)
    result = run("train_seconds")
    assert result.exit_code == 2
    assert (f"error: {job_file}: benchmark.time_metric 'train_seconds': no run of dl-benchmark wrote a usable "
            "metrics.json; remove the setting to use the container time, or see the runs' metrics problems "
            "(spotcron runs --json)") in result.output


def test_each_manual_request_is_a_tick_of_its_own(table, spec):
    runs = []
    for nonce, second, seconds in (("ab12", 5, 300), ("cd34", 40, 330)):  # two "run now"s in one minute
        for repeat in (1, 2):
            run = bench_run("t4", seconds + repeat, 0, repeat=repeat)
            runs.append(run.model_copy(update={"tick": None, "trigger": "manual",
                                               "run_id": f"m20261123-0300{second:02d}-{nonce}-t4-r{repeat}"}))
    result = benchmark_report("dl-benchmark", runs, table, "us-central1", spec=spec, pool_rounds=True)
    points = benchmark_history(result, runs).series[2].points
    assert [(p.tick, p.runs, p.seconds) for p in points] == [
        ("2026-11-23 03:00:05 manual ab12", 2, 301.5), ("2026-11-23 03:00:40 manual cd34", 2, 331.5)]


def test_figures_print_without_an_exponent_in_the_range_people_read():
    """Before: a throughput of 14,800 samples/s printed as `1.48e+04 samples/s` in `make run`'s report."""
    from spotcron.present.exports import significant

    assert [significant(v) for v in (14800.3, 1470.2, 860.0, 58.14, 0.05723, 0.0)] == [
        "14,800", "1,470", "860", "58.14", "0.05723", "0"]
    assert significant(3.14159e20) == "3.142e+20" and significant(1e-7) == "1e-07"  # far out: the exponent
