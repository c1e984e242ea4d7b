"""One Compute Engine requestId per attempt's insert.

Before: a delivery held inside its insert call while a copy of the tick created the VM, ran the
job and deleted the VM landed its insert afterwards and created the same VM again (deleted a
moment later, but booted, billed its minute and its callback answered). With the attempt's
requestId, Compute Engine ignores the repeated insert for 60 minutes.
"""

from __future__ import annotations

import pytest

from spotcron.core.runs import RunState
from spotcron.engine.attempts import insert_request_id
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

RUN = "20261122-1200"
VM = "sc-bot-20261122-1200-a1"


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    entrypoints.use(None)


def test_an_insert_held_while_a_copy_ran_the_attempt_to_its_end_creates_no_second_vm(h):
    spec = make_spec()
    held = {"done": False}

    def hold_first_insert(call: str, name: str) -> bool:
        if call == "create" and not held["done"]:
            held["done"] = True
            # While this delivery's insert is in flight, a copy of the tick creates the VM, the job
            # runs and calls back, and its VM is deleted.
            assert h.start(spec).status_code == 200
            assert h.finish_ok("bot", RUN).status_code == 200
        return False

    h.compute.fault = hold_first_insert
    h.start(spec)
    h.compute.fault = None
    assert h.record("bot", RUN).state == RunState.SUCCEEDED
    assert [r.name for r in h.compute.created] == [VM]  # one VM, ever
    assert h.live_vms() == []


def test_request_ids_are_one_per_attempt_zone_and_model(h):
    spec = make_spec(on_demand_fallback=True)
    h.start(spec)
    record = h.record("bot", RUN)
    attempt = record.current_attempt
    same = insert_request_id("proj", record, attempt)
    assert same == insert_request_id("proj", record, attempt) == h.compute.created[0].request_id
    moved = attempt.model_copy(update={"zone": "us-central1-b"})
    standard = attempt.model_copy(update={"provisioning_model": "STANDARD"})
    retry = attempt.model_copy(update={"number": 2, "vm_name": "sc-bot-20261122-1200-a2"})
    ids = {insert_request_id("proj", record, a) for a in (attempt, moved, standard, retry)}
    assert len(ids) == 4
