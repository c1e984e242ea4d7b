"""On a host without a GPU, a GPU configuration ends `skipped` with its reason before it is
admitted: it never counts toward max_live_vms, never takes its job's turn, and never holds the
queue. Before, its VM was created, took the turn, waited in the queue ("refused by the limits'
manual share") and ended `skipped` minutes later, while a 1-second job waited behind it."""

from __future__ import annotations

import pytest

from spotcron.core.loader import load_jobs
from spotcron.core.runs import Outcome, RunState
from spotcron.core.settings import Limits

from .conftest import python_job, write_job

pytestmark = pytest.mark.slow

T4 = "{type: n1-standard-8, gpu: {type: nvidia-tesla-t4, count: 1}}"


def spec_of(tmp_path, name, code, extra="", machine=""):
    body = python_job(code, extra=extra)
    write_job(tmp_path / "jobs", name, body.replace("machine: {type: e2-small}", f"machine: {machine}") if machine else body)
    return next(s for s in load_jobs([tmp_path / "jobs"]) if s.name == name)


def test_a_gpu_run_on_a_host_without_one_is_skipped_before_it_takes_room(make_stack, tmp_path):
    # One VM at a time: a T4 run that took the slot (or queued for it) would hold up the bot.
    stack = make_stack(limits=Limits(max_live_vms=1, manual_share=1.0), gpus=[])
    bench = spec_of(tmp_path, "bench", "print('never')",
                    extra=f"matrix:\n  - {{name: t4, machine: {T4}}}\n  - {{name: t4-b, machine: {T4}}}\n")
    bot = spec_of(tmp_path, "hello-bot", "print('hello')")
    gpu_runs = stack.run_now(bench)
    skipped = stack.wait(gpu_runs, timeout=60)
    for record in skipped:
        assert record.state == RunState.SKIPPED, (record.run_id, record.state, record.reason)
        assert "no NVIDIA GPU" in (record.reason or "") and "nvidia-tesla-t4 x1" in record.reason, record.reason
        # Never admitted, never a VM, never queued or running: it held no room under the limits.
        assert not record.had_vm and [a.outcome for a in record.attempts] == [Outcome.UNAVAILABLE]
        assert {change.state for change in record.history} <= {RunState.SCHEDULED, RunState.STARTING,
                                                                 RunState.SKIPPED}, record.history
    assert stack.compute.list_managed() == [] and stack.compute.turns.waiting("bench") == 0
    [hello] = stack.wait(stack.run_now(bot), timeout=60)
    assert hello.state == RunState.SUCCEEDED, hello.reason
    assert RunState.QUEUED not in {change.state for change in hello.history}, hello.history


def test_the_local_host_names_what_it_lacks(tmp_path):
    from spotcron.engine.clock import SystemClock
    from spotcron.local.compute import LocalCompute
    from spotcron.local.containment import PROCESS_GROUP, Containment

    def host(gpus):
        return LocalCompute(object(), "http://127.0.0.1:1/", tmp_path / "state", SystemClock(), base_env={},
                            cwd=tmp_path, runtime_for=lambda image: None, gpus=gpus, host="box",
                            containment=Containment(PROCESS_GROUP, (), "process group only"))

    t4 = spec_of(tmp_path, "t4", "pass", machine=T4)
    two = t4.model_copy(update={"machine": t4.machine.model_copy(
        update={"gpu": t4.machine.gpu.model_copy(update={"count": 2})})})
    cpu = spec_of(tmp_path, "cpu", "pass")
    none, one = host([]), host(["0"])
    try:
        assert none.host_problem(cpu) is None and one.host_problem(t4) is None
        assert none.host_problem(t4) == ("the configuration asks for nvidia-tesla-t4 x1, and this host has no NVIDIA "
                                         "GPU (nvidia-smi lists none); not run on the CPU")
        assert "this host has 1 NVIDIA GPU, fewer than 2" in one.host_problem(two)
    finally:
        none.close()
        one.close()
