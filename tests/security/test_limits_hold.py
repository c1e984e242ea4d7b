"""Stack limits under attack: what a publisher, a hostile container or plain timing could do to
max_live_vms and max_vm_hours_per_day.

A run over a limit waits (queued) instead of failing, a replacement and every other job's tick
included while a publisher holds the stack full; an earlier attempt's VM the list may not show yet
counts, so a retry never runs beside its predecessor over the limit; and a UTC day counts what the
day before's VMs may run into it, so no day runs up to twice max_vm_hours_per_day.
"""

from __future__ import annotations

from datetime import UTC, datetime

from spotcron.testing.harness import make_spec


def test_max_vm_hours_per_day_lets_a_utc_day_run_far_more_vm_hours_than_the_limit():
    """Each admission counts timeout + grace on the UTC day it was admitted, and only there. VMs
    admitted late on day 1 run into day 2, where they count for nothing, so day 2's own budget is
    spent again on top of them. With max_vm_hours_per_day 10.2 and jobs of 5 h: two VMs at 22:00,
    two more at 00:00 (all admitted), and day 2 runs ~16.3 VM-hours (up to 20.3 by the
    admissions): the bill of one UTC day is up to twice the limit, with no retry or race needed."""
    from spotcron.core.settings import Limits
    from spotcron.runtime import entrypoints
    from spotcron.testing.harness import Harness

    h = Harness(now=datetime(2026, 11, 22, 22, 0, 5, tzinfo=UTC), limits=Limits(max_vm_hours_per_day=10.2))
    try:
        late = [make_spec(name=name, schedule="0 22 * * *", timeout="5h") for name in ("a", "b")]
        early = [make_spec(name=name, schedule="0 0 * * *", timeout="5h") for name in ("c", "d")]
        for spec in late:
            h.start(spec)
        h.clock.set(datetime(2026, 11, 23, 0, 0, 5, tzinfo=UTC))
        for spec in early:
            h.start(spec)
        day2 = datetime(2026, 11, 23, tzinfo=UTC)
        hours = 0.0
        for spec in (*late, *early):
            [record] = h.records(spec.name)
            if record.state == "queued":
                continue  # held back by the limit: it runs nothing until room frees
            assert record.state == "running", (spec.name, record.state, record.reason)
            created = record.current_attempt.created_at
            # Each VM may run until its deadline (what its admission stands for): its share of day 2.
            hours += max(0.0, (min(record.deadline, day2.replace(day=24)) - max(created, day2)).total_seconds()) / 3600
        assert hours <= 10.2, (f"max_vm_hours_per_day 10.2, but the VMs admitted may run {hours:.1f} VM-hours "
                               f"within 2026-11-23 (UTC): those admitted on the 22nd count only there")
    finally:
        entrypoints.use(None)


def test_manual_runs_of_one_job_hold_the_stack_limits_and_fail_every_other_jobs_runs():
    """max_live_vms is stack-wide. A publisher sends `trigger=manual` messages for one deployed job
    (`concurrency: allow`): each gets a VM until the limit, and then every other job's genuine
    scheduled tick is refused by the limit and ends `failed`. The publisher does more than "run a
    deployed job at an unscheduled time": it stops the rest of the stack, for as long as it keeps
    sending (each manual run may last the job's whole timeout)."""
    from spotcron.core.settings import Limits
    from spotcron.runtime import entrypoints
    from spotcron.testing.harness import Harness

    h = Harness(limits=Limits(max_live_vms=3))
    try:
        busy = make_spec(name="anyjob", timeout="6h", concurrency="allow")
        for nonce in ("ab01", "ab02", "ab03"):
            h.run_now(busy, nonce=nonce)
        h.start(make_spec(name="victim"))
        [victim] = h.records("victim")
        assert victim.state != "failed", f"the victim's scheduled tick ended {victim.state}: {victim.reason}"
    finally:
        entrypoints.use(None)


def test_concurrency_replace_on_a_full_stack_kills_the_running_run_and_then_refuses_its_replacement():
    """`concurrency: replace` deletes the live run's VM (Compute Engine deletes asynchronously: it
    is STOPPING) and marks that run failed, *then* admits the new run, whose count includes the
    STOPPING VM. On a stack at max_live_vms the new run is refused: both runs end failed and
    nothing runs. A retry waits for its own STOPPING predecessor (AdmissionBusy); a replacement does
    not. Anyone who may publish a manual run can do this to a `replace` job whenever the stack is
    full."""
    from spotcron.core.settings import Limits
    from spotcron.runtime import entrypoints
    from spotcron.testing.harness import Harness
    from tests.security.test_guards import AsynchronousDeletes

    h = Harness(limits=Limits(max_live_vms=1))
    try:
        AsynchronousDeletes(h.compute)
        spec = make_spec(concurrency="replace", timeout="3h")
        h.start(spec)
        h.clock.advance(4 * 3600)
        h.start(spec)  # the next tick replaces the running one
        states = {r.run_id: (str(r.state), r.reason) for r in h.records("bot")}
        assert states["20261122-1600"][0] != "failed", (
            f"the old run was replaced and the new one refused: {states}")
    finally:
        entrypoints.use(None)


def test_a_retry_admitted_while_the_list_lags_does_not_count_its_predecessor():
    """The guard counts every VM the list shows, plus others' admissions of the last five minutes
    the list does not show yet ("an insert may take that long to appear"). A run's *own* earlier
    attempts are left out of those admissions on the ground that "one that is not listed is gone".
    But a VM created moments ago is not listed yet either (the sweep waits LIST_LAG, 2 minutes,
    before it believes a list). A container that reaches the metadata server reports `preempted`
    a minute after boot: job_done deletes the VM (STOPPING) and admits the retry, whose count does
    not see the predecessor; each retry does the same. Modelled: the list shows a VM 90 s after
    its creation, deletes take 3 minutes. With max_live_vms 1, 2 VMs are alive at once."""
    from datetime import timedelta

    from spotcron.core.settings import Limits
    from spotcron.runtime import entrypoints
    from spotcron.testing.harness import Harness

    h = Harness(limits=Limits(max_live_vms=1))
    try:
        listed, stopping = h.compute.list_managed, {}

        def lagging_list():
            now = h.clock.now()
            return [i for i in listed() if now - i.created_at >= timedelta(seconds=90)]

        def slow_delete(zone, name):
            instance = h.compute.peek(zone, name)
            if instance is None:
                return False
            h.compute.set_status(zone, name, "STOPPING")
            stopping[(zone, name)] = h.clock.now() + timedelta(minutes=3)
            return True

        def settle_deletes():
            for (zone, name), gone_at in list(stopping.items()):
                if h.clock.now() >= gone_at:
                    h.compute.preempt(zone, name)
                    del stopping[(zone, name)]

        h.compute.list_managed, h.compute.delete_instance = lagging_list, slow_delete
        h.start(make_spec(retries={"preemption": 3}))
        most = 1
        for attempt in (1, 2, 3):
            h.clock.advance(60)
            settle_deletes()
            record = h.records("bot")[0]
            if record.state != "running" or record.current_attempt.number != attempt:
                break
            h.callback("bot", record.run_id, attempt, status="preempted", exit_code=None, uploaded=False)
            most = max(most, sum(1 for i in h.compute.all_instances() if i.status in ("RUNNING", "STOPPING")))
        assert most <= 1, f"{most} VMs alive at once with max_live_vms 1"
    finally:
        entrypoints.use(None)
