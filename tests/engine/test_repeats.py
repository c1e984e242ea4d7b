"""`repeat: N`: every repeat of a tick is a run of its own, on its own VM, with its own record and results."""

from __future__ import annotations

from spotcron.core import layout
from spotcron.testing.harness import make_spec

TICK = "20261122-1200"


def test_each_repeat_is_a_run_with_its_own_vm_record_and_results(h):
    spec = make_spec(repeat=2, matrix=[{"name": "cpu"}, {"name": "gpu", "machine": {"type": "n1-standard-8"},
                                                          "repeat": 3}])
    h.start(spec)
    runs = {r.run_id: r for r in h.records("bot")}
    assert sorted(runs) == sorted([f"{TICK}-cpu-r1", f"{TICK}-cpu-r2",
                                   f"{TICK}-gpu-r1", f"{TICK}-gpu-r2", f"{TICK}-gpu-r3"])
    assert len({vm.name for vm in h.compute.created}) == 5
    assert all(r.state == "running" for r in runs.values())  # forbid does not hold a repeat back for another
    assert [(r.variant, r.repeat) for r in sorted(runs.values(), key=lambda r: r.run_id)] == [
        ("cpu", 1), ("cpu", 2), ("gpu", 1), ("gpu", 2), ("gpu", 3)]

    assert h.finish_ok("bot", f"{TICK}-gpu-r2").status_code == 200
    done = h.record("bot", f"{TICK}-gpu-r2")
    assert done.state == "succeeded" and done.results_prefix == layout.attempt_prefix("bot", f"{TICK}-gpu-r2", 1)
    assert h.blobs.read(layout.logs("bot", f"{TICK}-gpu-r2", 1)) is not None
    assert h.blobs.read(layout.logs("bot", f"{TICK}-gpu-r1", 1)) is None
    assert h.record("bot", f"{TICK}-gpu-r1").state == "running"


def test_a_repeated_delivery_starts_no_more_repeats(h):
    spec = make_spec(repeat=3)
    h.start(spec)
    h.start(spec)
    assert sorted(r.run_id for r in h.records("bot")) == [f"{TICK}-r1", f"{TICK}-r2", f"{TICK}-r3"]
    assert len(h.compute.created) == 3


def test_forbid_holds_back_a_repeat_while_the_same_repeat_of_the_last_tick_runs(h):
    spec = make_spec(repeat=2, schedule="0 * * * *")
    h.start(spec)
    h.finish_ok("bot", f"{TICK}-r1")
    h.clock.advance(3600)
    h.start(spec)
    assert h.record("bot", "20261122-1300-r1").state == "running"
    skipped = h.record("bot", "20261122-1300-r2")
    assert skipped.state == "skipped" and f"previous run {TICK}-r2 is still running" in skipped.reason


def test_the_run_end_keeps_checked_metrics_or_the_problem_in_the_record(h):
    from spotcron.core.metrics import METRICS_FILE

    spec = make_spec(repeat=3, benchmark={"time_metric": "train_seconds"})
    h.start(spec)
    files = {"r1": b'{"work": {"value": 640, "unit": "samples"}, "metrics": {"train_seconds": {"value": 4, "unit": "s"}}}',
             "r2": b'{"work": {"value": -1, "unit": "samples"}}'}
    for repeat, data in files.items():
        h.blobs.write(layout.results_prefix("bot", f"{TICK}-{repeat}", 1) + METRICS_FILE, data)
    for repeat in ("r1", "r2", "r3"):
        assert h.finish_ok("bot", f"{TICK}-{repeat}").status_code == 200
    good, bad, missing = (h.record("bot", f"{TICK}-{r}") for r in ("r1", "r2", "r3"))
    assert good.state == "succeeded" and good.metrics.work.value == 640 and good.metrics.seconds("train_seconds") == 4
    assert good.metrics_problem is None
    # A malformed or missing file does not fail the run, and is not dropped: the record says what is wrong.
    assert bad.state == "succeeded" and bad.metrics is None
    assert bad.metrics_problem == ("results/metrics.json of attempt 1: work.value is -1; the work done must be more "
                                   "than 0 (steps, samples, items processed)")
    assert missing.metrics_problem == ("results/metrics.json of attempt 1: missing; the job's "
                                       "benchmark.time_metric 'train_seconds' needs it")


def test_a_success_the_sweep_ends_keeps_its_checked_metrics_too(h):
    import json

    from spotcron.core.metrics import METRICS_FILE

    h.start(make_spec(repeat=2))
    for repeat, data in (("r1", b'{"work": {"value": 64, "unit": "steps"}}'), ("r2", b'{"work": "lots"}')):
        run_id = f"{TICK}-{repeat}"
        h.blobs.write(layout.results_prefix("bot", run_id, 1) + METRICS_FILE, data)
        h.blobs.write(layout.manifest("bot", run_id, 1), json.dumps({"exit_code": 0, "files": []}).encode())
        attempt = h.record("bot", run_id).current_attempt
        h.compute.preempt(attempt.zone, attempt.vm_name)  # the VM is gone and its callback never came
    h.sweep()
    good, bad = h.record("bot", f"{TICK}-r1"), h.record("bot", f"{TICK}-r2")
    assert good.state == "succeeded" and good.metrics.work.value == 64
    assert bad.state == "succeeded" and bad.metrics_problem == (
        'results/metrics.json of attempt 1: work is "lots"; write {"value": NUMBER, "unit": "..."}')
