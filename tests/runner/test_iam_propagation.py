"""The first runs after a deploy: the VM account's invoker grants on the credentials broker and
job_done are minutes old, and Google applies a new grant "typically [in] 2 minutes, potentially
7 minutes or longer" (https://cloud.google.com/iam/docs/access-change-propagation). Until then
Cloud Run answers the VM 403. The runner waits such a 403 out for IAM_WAIT seconds after it
started, with a line saying so; after that a 403 is final."""

from __future__ import annotations

import pytest

from tests.runner.harness import RunnerHarness, needs_runner_tools

pytestmark = [pytest.mark.slow, needs_runner_tools]

ATTEMPT1 = "runs/hello/20260101-1000/attempt-1/"


def test_a_403_from_the_broker_is_waited_out_and_the_outputs_still_go_up(harness: RunnerHarness):
    harness.broker.deny_first = 8  # more than SPOTCRON_RETRIES (3): the short retry alone gives up
    result = harness.run(harness.descriptor())

    assert result.rc == 0, result.stderr
    assert harness.broker.denied == 8 and harness.broker.issued
    assert "HTTP 403 from the credentials broker: waiting up to" in result.stderr
    assert "invoker grant to take effect" in result.stderr
    assert harness.bucket.read(ATTEMPT1 + "manifest.json") is not None
    [call] = harness.receiver.accepted
    assert call.body["uploaded"] is True


def test_a_403_from_job_done_is_waited_out_and_the_outcome_delivered(harness: RunnerHarness):
    harness.receiver.deny_first = 8
    result = harness.run(harness.descriptor())

    assert result.rc == 0, result.stderr
    assert [c.status for c in harness.receiver.calls] == [403] * 8 + [200]
    assert "HTTP 403 from job_done: waiting up to" in result.stderr


def test_after_the_wait_a_403_is_final(harness: RunnerHarness):
    harness.extra_env["SPOTCRON_IAM_WAIT"] = "0"
    harness.receiver.deny_first = 100
    result = harness.run(harness.descriptor())

    assert result.rc == 1
    assert len(harness.receiver.calls) == 1  # a 403 is not one of the short retry's answers
    assert "waiting up to" not in result.stderr
    assert "could not report to" in result.stderr
