"""A start that died right after its insert, then a deploy that pauses (or edits) the job, then
Pub/Sub's redelivery or the sweep. Whoever would end the run as getting no VM (its job is no
longer deployed as it ran) first asks Compute Engine for the attempt's VM by name: the VM the dead
delivery made is adopted and runs the spec it was made from, as any VM made before a deploy does.
The run is never recorded `skipped` while its VM runs the job; the VM's hours are counted, its
callback decides the run, and `concurrency: forbid` sees it live."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core.runs import RunState
from spotcron.core.settings import Limits
from spotcron.engine.day_hours import read_day
from spotcron.engine.deployed import SpecStore, start_message
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec
from tests.engine.crash_helpers import call_dying, die_after, disarm

DAY = "2026-11-22"
RUN = "20261122-1200"
VM = f"sc-bot-{RUN}-a1"


@pytest.fixture
def h():
    harness = Harness(datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC), limits=Limits(max_vm_hours_per_day=5))
    yield harness
    entrypoints.use(None)


def _started_then_paused(h):
    bot = make_spec(name="bot", schedule="0 12 * * *", timeout="50m")
    published = h.clock.now()
    die_after(h, "compute", "create")  # the insert lands; the handler dies before recording it
    assert call_dying(lambda: h.start(bot, publish_time=published)) is None
    disarm(h)
    assert VM in h.live_vms()
    SpecStore(h.blobs).write(bot.model_copy(update={"paused": True}))  # `spotcron pause bot`
    h.clock.advance(20)
    # Pub/Sub redelivers the start the dead handler never answered.
    assert h.functions.start(start_message(bot), published, {}, None).status_code == 200
    return bot


def test_a_run_whose_vm_exists_is_not_recorded_as_never_having_one(h):
    _started_then_paused(h)
    h.clock.advance(300)
    assert h.sweep().status_code == 200
    record = h.record("bot", RUN)
    vm = h.compute.peek_any(VM)
    assert vm is not None and vm.status == "RUNNING"  # the container is running the job
    assert record.attempts[0].created_at is not None or record.state not in (RunState.SKIPPED, RunState.CANCELLED), \
        f"run ended {record.state} ({record.reason}) while its VM {VM} runs the job"


def test_its_vm_hours_are_counted(h):
    _started_then_paused(h)
    h.clock.advance(300)
    assert h.sweep().status_code == 200  # the sweep takes the run up and adopts its VM
    h.clock.advance(300)
    assert h.sweep().status_code == 200  # a VM inside its deadline is left to run
    assert h.compute.peek_any(VM).status == "RUNNING"
    assert h.finish_ok("bot", RUN).status_code == 200  # the container ends and calls back
    assert h.compute.peek_any(VM) is None or h.compute.peek_any(VM).status != "RUNNING"
    record = h.record("bot", RUN)
    assert record.state == RunState.SUCCEEDED, f"the job succeeded on its VM but the run is {record.state}"
    usage = read_day(h.blobs, DAY)
    assert usage.used.get(VM, 0.0) > 0, f"{VM} ran ~10 minutes; the day settled {usage.used.get(VM)} h for it"


def test_a_redeploy_does_not_record_a_run_with_a_live_vm_as_never_having_one(h):
    """The same with `spotcron deploy` of an edit (another image) instead of a pause: the
    redelivery itself (a start naming the old digest runs the spec deployed now) finds the VM."""
    bot = make_spec(name="bot", schedule="0 12 * * *", timeout="50m")
    published = h.clock.now()
    die_after(h, "compute", "create")
    assert call_dying(lambda: h.start(bot, publish_time=published)) is None
    disarm(h)
    SpecStore(h.blobs).write(bot.model_copy(update={"image": "us-docker.pkg.dev/p/r/other:2"}))
    h.clock.advance(20)
    assert h.functions.start(start_message(bot), published, {}, None).status_code == 200
    record = h.record("bot", RUN)
    vm = h.compute.peek_any(VM)
    assert vm is not None and vm.status == "RUNNING"
    assert record.attempts[0].created_at is not None or record.state not in (RunState.SKIPPED, RunState.CANCELLED), \
        f"run ended {record.state} ({record.reason}) while its VM {VM} runs the job"


def test_forbid_is_kept_when_a_run_with_a_live_vm_would_be_withdrawn(h):
    """`concurrency: forbid`: the run whose VM the redelivery found is live when the next tick
    comes, so that tick is skipped rather than started beside the VM."""
    from spotcron.engine.ports import ALIVE_STATUSES

    bot = make_spec(name="bot", schedule="* * * * *", timeout="50m", concurrency="forbid")
    published = h.clock.now()
    die_after(h, "compute", "create")
    assert call_dying(lambda: h.start(bot, publish_time=published)) is None
    disarm(h)
    edited = bot.model_copy(update={"image": "us-docker.pkg.dev/p/r/other:2"})
    SpecStore(h.blobs).write(edited)
    h.clock.advance(20)
    assert h.functions.start(start_message(bot), published, {}, None).status_code == 200
    assert h.record("bot", RUN).state == RunState.RUNNING
    h.clock.set(datetime(2026, 11, 22, 12, 1, 5, tzinfo=UTC))
    assert h.start(edited).status_code == 200  # the 12:01 tick, before the 12:05 sweep reaps the old VM
    alive = sorted(i.name for i in h.compute.all_instances() if i.status in ALIVE_STATUSES)
    assert len(alive) <= 1, f"forbid job bot has {alive} running at once"


def test_a_vm_the_list_does_not_show_yet_is_found_by_its_name(h):
    """A list may lag behind a create; a get by name does not. The redelivery 20 s after the
    dead start's insert, with the job edited meanwhile, finds the VM the list leaves out."""
    h.compute.list_lag_s = 120
    bot = make_spec(name="bot", schedule="0 12 * * *", timeout="50m")
    published = h.clock.now()
    die_after(h, "compute", "create")
    assert call_dying(lambda: h.start(bot, publish_time=published)) is None
    disarm(h)
    SpecStore(h.blobs).write(bot.model_copy(update={"image": "us-docker.pkg.dev/p/r/other:2"}))
    h.clock.advance(20)
    assert VM not in [i.name for i in h.compute.list_managed()]
    assert h.functions.start(start_message(bot), published, {}, None).status_code == 200
    record = h.record("bot", RUN)
    assert record.state == RunState.RUNNING and record.attempts[0].created_at is not None


def test_a_vm_of_that_name_that_is_not_this_attempts_is_not_adopted(h):
    """Only a managed VM labelled with this run and attempt is the attempt's: anything else under
    the name is left alone, and the run is withdrawn as one that never got a VM."""
    from spotcron.engine.found_vm import adopt_found_vm
    from spotcron.engine.ports import Instance

    bot = make_spec(name="bot", schedule="0 12 * * *", timeout="50m")
    die_after(h, "compute", "list")  # the start dies before its insert: no VM of its own
    assert call_dying(lambda: h.start(bot)) is None
    disarm(h)
    record = h.record("bot", RUN)
    assert record.state == RunState.STARTING and VM not in h.live_vms()
    for labels in ({"team": "data"}, {"spotcron": "1", "job": "bot", "run": "20261122-1100", "attempt": "1"},
                   {"spotcron": "1", "job": "bot", "run": RUN, "attempt": "2"}):
        h.compute.add_foreign(Instance(name=VM, zone="us-central1-a", status="RUNNING", labels=labels,
                                       machine_type="e2-small", provisioning_model="STANDARD",
                                       created_at=h.clock.now()))
        assert adopt_found_vm(h.deps, record) is None, labels
    SpecStore(h.blobs).write(bot.model_copy(update={"paused": True}))
    h.clock.advance(300)
    assert h.sweep().status_code == 200
    assert h.record("bot", RUN).state == RunState.SKIPPED
