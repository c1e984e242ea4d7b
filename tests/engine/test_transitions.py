"""engine/transitions.py as a table: every (state, event) pair, and what it becomes or why it is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spotcron.core.runs import Attempt, Outcome, RunRecord, RunState, StateChange
from spotcron.engine import transitions
from spotcron.testing.harness import make_spec

NOW = datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC)
LATER = NOW + timedelta(minutes=3)
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
SPEC = make_spec(retries={"preemption": 1, "failure": 1})


def attempt(number: int = 1, zone: str = "us-central1-a", **changes) -> Attempt:
    return Attempt(number=number, vm_name=f"sc-bot-20261122-1200-a{number}", zone=zone,
                   machine_type="e2-small", **changes)


def record(state: RunState, *attempts: Attempt) -> RunRecord:
    return RunRecord(job="bot", run_id="20261122-1200", tick=NOW.replace(second=0), created_at=NOW,
                     updated_at=NOW, state=state, history=(StateChange(state=state, at=NOW),),
                     attempts=attempts, spec=SPEC.to_payload(), deadline=NOW + timedelta(minutes=20))


A1 = attempt()
A1_RUNNING = attempt(created_at=NOW, instance_id="7")
SCHEDULED = record(RunState.SCHEDULED)
STARTING = record(RunState.STARTING, A1)
RUNNING = record(RunState.RUNNING, A1_RUNNING)
TERMINALS = [record(state, attempt(outcome=Outcome.EXITED)) for state in
             (RunState.SUCCEEDED, RunState.FAILED, RunState.TIMED_OUT, RunState.PREEMPTED, RunState.LOST,
              RunState.SKIPPED, RunState.CANCELLED)]


def report(**fields) -> transitions.AttemptReported:
    values = dict(number=1, status="exited", exit_code=0, timed_out=False, uploaded=True, manifest_present=True,
                  started_at=NOW, finished_at=LATER, zone="us-central1-a", zones=ZONES)
    values.update(fields)
    return transitions.AttemptReported(**values)


def gone(manifest: transitions.ManifestFacts | None = None, past_deadline: bool = False, number: int = 1) -> transitions.VmGone:
    return transitions.VmGone(number=number, manifest=manifest, past_deadline=past_deadline, zones=ZONES)


CREATED = transitions.VmCreated(attempt=A1, zone="us-central1-a", created_at=NOW, provisioning_model="SPOT",
                      instance_id="7", deadline=NOW + timedelta(minutes=20))

# (name, record, event, expected state or None for a refusal, expected reason fragment)
TABLE = [
    ("begin", SCHEDULED, transitions.Begin(A1), RunState.STARTING, None),
    ("begin-twice", STARTING, transitions.Begin(A1), None, "already starting"),
    ("skip", SCHEDULED, transitions.Skip("missed: late"), RunState.SKIPPED, "missed: late"),
    ("skip-running", RUNNING, transitions.Skip("missed"), None, "already running"),
    ("claim", STARTING, transitions.Claim(A1), RunState.STARTING, None),
    ("claim-moved-on", STARTING, transitions.Claim(attempt(zone="us-central1-b")), None, "no longer"),
    ("move", STARTING, transitions.MoveAttempt(A1, attempt(zone="us-central1-b")), RunState.STARTING, None),
    ("move-after-running", RUNNING, transitions.MoveAttempt(A1, attempt(zone="us-central1-b")), None, "no longer"),
    ("created", STARTING, CREATED, RunState.RUNNING, None),
    ("created-twice", RUNNING, CREATED, None, "no longer"),
    ("refused", STARTING, transitions.CreateRefused(A1, "QUOTA_EXCEEDED"), RunState.FAILED, "QUOTA_EXCEEDED"),
    ("refused-other-zone", STARTING, transitions.CreateRefused(attempt(zone="us-central1-c"), "x"), None, "no longer"),
    ("stuck-scheduled", SCHEDULED, transitions.Stuck(seen_at=NOW, reason="stuck"), RunState.FAILED, "stuck"),
    ("stuck-starting", STARTING, transitions.Stuck(seen_at=NOW, reason="stuck"), RunState.FAILED, "stuck"),
    ("stuck-but-running", RUNNING, transitions.Stuck(seen_at=NOW, reason="stuck"), None, "now running"),
    ("stuck-but-changed", STARTING, transitions.Stuck(seen_at=NOW - timedelta(minutes=11), reason="stuck"), None,
     "changed since"),
    ("fail", RUNNING, transitions.Fail("unlabelled VM"), RunState.FAILED, "unlabelled VM"),
    ("replaced", RUNNING, transitions.Replaced(by="20261122-1600"), RunState.FAILED, "replaced by run 20261122-1600"),
    ("cancel", RUNNING, transitions.Cancel("the local stack was stopped"), RunState.CANCELLED, "stack was stopped"),
    ("cancel-starting", STARTING, transitions.Cancel("stopped"), RunState.CANCELLED, "stopped"),
    ("exited-0", RUNNING, report(), RunState.SUCCEEDED, None),
    ("exited-0-no-manifest", RUNNING, report(manifest_present=False), RunState.STARTING, "no manifest"),
    ("exited-1", RUNNING, report(exit_code=1), RunState.STARTING, "exited with code 1; retrying"),
    ("timed-out", RUNNING, report(timed_out=True, exit_code=137), RunState.TIMED_OUT, "past its timeout"),
    ("preempted", RUNNING, report(status="preempted", exit_code=None), RunState.STARTING, "preempted; retrying"),
    ("report-unknown-attempt", RUNNING, report(number=2), None, "no attempt 2"),
    ("report-twice", record(RunState.SUCCEEDED, attempt(outcome=Outcome.EXITED)), report(), None,
     "already reported"),
    ("gone-no-manifest", RUNNING, gone(), RunState.STARTING, "vanished without calling back"),
    ("gone-manifest-0", RUNNING, gone(transitions.ManifestFacts(exit_code=0, timed_out=False)), RunState.SUCCEEDED, None),
    ("gone-manifest-2", RUNNING, gone(transitions.ManifestFacts(exit_code=2, timed_out=False)), RunState.STARTING,
     "code 2 (callback lost)"),
    ("gone-manifest-timed-out", RUNNING, gone(transitions.ManifestFacts(exit_code=137, timed_out=True)),
     RunState.TIMED_OUT, "callback lost"),
    ("gone-past-deadline", RUNNING, gone(past_deadline=True), RunState.TIMED_OUT, "outlived its deadline"),
    ("gone-while-starting", STARTING, gone(), None, "no longer the running one"),
    ("gone-old-attempt", RUNNING, gone(number=2), None, "no longer the running one"),
]
TABLE += [(f"{event}-after-{r.state}", r, ev, None, "already") for r in TERMINALS
          for event, ev in (("fail", transitions.Fail("x")), ("cancel", transitions.Cancel("x")), ("replaced", transitions.Replaced(by="y")))]


@pytest.mark.parametrize(("name", "before", "event", "state", "reason"), TABLE, ids=[row[0] for row in TABLE])
def test_transition_table(name, before, event, state, reason):
    after = transitions.apply(before, event, LATER)
    if state is None:
        assert isinstance(after, transitions.Refused), f"{name}: expected a refusal, got {after}"
        assert reason in after.why
        return
    assert isinstance(after, RunRecord), f"{name}: refused: {getattr(after, 'why', '')}"
    assert after.state == state
    assert after.updated_at == LATER
    if reason is not None:
        assert reason in (after.reason or "")
    if after.state != before.state:
        assert after.history[-1].state == state


def test_every_event_has_a_transition():
    assert set(transitions.TRANSITIONS) == set(transitions.Event.__args__)


def test_a_retry_after_a_preemption_starts_in_the_next_zone_and_keeps_the_old_attempts_facts():
    after = transitions.apply(RUNNING, report(status="preempted", exit_code=None), LATER)
    assert [a.number for a in after.attempts] == [1, 2]
    assert after.attempts[0].outcome == Outcome.PREEMPTED and after.attempts[0].deleted_at == LATER
    assert after.attempts[1].zone == "us-central1-b"


def test_retry_budgets_are_spent_then_the_run_ends():
    once = transitions.apply(RUNNING, report(status="preempted", exit_code=None), LATER)
    running_again = transitions.apply(once, transitions.VmCreated(attempt=once.current_attempt, zone="us-central1-b", created_at=LATER,
                                             provisioning_model="SPOT", instance_id="8",
                                             deadline=LATER + timedelta(minutes=20)), LATER)
    ended = transitions.apply(running_again, gone(number=2), LATER)
    assert ended.state == RunState.LOST


def test_a_late_report_from_an_old_attempt_keeps_its_facts_not_its_verdict():
    moved_on = record(RunState.STARTING, A1_RUNNING, attempt(2, zone="us-central1-b"))
    late = transitions.apply(moved_on, report(exit_code=0), LATER)
    assert late.state == RunState.STARTING and late.current_attempt.number == 2
    assert late.attempts[0].outcome == Outcome.EXITED and late.attempts[0].exit_code == 0
    again = transitions.apply(transitions.apply(RUNNING, gone(), LATER), report(exit_code=0), LATER)
    assert isinstance(again, transitions.Refused)  # the sweep already read attempt 1 as lost; the report came too late


def test_a_success_points_at_its_attempts_results():
    after = transitions.apply(RUNNING, report(), LATER)
    assert after.results_prefix == "runs/bot/20261122-1200/attempt-1/"
    assert after.exit_code == 0


@pytest.mark.parametrize(("outcome", "exit_code", "complete", "callback", "state"), [
    (Outcome.PREEMPTED, None, False, True, RunState.PREEMPTED),
    (Outcome.LOST, None, False, False, RunState.LOST),
    (Outcome.TIMED_OUT, 137, True, True, RunState.TIMED_OUT),
    (Outcome.TIMED_OUT, None, False, False, RunState.TIMED_OUT),
    (Outcome.EXITED, 3, True, True, RunState.FAILED),
    (Outcome.EXITED, 0, False, True, RunState.FAILED),
    (Outcome.EXITED, None, True, False, RunState.FAILED),
    (Outcome.EXITED, 0, True, False, RunState.SUCCEEDED),
])
def test_the_verdict(outcome, exit_code, complete, callback, state):
    assert transitions.verdict(outcome, exit_code, complete=complete, callback=callback)[0] == state


def test_a_state_given_as_text_becomes_the_enum():
    """Before: with_state kept a plain string (model_copy does not validate), so the record compared
    equal yet serialized with pydantic's "Expected `enum`" warning, and `.value` failed on it."""
    ended = RUNNING.with_state("succeeded", LATER)
    assert ended.state is RunState.SUCCEEDED and ended.history[-1].state is RunState.SUCCEEDED
    with pytest.raises(ValueError, match="'finished' is not a valid RunState"):
        RUNNING.with_state("finished", LATER)


def test_a_container_that_never_started_says_so_not_code_none():
    # the runner's setup failed (GPU driver, metadata wall-off) or the container would not start
    state, reason = transitions.verdict(Outcome.EXITED, None, complete=False, callback=True)
    assert state == RunState.FAILED
    assert reason == "the container did not start, so it has no exit code; the attempt's logs say why"
    assert "None" not in transitions.verdict(Outcome.EXITED, None, complete=False, callback=False)[1]
