"""What a benchmarker publishes from a report: a comparison per task, cost that names its basis
beside the articles' "measured time x price", the phases of a run, warnings about outliers, noise
and a busy host, intervals whose stated confidence is the one they have, rounds that are not
pooled when they disagree, and local reports that never pass a laptop's figures off as a machine
type's."""

from __future__ import annotations

import csv
import io
import json
import math
from datetime import UTC, datetime, timedelta

import pytest

from spotcron.core.errors import SpotcronError
from spotcron.core.hardware import Hardware
from spotcron.core.metrics import parse_metrics
from spotcron.core.runs import Attempt, RunRecord
from spotcron.core.spec import JobSpec
from spotcron.cost.prices import load_prices
from spotcron.present import exports
from spotcron.present.charts import chart_captions, chart_pngs, chart_title
from spotcron.present.report import benchmark_report, verdict

T0 = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
MACHINES = {"base": "n1-highcpu-16", "e2": "e2-standard-4"}
CLOUD = {name: Hardware(machine_type=machine, cpu_model="Intel Xeon", cpus=4, memory_mib=16000)
         for name, machine in MACHINES.items()}
LAPTOP = Hardware(local=True, host="laptop", cpu_model="AMD EPYC", cpus=2, memory_mib=8000, threads=2,
                  load_start=0.5, load_end=0.9)


def spec(**benchmark) -> JobSpec:
    return JobSpec.model_validate({
        "name": "bench", "schedule": "0 3 * * 1", "image": "bench:1", "repeat": 3,
        "benchmark": {"base": "base", "time_metric": "train_seconds", **benchmark},
        "matrix": [{"name": name, "machine": {"type": machine}} for name, machine in MACHINES.items()]})


def run(variant: str, repeat: int, tasks: dict[str, float], *, week: int = 0, boot: float = 50, setup: float = 10,
        upload: float = 20, hardware: Hardware | None = None) -> RunRecord:
    """A run whose container spends `setup` seconds outside the timed tasks."""
    start = T0 + timedelta(weeks=week)
    work = sum(tasks.values())
    created = start
    local = hardware is not None and hardware.local  # local mode's zones are local-*
    attempt = Attempt(number=1, vm_name="a1", machine_type=MACHINES[variant], disk_gb=30, created_at=created,
                      zone="local-zone1-a" if local else None,
                      started_at=created + timedelta(seconds=boot),
                      finished_at=created + timedelta(seconds=boot + setup + work),
                      deleted_at=created + timedelta(seconds=boot + setup + work + upload), outcome="exited",
                      exit_code=0)
    metrics = {"train_seconds": {"value": work, "unit": "s"},
               **{f"{task}_seconds": {"value": seconds, "unit": "s"} for task, seconds in tasks.items()},
               "mlp_heldout_loss": {"value": 0.5, "unit": "1"}}
    run_id = f"{start:%Y%m%d-%H%M}-{variant}-r{repeat}"
    return RunRecord(job="bench", run_id=run_id, variant=variant, repeat=repeat, state="succeeded", created_at=start,
                     updated_at=start, tick=start, attempts=(attempt,),
                     metrics=parse_metrics(json.dumps({"work": {"value": 1000, "unit": "samples"},
                                                       "metrics": metrics}).encode()),
                     hardware=hardware if hardware is not None else CLOUD[variant])


def tasks_runs(**kwargs) -> list[RunRecord]:
    """The base is 2x faster on mlp and 2x slower on lstm than e2: per task, opposite findings."""
    runs = []
    for repeat, jitter in enumerate((1.0, 1.02, 0.98), 1):
        runs.append(run("base", repeat, {"mlp": 10 * jitter, "lstm": 200 * jitter}, **kwargs))
        runs.append(run("e2", repeat, {"mlp": 20 * jitter, "lstm": 100 * jitter}, **kwargs))
    return runs


# --- 1. several comparisons per job -----------------------------------------------------------------


def test_each_compared_metric_gets_its_own_ratio_interval_verdict_and_panel():
    report = benchmark_report("bench", tasks_runs(), load_prices(), "us-central1",
                              spec=spec(compare=["mlp_seconds", "lstm_seconds"], overall=True))
    mlp, lstm = report.comparisons
    assert mlp.row("e2").relative_time.value == pytest.approx(2.0)
    assert lstm.row("e2").relative_time.value == pytest.approx(0.5)
    assert mlp.row("e2").relative_time.low is not None and mlp.row("e2").relative_time.confidence == pytest.approx(0.9)
    # The overall figure is the geometric mean of the per-task ratios, not the ratio of the sums.
    assert report.overall.row("e2").relative_time.value == pytest.approx(math.sqrt(2.0 * 0.5))
    assert report.row("e2").relative_time.value == pytest.approx(120 / 210)  # the summed time: the lstm's
    lines = exports.verdict_lines(report)
    assert any(line.startswith("mlp_seconds: e2 took 2.00x the time of base") for line in lines)
    assert any(line.startswith("lstm_seconds: e2 took 0.50x the time of base") for line in lines)
    assert "per-metric" in " ".join(chart_pngs(report))
    markdown = exports.markdown(report)
    assert "each compared metric" in markdown and "overall (geomean)" in markdown
    data = json.loads(exports.json_text(report))
    assert [c["metric"] for c in data["comparisons"]] == ["mlp_seconds", "lstm_seconds", "overall (geomean)"]


def test_exports_carry_every_runs_metrics():
    report = benchmark_report("bench", tasks_runs(), load_prices(), "us-central1", spec=spec())
    rows = list(csv.DictReader(io.StringIO(exports.runs_csv(report))))
    assert rows[0]["metric:mlp_seconds (s)"] == "10.0" and rows[0]["metric:mlp_heldout_loss (1)"] == "0.5"
    sample = json.loads(exports.json_text(report))["rows"][0]["samples"][0]
    assert sample["metrics"]["lstm_seconds"] == {"value": 200.0, "unit": "s"}


# --- 2. cost with its basis and its phases ---------------------------------------------------------


def test_the_report_names_its_cost_basis_and_shows_the_work_cost_and_the_phases():
    table = load_prices()
    report = benchmark_report("bench", tasks_runs(), table, "us-central1", spec=spec())
    base = report.row("base")
    hourly = table.machine_hourly("n1-highcpu-16", True, "us-central1")
    assert base.work_cost.median == pytest.approx(210 * hourly / 3600)  # the articles' seconds x price
    assert base.cost.median > 1.2 * base.work_cost.median  # the VM's life also bills boot, set-up and upload
    phases = base.phases
    assert (phases.boot_pull, phases.setup, phases.measured, phases.upload) == (50, 10, 210, 20)
    assert phases.vm == 290
    caption = exports.report_caption(report)
    assert "cost: the VM's life x its price" in caption and "60-second minimum" in caption
    markdown = exports.markdown(report)
    assert "| base | 50s | 10s | 3m30s | 20s | 4m50s |" in markdown and "work cost" in markdown
    data = json.loads(exports.json_text(report))
    assert data["cost_basis"].startswith("cost: the VM's life") and "articles' formula" in data["work_cost_basis"]
    assert data["rows"][0]["phases"]["boot_pull_s"] == 50
    line = next(csv.DictReader(io.StringIO(exports.csv_text(report))))
    assert line["phase_measured_s"] == "210.0" and float(line["relative_work_cost"]) == 1.0


# --- 3. local runs: fit to compare, or said not to be -------------------------------------------------


def test_local_verdicts_and_charts_say_the_host_and_never_call_a_machine_type_faster():
    runs = tasks_runs(hardware=LAPTOP)
    report = benchmark_report("bench", runs, load_prices(), "us-central1", spec=spec(compare=["mlp_seconds"]))
    lines = [verdict(report, row) for row in report.rows] + exports.verdict_lines(report)
    assert all("faster" not in line and "slower" not in line for line in lines)
    assert verdict(report, report.row("e2")).startswith(
        "measured on local host laptop, not on the machine types: the e2 entry's runs took 0.57x the time")
    assert all("not on the machine types" in line for line in lines[1:])
    assert chart_title(report, "relative time per run").endswith("(measured on local host laptop, not on the machine "
                                                                 "types)")
    assert all("not on the machine types" in caption for caption in chart_captions(report).values())
    assert "2 threads" in report.row("base").hardware


def test_a_local_runs_wait_for_its_turn_is_no_part_of_its_boot_or_cost():
    """Compared local runs take turns: the third waited for two others, as no cloud VM would."""
    table = load_prices()
    alone = run("base", 1, {"mlp": 100}, hardware=LAPTOP)
    late = run("base", 2, {"mlp": 100}, boot=50 + 400, hardware=LAPTOP.model_copy(update={"waited_s": 400.0}))
    report = benchmark_report("bench", [alone, late], table, "us-central1", spec=spec())
    first, second = report.row("base").runs_detail
    assert first.cost == pytest.approx(second.cost) and second.phases["boot_pull"] == 50
    assert second.phases["wait"] == 400 and report.row("base").phases.wait == 400
    stored = [r.model_copy(update={"cost_usd": 0.01 + (0.004 if r is late else 0.0),
                                   "cost_items": {"compute": 0.008 + (0.004 if r is late else 0.0)}})
              for r in (alone, late)]
    page = benchmark_report("bench", stored, None, "us-central1", spec=spec())  # the page: costs as recorded
    assert page.row("base").runs_detail[1].cost < 0.0141


def test_outlier_noise_and_busy_host_are_warned_of():
    """The run given 2 threads among siblings given 1 took 298.9 s against 52-55 s: the report pooled it."""
    busy = CLOUD["base"].model_copy(update={"load_start": 9.0})  # load is no hardware: pooled, and warned of
    runs = [run("base", 1, {"mlp": 298.9}, hardware=busy), run("base", 2, {"mlp": 52.1}),
            run("base", 3, {"mlp": 54.6}), run("e2", 1, {"mlp": 50}), run("e2", 2, {"mlp": 51}),
            run("e2", 3, {"mlp": 50.5})]
    report = benchmark_report("bench", runs, load_prices(), "us-central1", spec=spec())
    warnings = " ".join(report.warnings)
    assert "run 20261123-0300-base-r1 is an outlier (299 s, 5.5x the median of 3)" in warnings
    assert "base: high noise" in warnings
    assert "1 of 6 runs ran while the host's load average exceeded its CPUs (up to 9.0)" in warnings
    assert "e2:" not in warnings  # within a percent or two of each other: nothing to say


def test_the_hardware_table_shows_the_thread_count_a_cloud_run_reported():
    runs = [run("base", 1, {"mlp": 10}), run("base", 2, {"mlp": 11})]
    runs = [r.model_copy(update={"metrics": parse_metrics(json.dumps({"metrics": {
        "train_seconds": {"value": 10, "unit": "s"}, "cpu_threads": {"value": 16, "unit": "threads"}}}).encode())})
            for r in runs]
    report = benchmark_report("bench", runs, None, "us-central1", spec=spec())
    assert report.row("base").hardware.endswith("no GPU, 16 CPU threads (the job's own count)")


def test_runs_given_other_thread_counts_are_never_pooled():
    one, two = LAPTOP.model_copy(update={"threads": 1}), LAPTOP
    runs = [run("base", 1, {"mlp": 10}, hardware=two), run("base", 2, {"mlp": 30}, hardware=one),
            run("base", 3, {"mlp": 31}, hardware=one)]
    report = benchmark_report("bench", runs, None, "us-central1", spec=spec())
    assert [r.name for r in report.rows if r.variant == "base"] == ["base [1/2]", "base [2/2]"]


# --- 4. intervals that mean their label; rounds ---------------------------------------------------------


def test_the_stated_confidence_is_what_three_runs_a_side_achieve():
    report = benchmark_report("bench", tasks_runs(), load_prices(), "us-central1", spec=spec())
    assert report.row("e2").relative_time.confidence == pytest.approx(0.9)
    assert "(here 90%; 4 or more runs a side give 95%)" in exports.report_caption(report)
    assert "90%" in verdict(report, report.row("e2"))
    data = json.loads(exports.json_text(report))
    assert data["rows"][1]["relative_time"]["confidence"] == pytest.approx(0.9)


def test_rounds_that_disagree_are_flagged_not_pooled_and_tick_and_since_choose():
    quiet = tasks_runs()
    crowded = [r.model_copy(update={"run_id": r.run_id.replace("20261123", "20261130"),
                                    "tick": r.tick + timedelta(weeks=1), "created_at": r.created_at + timedelta(weeks=1),
                                    "metrics": parse_metrics(json.dumps({"metrics": {"train_seconds": {
                                        "value": 4 * r.metrics.seconds("train_seconds"), "unit": "s"}}}).encode())})
               for r in quiet]
    runs = quiet + crowded
    report = benchmark_report("bench", runs, None, "us-central1", spec=spec())
    assert report.rounds == "the latest round, 2026-11-30 03:00" and report.row("base").runs == 3
    assert any(w.startswith("rounds disagree beyond their spread, so they are not pooled: base: 2026-11-23 03:00")
               for w in report.warnings)
    pooled = benchmark_report("bench", runs, None, "us-central1", spec=spec(), pool_rounds=True)
    assert pooled.row("base").runs == 6 and pooled.rounds == "every round"
    first = benchmark_report("bench", runs, None, "us-central1", spec=spec(), tick="2026-11-23 03:00")
    assert first.row("base").time.median == pytest.approx(210) and first.rounds == "the round 2026-11-23 03:00"
    latest = benchmark_report("bench", runs, None, "us-central1", spec=spec(), tick="latest")
    assert latest.row("base").time.median == pytest.approx(840)
    since = benchmark_report("bench", runs, None, "us-central1", spec=spec(), since=T0 + timedelta(days=3))
    assert since.row("base").runs == 3
    with pytest.raises(SpotcronError, match="no round of this job starts with it"):
        benchmark_report("bench", runs, None, "us-central1", spec=spec(), tick="2025")


def test_report_command_chooses_rounds(tmp_path):
    from click.testing import CliRunner

    from spotcron.cli import cli as spotcron

    runs = tasks_runs() + [r.model_copy(update={"run_id": r.run_id.replace("20261123", "20261130"),
                                                "tick": r.tick + timedelta(weeks=1)}) for r in tasks_runs()]
    for record in runs:
        folder = tmp_path / "copy" / "runs" / "bench" / record.run_id
        folder.mkdir(parents=True)
        (folder / "run.json").write_bytes(record.to_json())

    def report(*args: str) -> dict:
        done = CliRunner().invoke(spotcron, ["report", "bench", "--records", str(tmp_path / "copy"), "--jobs",
                                             str(tmp_path / "no-jobs"), "--format", "json", *args])
        assert done.exit_code == 0, done.output
        return json.loads(done.output)

    assert report()["rounds"] == "every round" and report()["rows"][0]["runs"] == 6  # they agree: pooled
    assert report("--tick", "latest")["rounds"] == "the round 2026-11-30 03:00"
    assert report("--since", "2026-11-24")["rows"][0]["runs"] == 3
    assert report("--all-rounds")["rows"][0]["runs"] == 6
