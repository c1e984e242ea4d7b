"""Each attempt tries every allowed zone before its run fails for capacity: a retry after a
preemption starts one zone further down, wraps around, and tries the zone that lost its VM last;
the failure names exactly the zones the attempt tried."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core import layout
from spotcron.core.errors import CreateFailed
from spotcron.core.runs import RunState
from spotcron.core.zone_advice import Advice, ZoneAdvice
from spotcron.engine import transitions
from spotcron.engine.placement import attempt_order
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

NOW = datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC)
RUN = "20261122-1200"
A, B, C = "us-central1-a", "us-central1-b", "us-central1-c"  # the harness's zones, in order
STOCKOUT = CreateFailed(CreateFailed.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED")


@pytest.fixture
def h():
    harness = Harness(NOW)
    yield harness
    harness.close()
    entrypoints.use(None)


def preempted_in_b(h: Harness, **spec) -> None:
    """Attempt 1 stocks out in a, runs in b and is preempted there ten minutes later."""
    job = make_spec(name="job", schedule="0 12 * * *", retries={"preemption": 2}, **spec)
    h.compute.fail_create(STOCKOUT, zone=A)
    assert h.start(job).status_code == 200
    record = h.record("job", RUN)
    assert record.state == RunState.RUNNING and record.attempts[0].zone == B
    h.clock.advance(600)


def inserts_of(h: Harness, attempt: int) -> list[tuple[str, bool]]:
    """(zone, Spot) of every insert Compute Engine was asked for, for `attempt`: refused ones too."""
    return [(r.zone, r.spot) for r in h.compute.inserts if r.labels.get("attempt") == str(attempt)]


# --- the order ------------------------------------------------------------------------------------

def test_a_first_attempt_tries_the_zones_in_the_runs_order():
    assert attempt_order((A, B, C)) == (A, B, C)


def test_after_a_preemption_the_order_starts_one_zone_further_down_and_wraps_around():
    assert attempt_order((A, B, C), lost_in=A) == (B, C, A)
    assert attempt_order((A, B, C), lost_in=B) == (C, A, B)
    assert attempt_order((A, B, C), lost_in=C) == (A, B, C)


def test_zones_advice_calls_unlikely_come_after_the_rest_and_the_lost_zone_last():
    assert attempt_order((A, B, C), unlikely=frozenset({A})) == (B, C, A)
    assert attempt_order((A, B, C), lost_in=A, unlikely=frozenset({B})) == (C, B, A)
    assert attempt_order((A, B, C), lost_in=B, unlikely=frozenset({B, C})) == (A, C, B)


def test_a_lost_zone_outside_the_order_changes_nothing():
    assert attempt_order((A, B), lost_in=C) == (A, B)


# --- through the handlers ---------------------------------------------------------------------------

def test_a_retry_after_a_preemption_tries_every_zone_before_failing_for_capacity(h):
    preempted_in_b(h)
    h.compute.fail_create(STOCKOUT, zone=C)  # the retry's first zone is out: one stockout
    assert h.callback("job", RUN, 1, status="preempted", exit_code=None).status_code == 200
    record = h.record("job", RUN)
    assert record.state == RunState.RUNNING, record.reason
    assert record.current_attempt.zone == A
    assert inserts_of(h, 2) == [(C, True), (A, True)]


def test_a_retry_that_stocks_out_everywhere_names_exactly_the_zones_it_tried(h):
    preempted_in_b(h)
    h.compute.fail_create(STOCKOUT, times=3)
    assert h.callback("job", RUN, 1, status="preempted", exit_code=None).status_code == 200
    record = h.record("job", RUN)
    assert record.state == RunState.FAILED
    assert inserts_of(h, 2) == [(C, True), (A, True), (B, True)]
    assert record.reason.startswith(f"no Spot capacity for e2-small in {C}, {A}, {B} (")
    assert record.current_attempt.zone_order == (C, A, B)


def test_the_on_demand_fallback_of_a_retry_also_goes_through_every_zone(h):
    preempted_in_b(h, on_demand_fallback=True)
    h.compute.fail_create(STOCKOUT, times=5)
    assert h.callback("job", RUN, 1, status="preempted", exit_code=None).status_code == 200
    record = h.record("job", RUN)
    assert record.state == RunState.RUNNING and record.current_attempt.provisioning_model == "STANDARD"
    assert inserts_of(h, 2) == [(C, True), (A, True), (B, True), (C, False), (A, False), (B, False)]


def test_a_record_without_the_attempts_order_works_it_out_again(h):
    preempted_in_b(h)
    h.compute.fail_create(STOCKOUT, zone=C)
    h.callback("job", RUN, 1, status="preempted", exit_code=None)
    record = h.record("job", RUN)
    written = record.current_attempt
    bare = written.model_copy(update={"zone_order": ()})
    spec = transitions.spec_of(record)
    assert transitions.attempt_zones(record, spec, h.settings.zones, bare) == written.zone_order == (C, A, B)


def test_a_placed_retry_tries_the_unlikely_zones_and_then_the_lost_one_last():
    zones = {"us-west4": ["us-west4-a", "us-west4-b", "us-west4-c"]}
    harness = Harness(NOW, placement={"regions": ["us-west4"], "zones": zones, "image_gb": 0.0, "results_gb": 0.0})
    try:
        said = {"us-west4-a": ZoneAdvice(spot_hourly=0.001, preemption_rate=0.0, obtainability=0.9),
                "us-west4-b": ZoneAdvice(spot_hourly=0.002, preemption_rate=0.0, obtainability=0.9),
                "us-west4-c": ZoneAdvice(spot_hourly=0.0005, preemption_rate=0.0, obtainability=0.1)}
        harness.blobs.write(layout.ADVICE, Advice(fetched_at=NOW, machines={"e2-small": said}).to_json())
        harness.start(make_spec(name="job", schedule="0 12 * * *", retries={"preemption": 1}, regions=["us-west4"]))
        record = harness.record("job", RUN)
        assert record.placement.zones == ("us-west4-a", "us-west4-b", "us-west4-c")  # c: unlikely, tried last
        assert record.current_attempt.zone == "us-west4-a"
        harness.clock.advance(600)
        harness.compute.fail_create(STOCKOUT, times=3)
        harness.callback("job", RUN, 1, status="preempted", exit_code=None)
        record = harness.record("job", RUN)
        assert [r.zone for r in harness.compute.inserts if r.labels.get("attempt") == "2"] == [
            "us-west4-b", "us-west4-c", "us-west4-a"]
        assert record.state == RunState.FAILED
        assert "in us-west4-b, us-west4-c, us-west4-a (" in record.reason
    finally:
        harness.close()
        entrypoints.use(None)
