"""`alerts: {failed_runs: true}`: deploy creates one Cloud Monitoring alert policy on the failed runs'
log entries (docs/results.md), puts it back when changed by hand, and removes it when turned off.

Request shapes are checked by the fake Monitoring API against the AlertPolicy resource
(tests/fakes/deploy/monitoring.py)."""

from __future__ import annotations

import pytest

from spotcron.core.errors import ConfigError
from spotcron.core.settings import AlertSettings, load_settings
from spotcron.deploy.alerts import FAILED_RUNS_FILTER, FAILED_RUNS_POLICY
from spotcron.deploy.planner import CREATE, DELETE, UPDATE
from tests.deploy.conftest import JOBS_DIR, PROJECT, Deployer, make_settings
from tests.fakes.deploy.cloud import FakeCloud

CHANNEL = f"projects/{PROJECT}/notificationChannels/123"


def alerting(**fields):
    return make_settings(alerts=AlertSettings(failed_runs=True, notification_channels=(CHANNEL,), **fields))


def test_deploy_creates_one_log_based_alert_policy_on_failed_runs(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    [create] = [a for a in deployer.plan(jobs, alerting()).actions if a.resource_type == "alert_policy"]
    assert create.kind == CREATE and create.name == FAILED_RUNS_POLICY
    deployer.deploy(jobs, settings=alerting())
    [policy] = cloud.monitoring.policies.values()
    assert policy["displayName"] == FAILED_RUNS_POLICY and policy["userLabels"] == {"spotcron": "1"}
    [condition] = policy["conditions"]
    assert condition["conditionMatchedLog"]["filter"] == FAILED_RUNS_FILTER
    assert 'jsonPayload.event="run.ended"' in FAILED_RUNS_FILTER and '"missed"' in FAILED_RUNS_FILTER
    assert policy["notificationChannels"] == [CHANNEL]
    assert policy["alertStrategy"] == {"notificationRateLimit": {"period": "3600s"}}
    assert [a for a in deployer.plan(jobs, alerting()).actions if a.resource_type == "alert_policy"] == []


def test_a_policy_changed_by_hand_is_put_back_and_turning_alerts_off_deletes_it(deployer: Deployer,
                                                                                cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs, settings=alerting())
    [name] = cloud.monitoring.policies
    cloud.monitoring.policies[name]["notificationChannels"] = []
    [update] = [a for a in deployer.plan(jobs, alerting(rate_limit="30m")).actions if a.resource_type == "alert_policy"]
    assert update.kind == UPDATE and set(update.changes) == {"channels", "rate_limit_s"}
    deployer.deploy(jobs, settings=alerting(rate_limit="30m"))
    assert cloud.monitoring.policies[name]["notificationChannels"] == [CHANNEL]
    assert cloud.monitoring.policies[name]["alertStrategy"]["notificationRateLimit"]["period"] == "1800s"
    [delete] = [a for a in deployer.plan(jobs).actions if a.resource_type == "alert_policy"]
    assert delete.kind == DELETE
    deployer.deploy(jobs)
    assert cloud.monitoring.policies == {}


def test_policies_that_are_not_ours_are_left_alone(deployer: Deployer, cloud: FakeCloud) -> None:
    cloud.monitoring.policies[f"projects/{PROJECT}/alertPolicies/1"] = {
        "name": f"projects/{PROJECT}/alertPolicies/1", "displayName": "spotcron-lookalike", "combiner": "OR",
        "conditions": [{"displayName": "x", "conditionMatchedLog": {"filter": "severity>=ERROR"}}]}
    assert [a for a in deployer.plan(deployer.jobs(JOBS_DIR)).actions if a.resource_type == "alert_policy"] == []


def test_a_bad_channel_name_is_refused_with_an_example(tmp_path) -> None:
    stack = tmp_path / "stack.yaml"
    stack.write_text("alerts: {failed_runs: true, notification_channels: [me@example.com]}\n")
    with pytest.raises(ConfigError) as error:
        load_settings(stack, {})
    assert "is not a notification channel name like projects/my-project/notificationChannels/" in str(error.value)


def test_destroy_deletes_our_policy_first() -> None:
    from spotcron.deploy.destroy import plan_destroy
    from spotcron.deploy.naming import Names
    from spotcron.deploy.resources import ALERT_POLICY, SCHEDULER_JOB, Resource, index

    actual = index([Resource(ALERT_POLICY, FAILED_RUNS_POLICY, {}, owned=True, meta={"name": "projects/p/x/1"}),
                    Resource(ALERT_POLICY, "someone-elses", {}, owned=False),
                    Resource(SCHEDULER_JOB, "spotcron-sweep", {}, owned=True)])
    plan = plan_destroy(actual, Names.of(make_settings()), delete_results=False)
    assert [(a.resource_type, a.name) for a in plan.actions][:1] == [("alert_policy", FAILED_RUNS_POLICY)]
    assert ("alert_policy", "someone-elses") not in [(a.resource_type, a.name) for a in plan.actions]


def test_a_project_where_monitoring_does_not_answer_deploys_without_alerts_and_says_so_with_them(
        deployer: Deployer, cloud: FakeCloud) -> None:
    from spotcron.core.errors import SpotcronError

    cloud.monitoring.project = "someone-else"  # every call answers 403, as with the API not enabled
    jobs = deployer.jobs(JOBS_DIR)
    assert [a for a in deployer.plan(jobs).actions if a.resource_type == "alert_policy"] == []
    with pytest.raises(SpotcronError, match="list alert policies"):
        deployer.plan(jobs, alerting())


def test_the_stacks_notify_reaches_the_functions_and_an_unset_one_adds_nothing() -> None:
    from spotcron.core.notify_spec import Notify
    from spotcron.deploy.desired import function_environment

    assert "SPOTCRON_NOTIFY" not in function_environment(make_settings(), "https://job-done")
    assert "SPOTCRON_ALERTS" not in function_environment(alerting(), "https://job-done")  # deploy's only
    settings = make_settings(notify=Notify(webhook={"secret": "team-hook"}, on=["failure", "success"]))
    env = function_environment(settings, "https://job-done")
    back = load_settings(None, env, required=("project", "bucket"))
    assert back.notify == settings.notify and back.notify.webhook.secret == "team-hook"
