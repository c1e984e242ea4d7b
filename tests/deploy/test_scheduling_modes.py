"""scheduling: per-job | shared — plan and apply of each mode, and switches both ways, on the fake cloud."""

from __future__ import annotations

import json

from spotcron.deploy.desired import desired_state, function_environment
from spotcron.deploy.planner import CREATE, DELETE, UPDATE
from spotcron.deploy.resources import DEPLOYED_SPEC, FUNCTION, SCHEDULER_JOB, TOPIC
from spotcron.engine.deployed import specs_version
from tests.deploy.conftest import JOBS_DIR, PROJECT, Deployer, make_settings
from tests.fakes.deploy.cloud import FakeCloud

LOCATION = f"projects/{PROJECT}/locations/us-central1"
FUNCTIONS_ACCOUNT = f"serviceAccount:spotcron-functions@{PROJECT}.iam.gserviceaccount.com"
PER_JOB = make_settings()
SHARED = make_settings(scheduling="shared")


def test_shared_mode_deploys_one_scheduler_entry_and_the_dispatcher(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs, settings=SHARED)
    entries = cloud.scheduler.entries()
    assert list(entries) == ["spotcron-dispatch"]
    entry = entries["spotcron-dispatch"]
    assert (entry["schedule"], entry["timeZone"], entry["state"]) == ("* * * * *", "Etc/UTC", "ENABLED")
    assert entry["pubsubTarget"]["topicName"] == f"projects/{PROJECT}/topics/spotcron-dispatch"
    assert json.loads(cloud.scheduler.data("spotcron-dispatch")) == {"dispatch": True, "specs": specs_version(jobs)}
    assert sorted(cloud.pubsub.topics) == [f"projects/{PROJECT}/topics/spotcron-{t}"
                                           for t in ("dispatch", "events", "start", "sweep")]
    dispatcher = cloud.functions.functions[f"{LOCATION}/functions/spotcron-dispatch"]
    assert dispatcher["buildConfig"]["entryPoint"] == "dispatch"
    assert dispatcher["eventTrigger"]["pubsubTopic"] == f"projects/{PROJECT}/topics/spotcron-dispatch"
    assert dispatcher["eventTrigger"]["retryPolicy"] == "RETRY_POLICY_DO_NOT_RETRY"
    assert dispatcher["serviceConfig"]["timeoutSeconds"] == 50
    assert cloud.functions.run_policies.members(f"{LOCATION}/services/spotcron-dispatch",
                                                "roles/run.invoker") == {FUNCTIONS_ACCOUNT}
    assert deployer.plan(jobs, SHARED).actions == []


def test_the_mode_is_not_in_the_functions_environment_so_switching_rebuilds_none() -> None:
    assert function_environment(PER_JOB, "https://x") == function_environment(SHARED, "https://x")
    per_job = desired_state(PER_JOB, [], "deploy/source-x.zip", "https://x")
    shared = desired_state(SHARED, [], "deploy/source-x.zip", "https://x")
    for name in ("spotcron-start-job", "spotcron-sweep", "spotcron-job-done"):
        assert per_job[(FUNCTION, name)] == shared[(FUNCTION, name)]


def test_switching_modes_both_ways_leaves_nothing_behind(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs, settings=PER_JOB)
    per_job_state = cloud.state()
    assert sorted(per_job_state["jobs"]) == ["spotcron-benchmark", "spotcron-bot", "spotcron-nightly",
                                             "spotcron-sweep"]

    to_shared = deployer.plan(jobs, SHARED).actions
    assert sorted((a.kind, a.resource_type, a.name) for a in to_shared if a.resource_type != "iam_policy") == [
        (CREATE, FUNCTION, "spotcron-dispatch"), (CREATE, SCHEDULER_JOB, "spotcron-dispatch"),
        (CREATE, TOPIC, "spotcron-dispatch"),
        (DELETE, SCHEDULER_JOB, "spotcron-benchmark"), (DELETE, SCHEDULER_JOB, "spotcron-bot"),
        (DELETE, SCHEDULER_JOB, "spotcron-nightly"), (DELETE, SCHEDULER_JOB, "spotcron-sweep")]
    # The dispatcher publishes starts and sweeps: only shared mode gives the functions that right.
    assert [(a.kind, a.name) for a in to_shared if a.resource_type == "iam_policy"] == [
        (UPDATE, "topic:spotcron-start"), (UPDATE, "topic:spotcron-sweep"), (UPDATE, "function:spotcron-dispatch")]
    # The new entry fires only once its function and invoker binding exist; the old entries go last.
    phases = {(a.kind, a.resource_type, a.name): a.phase for a in to_shared}
    assert phases[(CREATE, SCHEDULER_JOB, "spotcron-dispatch")] > phases[(CREATE, FUNCTION, "spotcron-dispatch")]
    assert min(p for (kind, _, _), p in phases.items() if kind == DELETE) > max(
        p for (kind, _, _), p in phases.items() if kind != DELETE)
    deployer.deploy(jobs, settings=SHARED)
    assert list(cloud.scheduler.entries()) == ["spotcron-dispatch"]
    assert deployer.plan(jobs, SHARED).actions == []

    to_per_job = deployer.plan(jobs, PER_JOB).actions
    assert sorted((a.kind, a.resource_type, a.name) for a in to_per_job) == [
        (CREATE, SCHEDULER_JOB, "spotcron-benchmark"), (CREATE, SCHEDULER_JOB, "spotcron-bot"),
        (CREATE, SCHEDULER_JOB, "spotcron-nightly"), (CREATE, SCHEDULER_JOB, "spotcron-sweep"),
        (DELETE, FUNCTION, "spotcron-dispatch"), (DELETE, SCHEDULER_JOB, "spotcron-dispatch"),
        (DELETE, TOPIC, "spotcron-dispatch")]
    deployer.deploy(jobs, settings=PER_JOB)
    back = cloud.state()
    assert back["jobs"] == per_job_state["jobs"]
    assert (back["topics"], back["functions"], back["accounts"]) == (
        per_job_state["topics"], per_job_state["functions"], per_job_state["accounts"])
    assert deployer.plan(jobs, PER_JOB).actions == []


def test_a_changed_job_in_shared_mode_changes_only_the_dispatch_entry(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs, settings=SHARED)
    changed = [job.model_copy(update={"schedule": "7 * * * *"}) if job.name == "bot" else job for job in jobs]
    actions = deployer.plan(changed, SHARED).actions
    assert [(a.kind, a.resource_type, a.name, sorted(a.changes)) for a in actions] == [
        (UPDATE, DEPLOYED_SPEC, "deployed/bot.json", ["digest"]),  # the spec the dispatcher reads
        (UPDATE, SCHEDULER_JOB, "spotcron-dispatch", ["data"])]


def test_a_paused_job_in_shared_mode_needs_no_entry_of_its_own(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    assert any(job.paused for job in jobs)  # nightly: the dispatcher skips it
    desired = desired_state(SHARED, jobs, "deploy/source-x.zip", "")
    assert [name for kind, name in desired if kind == SCHEDULER_JOB] == ["spotcron-dispatch"]
