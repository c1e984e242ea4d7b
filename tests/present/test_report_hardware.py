"""Reports say what ran: hardware per configuration, never pooled across kinds of hardware, a
local-mode title, a history flag when the hardware changed, and exports at full precision with
every run's samples and a verdict per configuration."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from spotcron.core.hardware import Gpu, Hardware
from spotcron.core.loader import load_job_file
from spotcron.core.spec import Benchmark
from spotcron.cost.prices import load_prices
from spotcron.present import exports
from spotcron.present.history import benchmark_history
from spotcron.present.report import benchmark_report, verdict
from tests.examples import example
from tests.present.test_report import bench_run, trained

ROOT = Path(__file__).resolve().parents[2]
XEON = Hardware(machine_type="n1-highcpu-16", zone="us-central1-a", cpu_model="Intel(R) Xeon(R) CPU @ 2.20GHz",
                cpus=16, memory_mib=14700)
T4 = Hardware(machine_type="n1-standard-8", zone="us-central1-b", cpu_model="Intel(R) Xeon(R) CPU @ 2.30GHz",
              cpus=8, memory_mib=29800, gpus=(Gpu(name="Tesla T4", driver="535.104.05", memory_mib=15360),))
H100_HOST = Hardware(local=True, host="gpu-box", cpu_model="AMD EPYC 9454", cpus=16, memory_mib=128000,
                     gpus=(Gpu(name="NVIDIA H100 80GB HBM3", driver="570.86.15", memory_mib=81559),))
LAPTOP = Hardware(local=True, host="laptop", cpu_model="AMD EPYC 9454", cpus=2, memory_mib=7900)


def on(record, hardware: Hardware):
    return record.model_copy(update={"hardware": hardware})


@pytest.fixture(scope="module")
def spec():
    spec = load_job_file(example("dl-benchmark"))
    return spec.model_copy(update={"benchmark": Benchmark(base="highcpu-16", time_metric="train_seconds")})


def cloud_runs(week: int = 0, t4: Hardware = T4):
    return [on(bench_run("highcpu-16", 900, week, repeat=i, metrics=trained(800 + i, samples=64_000)), XEON)
            for i in (1, 2, 3)] + \
           [on(bench_run("t4", 300, week, repeat=i, metrics=trained(250 + i, samples=64_000)), t4) for i in (1, 2, 3)]


def test_runs_on_other_hardware_get_their_own_row_never_pooled(spec):
    runs = cloud_runs() + [on(bench_run("t4", 300, 1, repeat=1, metrics=trained(2.5, samples=64_000)), H100_HOST)]
    result = benchmark_report("dl-benchmark", runs, load_prices(), "us-central1", spec=spec)
    names = [row.name for row in result.rows]
    assert names == ["highcpu-16", "e2-std-4", "t4 [1/2]", "t4 [2/2]"]
    t4, h100 = result.rows[2:]
    assert (t4.runs, t4.median_seconds) == (3, 252) and (h100.runs, h100.median_seconds) == (1, 2.5)
    assert t4.hardware == ("n1-standard-8: 8 CPU Intel Xeon @ 2.30GHz, 29 GiB, "
                           "1x Tesla T4 (driver 535.104.05)")
    assert h100.hardware.startswith("local gpu-box: 16 CPU AMD EPYC 9454, 125 GiB, 1x NVIDIA H100 80GB HBM3")
    md = exports.markdown(result)
    assert "| t4 \\[2/2\\] |" in md and "t4 ran on more than one kind of hardware" in " ".join(md.split())
    assert result.row("t4") is t4  # the kind with the most runs


def test_a_local_report_says_machine_types_were_priced_not_measured_and_where(spec):
    runs = [on(r, LAPTOP) for r in cloud_runs()]
    result = benchmark_report("dl-benchmark", runs, load_prices(), "us-central1", spec=spec)
    title = ("dl-benchmark: per configuration, relative to highcpu-16 (local runs on the host \"laptop\": machine types were "
             "priced, not measured)")
    assert exports.report_title(result) == title
    assert exports.markdown(result).startswith("**dl-benchmark**: per configuration, relative to `highcpu-16` "
                                               "(local runs on the host \"laptop\": machine types were priced, not measured)")
    assert json.loads(exports.json_text(result))["measured"] == ("local runs on the host \"laptop\": machine types were "
                                                                 "priced, not measured")
    cloud = benchmark_report("dl-benchmark", cloud_runs(), load_prices(), "us-central1", spec=spec)
    assert cloud.measured_where is None and exports.report_title(cloud).endswith("relative to highcpu-16")


def test_runs_that_did_not_run_are_listed_with_their_reason(spec):
    reason = ("the job did not start: the configuration asks for nvidia-tesla-t4 x1, and this host has no NVIDIA "
              "GPU (nvidia-smi lists none); not run on the CPU")
    failed = bench_run("t4", 0, 0, repeat=1, state="failed").model_copy(update={"reason": reason})
    runs = [on(r, LAPTOP) for r in cloud_runs() if r.variant != "t4"] + [failed]
    result = benchmark_report("dl-benchmark", runs, load_prices(), "us-central1", spec=spec)
    assert result.row("t4").unmeasured == ((failed.run_id, f"failed: {reason}"),)
    md = exports.markdown(result)
    assert f"runs not measured:\n- t4/{failed.run_id}: failed: {reason}" in md
    assert json.loads(exports.json_text(result))["rows"][2]["unmeasured"][0]["why"] == f"failed: {reason}"


def test_records_without_hardware_are_local_by_their_zone():
    record = bench_run("t4", 300, 0)
    attempt = record.attempts[-1].model_copy(update={"zone": "local-zone1-a"})
    local = record.model_copy(update={"attempts": (attempt,)})
    result = benchmark_report("dl-benchmark", [local], None, "us-central1")
    assert result.measured_where == "local runs on an unrecorded host: machine types were priced, not measured"


def test_each_configuration_gets_a_one_line_verdict(spec):
    result = benchmark_report("dl-benchmark", cloud_runs(), load_prices(), "us-central1", spec=spec)
    t4 = result.row("t4")
    line = verdict(result, t4)
    assert line.startswith("t4 ran 3.2x faster than highcpu-16 (3.17-3.20, 90%), at ")
    assert line.endswith("x the cost per 1M samples") and "cost/1M samples" in exports.markdown(result)
    ratio = t4.relative_cost_per_unit.value
    assert f"at {ratio:.2f}x the cost" in line
    assert verdict(result, result.row("highcpu-16")).startswith("highcpu-16 is the base: 3 runs on n1-highcpu-16")
    assert verdict(result, result.row("e2-std-4")) == ("e2-std-4: no time to compare with highcpu-16 (no measured "
                                                       "runs on one side)")


def test_exports_keep_full_precision_and_every_runs_samples(spec):
    result = benchmark_report("dl-benchmark", cloud_runs(), load_prices(), "us-central1", spec=spec)
    t4 = result.row("t4")
    data = json.loads(exports.json_text(result))
    row = data["rows"][2]
    assert row["cost_per_unit_usd"]["median"] == t4.cost_per_unit.median  # not rounded to 6 decimals
    assert t4.cost_per_unit.median < 1e-5 and row["cost_per_unit_usd"]["q1"] != 0
    assert row["relative_time"]["ratio"] == t4.relative_time.value
    assert row["verdict"] == verdict(result, t4)
    assert [s["run_id"] for s in row["samples"]] == [s[0] for s in t4.samples]
    first = row["samples"][0]
    assert (first["time_s"], first["work"], first["work_unit"], first["local"]) == (251, 64_000, "samples", False)
    assert first["hardware"]["gpus"][0]["name"] == "Tesla T4" and first["cost_usd"] == t4.samples[0][2]

    rows = list(csv.DictReader(io.StringIO(exports.csv_text(result))))
    assert float(rows[2]["cost_per_unit_usd_median"]) == t4.cost_per_unit.median
    assert rows[2]["hardware"] == t4.hardware and rows[2]["verdict"] == verdict(result, t4)
    runs = list(csv.DictReader(io.StringIO(exports.runs_csv(result))))
    assert len(runs) == 6 and runs[3]["configuration"] == "t4"
    assert float(runs[3]["cost_usd"]) == t4.samples[0][2] and runs[3]["work"] == "64000.0"
    assert (runs[3]["gpus"], runs[3]["gpu_count"], runs[3]["machine_type"]) == ("Tesla T4", "1", "n1-standard-8")


def test_history_flags_a_hardware_change_between_ticks(spec):
    runs = [r for week in range(3) for r in cloud_runs(week)] + cloud_runs(3, t4=H100_HOST)
    result = benchmark_report("dl-benchmark", runs, load_prices(), "us-central1", spec=spec)
    history = benchmark_history(result, runs)
    t4 = next(s for s in history.series if s.variant == "t4")
    assert [p.hardware_changed for p in t4.points] == [False, False, False, True]
    assert "hardware changed" in t4.flag_text()
    cells = [c for c in exports.history_cells(history) if c[0] == "t4"]
    assert cells[-1][-1].startswith("! hardware changed")
    assert [c[-1] for c in cells[:-1]] == ["", "", ""]
    base = next(s for s in history.series if s.variant == "highcpu-16")
    assert not any(p.hardware_changed for p in base.points) and "hardware" not in base.flag_text()
    lines = list(csv.DictReader(io.StringIO(exports.history_csv(history))))
    assert [line["hardware_changed"] for line in lines if line["configuration"] == "t4"] == \
        ["False", "False", "False", "True"]
    assert json.loads(json.dumps(history.to_json()))["series"][2]["ticks"][-1]["hardware_changed"] is True
