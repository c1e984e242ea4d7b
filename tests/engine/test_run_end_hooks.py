"""Run-end hooks are owed one by one: a failing hook is retried on its own, its failure recorded
on the run, and never makes the hooks that succeeded run again."""

from __future__ import annotations

from spotcron.core.runs import Effect, hook_entry
from spotcron.engine.deployed import SpecStore
from spotcron.engine.hooks import RunEndHook
from spotcron.testing.harness import make_spec

RUN = "20261122-1200"


class Flaky:
    def __init__(self, failures: int):
        self.failures = failures
        self.calls = 0

    def __call__(self, deps, record) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError(f"receiver down (call {self.calls})")


def ended_run(h):
    h.start(make_spec())
    h.clock.advance(60)
    assert h.finish_ok("bot", RUN).status_code == 200
    return h.record("bot", RUN)


def test_a_failing_hook_is_retried_alone_and_its_failure_is_recorded_on_the_run(h):
    good: list[str] = []
    flaky = Flaky(failures=2)
    h.deps.on_run_end.extend([RunEndHook("page", lambda deps, record: good.append(record.run_id)),
                              RunEndHook("notify", flaky)])
    record = ended_run(h)
    assert record.state == "succeeded"
    assert record.owed == (hook_entry("notify"),), "only the failing hook stays owed"
    failure = record.effect_failures[hook_entry("notify")]
    assert failure.tries == 1 and "receiver down (call 1)" in failure.error and not failure.gave_up
    assert good == [RUN]
    for _ in range(2):
        h.clock.advance(h.settings.sweep_interval)
        assert h.sweep().status_code == 200
    record = h.record("bot", RUN)
    assert record.owed == () and flaky.calls == 3
    assert record.effect_failures[hook_entry("notify")].tries == 2  # two failures, then done
    assert good == [RUN], "the hook that succeeded never ran again"
    assert len(h.events.of_type("run.finished")) == 1


def test_a_hook_that_keeps_failing_is_given_up_and_says_so(h):
    h.deps.on_run_end.append(RunEndHook("notify", Flaky(failures=1000), max_tries=3))
    ended_run(h)
    for _ in range(5):
        h.clock.advance(h.settings.sweep_interval)
        h.sweep()
    record = h.record("bot", RUN)
    assert record.owed == ()
    failure = record.effect_failures[hook_entry("notify")]
    assert failure.gave_up and failure.tries == 3


def test_hooks_apply_per_run_and_a_record_ended_before_naming_them_splits_its_hooks_entry(h):
    calls: list[str] = []
    h.deps.on_run_end.extend([
        RunEndHook("a", lambda deps, record: calls.append("a")),
        RunEndHook("b", Flaky(failures=1)),
        RunEndHook("never", lambda deps, record: calls.append("never"), applies=lambda record: False)])
    # A trigger arriving past its starting_deadline: the run is created already skipped, owing `hooks`.
    h.start(make_spec(), publish_time=h.clock.now())
    late = make_spec(name="late", schedule="0 12 * * *", starting_deadline="5m")
    SpecStore(h.blobs).write(late)  # deployed before its 12:00 tick's start arrives, an hour late
    h.clock.advance(3600)
    h.start(late, publish_time=h.clock.now())
    record = h.record("late", RUN)
    assert record.state == "skipped" and Effect.HOOKS not in record.owed
    assert record.owed == (hook_entry("b"),) and calls.count("a") == 1
    h.clock.advance(h.settings.sweep_interval)
    h.sweep()
    assert h.record("late", RUN).owed == () and "never" not in calls
