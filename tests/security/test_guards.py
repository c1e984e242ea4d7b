"""Guards that hold whatever the spec says: the catalog and the stack's limits, before any insert.

Driven through start_job. A deployed spec is written straight into the bucket here, the way a
hand edit (or a bug in deploy) would leave it, to show that the function checks it again.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable

import pytest
from pydantic import ValidationError

from spotcron.core import layout
from spotcron.core.settings import Limits
from spotcron.core.spec import MAX_MATRIX_ENTRIES, JobSpec
from spotcron.engine.day_hours import read_day
from spotcron.engine.deployed import SpecStore, canonical, digest_of
from spotcron.engine.limits import AdmissionBusy
from spotcron.engine.start_job import launch
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec


@pytest.fixture
def limited():
    made = []

    def make(**limits) -> Harness:
        # These tests fire many starts at once as manual runs; the manual share (held apart in
        # tests/security/test_manual_share.py) would make them about something else.
        limits.setdefault("manual_share", 1.0)
        harness = Harness(limits=Limits(**limits))
        made.append(harness)
        return harness

    yield make
    entrypoints.use(None)


def deploy_raw(h, payload: dict) -> str:
    """Write a deployed spec without deploy's checks; returns its digest."""
    data = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    h.blobs.write(layout.deployed_spec(payload["name"]), data)
    return digest_of(data)


def only_run(h, job: str = "bot"):
    [record] = h.records(job)
    return record


def test_a_machine_type_outside_the_catalog_never_reaches_compute_engine(h):
    payload = {**make_spec().to_payload(), "machine": {**make_spec().machine.model_dump(mode="json"),
                                                      "type": "zz9-plural-z-alpha",
                                                      "gpu": {"type": "nvidia-tesla-t4", "count": 16}}}
    h.start({"job": "bot", "digest": deploy_raw(h, payload)})
    assert h.compute.created == [] and h.compute.calls["create"] == 0
    record = only_run(h)
    assert record.state == "failed"
    assert record.reason == ("machine type 'zz9-plural-z-alpha' is not in spotcron's catalog; refused before any "
                             "VM was created (spotcron validate names the known types)")


def test_a_gpu_the_machine_cannot_take_never_reaches_compute_engine(h):
    payload = make_spec(machine={"type": "e2-small"}).to_payload()
    payload["machine"]["gpu"] = {"type": "nvidia-tesla-t4", "count": 16}
    h.start({"job": "bot", "digest": deploy_raw(h, payload)})
    assert h.compute.created == []
    assert only_run(h).reason.startswith("refused before any VM was created: NVIDIA T4 (nvidia-tesla-t4) cannot "
                                         "attach to e2-small")


def test_the_matrix_is_capped_in_the_spec_itself():
    entries = [{"name": f"e{i}"} for i in range(MAX_MATRIX_ENTRIES + 1)]
    with pytest.raises(ValidationError, match=f"has {MAX_MATRIX_ENTRIES + 1} entries; a job may have at most "
                                              f"{MAX_MATRIX_ENTRIES} .each entry is a VM on every tick.: split"):
        make_spec(matrix=entries)
    make_spec(matrix=entries[:MAX_MATRIX_ENTRIES])


def test_a_deployed_spec_over_the_matrix_cap_starts_nothing(h, security_log):
    payload = make_spec().to_payload()
    payload["matrix"] = [{"name": f"e{i}"} for i in range(2700)]
    h.start({"job": "bot", "digest": deploy_raw(h, payload)})
    assert h.compute.created == [] and h.records("bot") == []
    assert security_log[0]["reason"] == "no job 'bot' is deployed"  # a spec that does not load is not deployed


def test_max_live_vms_refuses_the_run_that_would_cross_it(limited):
    h = limited(max_live_vms=2)
    for name in ("a", "b", "c"):
        h.start(make_spec(name=name))
    assert h.live_vms() == ["sc-a-20261122-1200-a1", "sc-b-20261122-1200-a1"]
    record = only_run(h, "c")
    assert record.state == "queued"  # it waits for room (tests/reliability/test_queue.py)
    assert record.reason == ("waiting for room: refused by the stack limit max_live_vms: 2 job VMs are live and the "
                             "limit is 2; raise it under `limits:` in infra/stack.yaml if this load is expected")
    assert record.attempts[0].outcome is None and h.compute.calls["create"] == 2


def test_max_gpus_counts_the_gpus_of_live_vms(limited):
    h = limited(max_gpus=1)
    t4 = {"type": "n1-standard-4", "gpu": {"type": "nvidia-tesla-t4", "count": 1}}
    h.start(make_spec(name="one", machine=t4))
    h.start(make_spec(name="two", machine=t4))
    h.start(make_spec(name="cpu"))
    assert only_run(h, "one").state == "running" and only_run(h, "cpu").state == "running"
    assert only_run(h, "two").reason.startswith("waiting for room: refused by the stack limit max_gpus: 1 GPUs are "
                                                "on live VMs, this run needs 1 and the limit is 1;")
    assert dict(h.compute.created[0].labels)["gpus"] == "1"


def test_max_vm_hours_per_day_admits_the_worst_case_and_settles_what_was_used(limited):
    h = limited(max_vm_hours_per_day=0.6)  # two attempts of 10m timeout + 5m grace fit, not three
    for name in ("a", "b", "c"):
        h.start(make_spec(name=name))
    assert only_run(h, "c").reason.startswith("waiting for room: refused by the stack limit max_vm_hours_per_day: "
                                              "0.50 VM-hours are used or admitted today (UTC), this attempt needs 0.25")
    # c is queued and holds no admission meanwhile
    assert "sc-c-20261122-1200-a1" not in read_day(h.blobs, "2026-11-22").admitted
    h.clock.advance(60)
    h.finish_ok("a", only_run(h, "a").run_id)  # ran one minute: 0.25 admitted, 1/60 h settled
    day = read_day(h.blobs, "2026-11-22")
    assert day.used == {"sc-a-20261122-1200-a1": round(60 / 3600, 6)}
    # a's end freed 0.23 h, so c started: b's and c's admissions and what a used
    assert only_run(h, "c").state == "running"
    assert day.hours == pytest.approx(0.25 + 0.25 + 60 / 3600, abs=1e-6)
    h.start(make_spec(name="d"), attributes={"trigger": "manual", "nonce": "ab12"})
    assert only_run(h, "d").state == "queued"


def test_limits_hold_for_retries_after_a_preemption_too(limited):
    h = limited(max_live_vms=1)
    h.start(make_spec(name="a"))
    h.start(make_spec(name="b", concurrency="allow"))
    assert only_run(h, "b").state == "queued" and h.compute.calls["create"] == 1


def test_limits_are_read_from_the_stack_file_and_the_functions_environment(tmp_path):
    from spotcron.core.settings import load_settings
    from spotcron.deploy.desired import function_environment

    stack = tmp_path / "stack.yaml"
    stack.write_text("limits: {max_live_vms: 3, max_gpus: 0, max_vm_hours_per_day: 12.5}\n")
    settings = load_settings(stack, {})
    assert settings.limits == Limits(max_live_vms=3, max_gpus=0, max_vm_hours_per_day=12.5)
    env = function_environment(settings, "https://x")
    assert load_settings(None, env).limits == settings.limits


def test_default_limits_are_safe_and_fit_the_examples(example_jobs):
    from spotcron.core.loader import load_jobs

    limits = Limits()
    assert (limits.max_live_vms, limits.max_gpus, limits.max_vm_hours_per_day) == (20, 4, 48.0)
    jobs = load_jobs([example_jobs])
    vms = sum(len(j.variants()) for j in jobs)
    gpus = sum(v.machine.gpu.count for j in jobs for v in j.variants() if v.machine.gpu)
    # The examples leave room for a user's own jobs beside them (a run over a limit would wait).
    assert vms <= limits.max_live_vms // 2 and gpus <= limits.max_gpus


def test_canonical_bytes_are_the_digest_input():
    spec = make_spec()
    assert JobSpec.from_payload(json.loads(canonical(spec))) == spec


def test_validate_refuses_a_retention_shorter_than_a_jobs_timeout(tmp_path):
    """results_retention_days: 1 with a 120-day timeout would delete live run records."""
    from click.testing import CliRunner

    from spotcron.cli import cli as main

    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "long.yaml").write_text('schedule: "0 3 * * *"\nimage: busybox\ntimeout: 3d\n')
    (tmp_path / "stack.yaml").write_text("results_retention_days: 1\n")
    result = CliRunner().invoke(main, ["validate", "--jobs", str(tmp_path / "jobs"), "--stack",
                                       str(tmp_path / "stack.yaml")])
    assert result.exit_code == 2
    assert (f"{tmp_path}/jobs/long.yaml:3: timeout: '3d' is 259200s plus the stack's grace (300s) and a day's "
            f"margin outlasts the stack's results_retention_days (1): the bucket would delete this job's run "
            f"records while a run is still live; set results_retention_days to at least 5 in the stack file, or "
            f"shorten the timeout") in result.output
    (tmp_path / "stack.yaml").write_text("results_retention_days: 5\n")
    assert CliRunner().invoke(main, ["validate", "--jobs", str(tmp_path / "jobs"), "--stack",
                                     str(tmp_path / "stack.yaml")]).exit_code == 0


def test_concurrent_starts_cannot_cross_max_live_vms_or_max_gpus(limited):
    """Starts handled at the same instant each list the VMs before any of them is inserted.
    Before: each saw none of the others and all were admitted (10 live with a limit of 2, and any
    number of GPUs). Each admission is now written before the count, so later starts see earlier
    ones; a start that fits only if those pending admissions come to nothing is delivered again,
    and decided exactly once their VMs are listed."""
    h = limited(max_live_vms=2, max_gpus=1)
    listing = h.compute.list_managed
    h.compute.list_managed = lambda: []  # every listing made before any of these inserts landed
    for name in ("a", "b", "c", "d"):
        assert h.start(make_spec(name=name)).status_code == (200 if name in "ab" else 500)  # 500: redelivered
    assert [only_run(h, n).state for n in "abcd"] == ["running", "running", "starting", "starting"]
    assert h.compute.calls["create"] == 2
    h.compute.list_managed = listing  # the inserts have landed
    for name in ("c", "d"):
        h.start(make_spec(name=name))
    assert [only_run(h, n).state for n in "abcd"] == ["running", "running", "queued", "queued"]
    assert only_run(h, "c").reason.startswith("waiting for room: refused by the stack limit max_live_vms: 2 job VMs are live")

    g = limited(max_gpus=1)
    g.compute.list_managed = lambda: []
    t4 = {"type": "n1-standard-4", "gpu": {"type": "nvidia-tesla-t4", "count": 1}}
    g.start(make_spec(name="one", machine=t4))
    assert g.start(make_spec(name="two", machine=t4)).status_code == 500
    g.compute.list_managed = listing.__func__.__get__(g.compute)
    g.start(make_spec(name="two", machine=t4))
    assert only_run(g, "two").reason.startswith("waiting for room: refused by the stack limit max_gpus: 1 GPUs are on live VMs")


def _launch_at_once(h, specs, *, meet: Callable[[str, str], None]) -> list[BaseException | None]:
    """Start every spec on a thread of its own, `meet` called before each storage call; the error
    each start raised (a redelivery would follow), or None."""
    h.blobs.fault = lambda call, name: meet(call, name) or False
    errors: list[BaseException | None] = [None] * len(specs)

    def start(i: int) -> None:
        try:
            launch(h.deps, specs[i], requested_at=h.clock.now(), manual=True, nonce="ab12")
        except Exception as exc:  # noqa: BLE001 - kept for the assertion
            errors[i] = exc

    threads = [threading.Thread(target=start, args=(i,)) for i in range(len(specs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    h.blobs.fault = None
    return errors


def live_vms(h) -> int:
    return sum(1 for i in h.compute.list_managed() if i.status in ("PROVISIONING", "STAGING", "RUNNING"))


def test_starts_that_all_write_before_any_counts_never_cross_a_limit_and_are_then_decided_one_by_one(limited):
    """The worst order for admissions written before they are counted: every start writes, then
    all count at once (a barrier holds each listing of the day). None may be admitted past the
    limit; those held back are delivered again one by one and exactly the limit's worth run."""
    h = limited(max_live_vms=3)
    h.start(make_spec(name="already"))  # one VM live and listed before the burst
    specs = [make_spec(name=f"burst{i}") for i in range(6)]
    for spec in specs:
        SpecStore(h.blobs).write(spec)
    written, counted = threading.Barrier(len(specs), timeout=10), threading.Barrier(len(specs), timeout=10)
    list_now, day = h.blobs.list, layout.usage_day("2026-11-22")

    def meet_around_the_count(prefix: str) -> list[str]:
        if prefix == day:
            written.wait()  # every start has written its admission before any counts
        names = list_now(prefix)
        if prefix == day:
            counted.wait()  # and every start has counted before any goes on
        return names

    h.blobs.list = meet_around_the_count
    errors = _launch_at_once(h, specs, meet=lambda call, name: None)
    h.blobs.list = list_now
    assert live_vms(h) <= 3
    assert all(isinstance(e, AdmissionBusy) for e in errors), errors  # each saw five pending others
    for spec in specs:  # the redeliveries, spread out by Pub/Sub's backoff
        launch(h.deps, spec, requested_at=h.clock.now(), manual=True, nonce="ab12")
    states = sorted(only_run(h, s.name).state for s in specs)
    assert states == ["queued"] * 4 + ["running"] * 2 and live_vms(h) == 3


@pytest.mark.parametrize("seed", range(8))
def test_starts_interleaved_at_random_never_cross_a_limit(limited, seed):
    """Random pauses before every storage call of eight concurrent starts: at no moment are more
    VMs admitted than the limits allow, and redeliveries end with every slot used."""
    rng = random.Random(seed)
    h = limited(max_live_vms=3, max_gpus=2)
    t4 = {"type": "n1-standard-4", "gpu": {"type": "nvidia-tesla-t4", "count": 1}}
    specs = [make_spec(name=f"r{i}", machine=t4 if i % 3 == 0 else {"type": "e2-small"}) for i in range(8)]
    for spec in specs:
        SpecStore(h.blobs).write(spec)
    lock = threading.Lock()

    def meet(call: str, name: str) -> None:
        with lock:
            pause = rng.random() * 0.004
        time.sleep(pause)

    pending = specs
    for _ in range(20):
        errors = _launch_at_once(h, pending, meet=meet)
        live = [i for i in h.compute.list_managed() if i.status in ("PROVISIONING", "STAGING", "RUNNING")]
        assert len(live) <= 3 and sum(int(i.labels.get("gpus", "0")) for i in live) <= 2
        assert all(e is None or isinstance(e, AdmissionBusy) for e in errors), errors
        pending = [spec for spec, error in zip(pending, errors, strict=True) if error is not None]
        if not pending:
            break
    assert not pending
    assert live_vms(h) == 3
def test_an_admission_counts_as_live_only_until_its_vm_could_be_listed(limited):
    """An admitted VM that never appears (its insert failed for good) stops counting after the
    window, so a failed insert cannot hold a slot for the rest of the day."""
    h = limited(max_live_vms=1)
    h.compute.list_managed = lambda: []
    h.start(make_spec(name="a"))
    h.clock.advance(16 * 60)  # past ADMISSION_WINDOW (15 minutes)
    h.start(make_spec(name="b"), attributes={"trigger": "manual", "nonce": "ab12"})
    assert only_run(h, "b").state == "running"


def test_a_retry_after_a_preemption_does_not_count_its_own_earlier_vm(limited):
    h = limited(max_live_vms=1)
    h.compute.list_managed = lambda: []
    h.start(make_spec(name="a", retries={"preemption": 1}))
    run = only_run(h, "a")
    h.clock.advance(60)
    h.callback("a", run.run_id, status="preempted", exit_code=None)
    after = only_run(h, "a")
    assert after.current_attempt.number == 2 and after.state == "running", after.reason


def test_a_held_back_redelivery_withdraws_only_its_own_admission_not_the_one_that_was_granted(limited):
    """A second delivery of an admitted attempt (its VM not listed yet) that is held back withdraws
    only its own admission: withdrawing the granted one too would show the next start a free slot,
    two VMs live with a limit of one."""
    from spotcron.engine.limits import admit
    from spotcron.engine.transitions import spec_of

    h = limited(max_live_vms=1)
    h.compute.list_managed = lambda: []  # a's insert has not shown up in the list yet
    h.start(make_spec(name="a"))
    record = only_run(h, "a")
    assert record.state == "running"
    h.blobs.write(layout.usage_admitted("2026-11-22", "sc-b-20261122-1200-a1", int(h.clock.now().timestamp()), 0, 0.25),
                  b"", if_generation_match=0)  # b's start, being decided
    h.clock.advance(1)
    with pytest.raises(AdmissionBusy):  # a redelivery of a's attempt, or the sweep driving it
        admit(h.deps, record, spec_of(record), record.current_attempt)
    assert "sc-a-20261122-1200-a1" in read_day(h.blobs, "2026-11-22").admitted
    h.start(make_spec(name="c"))
    assert only_run(h, "c").state != "running" and h.compute.calls["create"] == 1


def test_a_retry_waits_for_its_own_predecessor_while_it_is_still_stopping(limited):
    """job_done deletes a preempted VM without waiting, so the retry's admission lists it as
    STOPPING. It counts (it is alive and billed), but the run is not failed for it: the retry
    waits in `starting` and the sweep starts it once the earlier VM is gone. (Leaving the stopping
    VM out of the count would let retries cross max_live_vms.)"""
    h = limited(max_live_vms=1)
    deletes = AsynchronousDeletes(h.compute)
    h.start(make_spec(name="a", retries={"preemption": 1}))
    run = only_run(h, "a")
    h.clock.advance(60)
    h.callback("a", run.run_id, status="preempted", exit_code=None)
    waiting = only_run(h, "a")
    assert waiting.current_attempt.number == 2 and waiting.state == "starting", waiting.reason
    assert alive(h) == 1
    deletes.finish()
    h.clock.advance(6 * 60)
    h.sweep()
    after = only_run(h, "a")
    assert after.current_attempt.number == 2 and after.state == "running", after.reason


class AsynchronousDeletes:
    """Compute Engine's delete as it really is: accepted at once, the VM STOPPING (alive and
    billed) until `finish()` removes it."""

    def __init__(self, compute):
        self.compute, self.pending = compute, []
        compute.delete_instance = self.delete

    def delete(self, zone: str, name: str) -> bool:
        if self.compute.peek(zone, name) is None:
            return False
        self.compute.set_status(zone, name, "STOPPING")
        self.pending.append((zone, name))
        return True

    def finish(self) -> None:
        for zone, name in self.pending:
            self.compute.preempt(zone, name)  # gone for good
        self.pending.clear()


def alive(h) -> int:
    return sum(1 for i in h.compute.all_instances() if i.status in ("PROVISIONING", "STAGING", "RUNNING", "STOPPING"))


def test_preemption_retries_never_cross_max_live_vms_while_earlier_vms_are_stopping(limited):
    """job_done deletes each preempted VM and admits the retry at once; the earlier attempt's VM
    counts while it is STOPPING, or max_live_vms 2 would see 5 VMs alive."""
    h = limited(max_live_vms=2)
    deletes = AsynchronousDeletes(h.compute)
    specs = [make_spec(name=name, retries={"preemption": 3}) for name in ("a", "b")]
    for spec in specs:
        h.start(spec)
    most = alive(h)
    for attempt in (1, 2, 3):
        for spec in specs:
            record = only_run(h, spec.name)
            if record.state == "running" and record.current_attempt.number == attempt:
                h.callback(spec.name, record.run_id, attempt, status="preempted", exit_code=None, uploaded=False)
                most = max(most, alive(h))
    assert most <= 2, f"{most} VMs alive with max_live_vms 2"
    deletes.finish()
    h.clock.advance(16 * 60)  # past the window (15 minutes) in which the gone VMs' admissions still count
    h.sweep()  # the retries held back while their predecessors stopped start now
    assert [only_run(h, s.name).state for s in specs] == ["running", "running"]
    assert alive(h) <= 2
