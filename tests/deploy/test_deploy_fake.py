"""Acceptance: deploy the example stack on the fake Google Cloud through the real clients."""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path

import pytest

from spotcron.core.spec import JobSpec
from spotcron.deploy.apply import DeployFailed
from spotcron.deploy.planner import DELETE, UPDATE
from spotcron.deploy.resources import DEPLOYED_SPEC, FUNCTION, SCHEDULER_JOB, SOURCE
from spotcron.deploy.source import build_source
from spotcron.engine.deployed import digest, digest_of
from spotcron.gcp.admin.calls import REQUIRED_APIS, DeployError
from tests.deploy.conftest import BUCKET, JOBS_DIR, PROJECT, Deployer, make_source_root, quick_caller
from tests.fakes.deploy.cloud import FakeCloud

LOCATION = f"projects/{PROJECT}/locations/us-central1"
VM = f"serviceAccount:spotcron-vm@{PROJECT}.iam.gserviceaccount.com"
FUNCTIONS = f"serviceAccount:spotcron-functions@{PROJECT}.iam.gserviceaccount.com"
BUILD = f"spotcron-build@{PROJECT}.iam.gserviceaccount.com"
JOB_BUILD = f"spotcron-job-build@{PROJECT}.iam.gserviceaccount.com"


def changes(cloud: FakeCloud) -> list[tuple[str, str]]:
    """(method, path) of every call that changed something, sorted."""
    return sorted((c.method, c.path) for c in cloud.changing_calls())


def test_first_deploy_builds_the_whole_stack(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    result = deployer.deploy(jobs)

    # The APIs first; pass 1 creates everything but the scheduler entries; pass 2 gives the
    # functions job_done's URL, then creates the entries.
    assert len(result.passes) == 3 and all(p.ok for p in result.passes)
    assert {a.resource_type for a in result.passes[0].done} == {"api"}
    assert sorted(a.title for a in result.passes[2].done) == [
        "create scheduler_job spotcron-benchmark", "create scheduler_job spotcron-bot",
        "create scheduler_job spotcron-nightly", "create scheduler_job spotcron-sweep",
        "update function spotcron-credentials", "update function spotcron-job-done",
        "update function spotcron-start-job", "update function spotcron-sweep"]
    *waits, urls = deployer.reporter.notes
    assert urls == ("the functions' URLs are known now: setting SPOTCRON_JOB_DONE_URL and SPOTCRON_CREDENTIALS_URL "
                    "on the functions, then creating the scheduler entries")
    assert all(note.startswith("waiting for ") for note in waits)  # Google's propagation (the fake's delays)

    entries = cloud.scheduler.entries()
    assert sorted(entries) == ["spotcron-benchmark", "spotcron-bot", "spotcron-nightly", "spotcron-sweep"]
    assert {n: e["state"] for n, e in entries.items()} == {
        "spotcron-benchmark": "ENABLED", "spotcron-bot": "ENABLED", "spotcron-nightly": "PAUSED",
        "spotcron-sweep": "ENABLED"}
    digests = {j.name: digest(j) for j in jobs}
    for name in ("bot", "benchmark", "nightly"):
        assert json.loads(cloud.scheduler.data(f"spotcron-{name}")) == {"job": name, "digest": digests[name]}
        # The spec start_job runs is in the bucket, with the digest the message names.
        data, _ = cloud.storage.objects[(BUCKET, f"deployed/{name}.json")]
        assert digest_of(data) == digests[name]
        assert cloud.storage.custom_metadata[(BUCKET, f"deployed/{name}.json")] == {"spotcron-digest": digests[name]}
        assert entries[f"spotcron-{name}"]["pubsubTarget"]["topicName"] == f"projects/{PROJECT}/topics/spotcron-start"
    assert entries["spotcron-benchmark"]["timeZone"] == "Europe/Berlin"
    assert entries["spotcron-sweep"]["pubsubTarget"]["topicName"] == f"projects/{PROJECT}/topics/spotcron-sweep"

    assert sorted(cloud.pubsub.topics) == [f"projects/{PROJECT}/topics/spotcron-{t}" for t in ("events", "start", "sweep")]
    assert all(t["labels"] == {"spotcron": "1"} for t in cloud.pubsub.topics.values())
    assert sorted(cloud.iam.accounts) == [BUILD, f"spotcron-functions@{PROJECT}.iam.gserviceaccount.com",
                                          f"spotcron-job-build@{PROJECT}.iam.gserviceaccount.com",
                                          f"spotcron-vm@{PROJECT}.iam.gserviceaccount.com"]

    bucket = cloud.storage.buckets[BUCKET]
    assert bucket["iamConfiguration"]["uniformBucketLevelAccess"]["enabled"] is True
    assert bucket["iamConfiguration"]["publicAccessPrevention"] == "enforced"
    assert bucket["lifecycle"] == {"rule": [
        {"action": {"type": "Delete"}, "condition": {"age": 90, "matchesPrefix": ["runs/"]}},
        {"action": {"type": "Delete"}, "condition": {"age": 1, "matchesPrefix": ["tokens/"]}},
        {"action": {"type": "Delete"}, "condition": {"age": 90, "matchesPrefix": ["limits/"]}},
        {"action": {"type": "Delete"}, "condition": {"age": 8, "matchesPrefix": ["digests/"]}},
        {"action": {"type": "Delete"}, "condition": {"age": 8, "matchesPrefix": ["overrides/"]}},
        {"action": {"type": "Delete"}, "condition": {"age": 1, "matchesPrefix": ["deploy/build-"]}}]}
    assert bucket["labels"] == {"spotcron": "1"} and bucket["location"] == "US-CENTRAL1"
    assert cloud.storage.objects[(BUCKET, deployer.source.object_name)][0] == deployer.source.data

    job_done = cloud.functions.functions[f"{LOCATION}/functions/spotcron-job-done"]
    url = job_done["serviceConfig"]["uri"]
    for fn in cloud.functions.functions.values():
        assert fn["serviceConfig"]["environmentVariables"]["SPOTCRON_JOB_DONE_URL"] == url
        assert fn["serviceConfig"]["environmentVariables"]["SPOTCRON_BUCKET"] == BUCKET
        assert fn["buildConfig"]["serviceAccount"] == f"projects/{PROJECT}/serviceAccounts/{BUILD}"
        assert fn["buildConfig"]["source"]["storageSource"] == {"bucket": BUCKET, "object": deployer.source.object_name}
        assert fn["serviceConfig"]["serviceAccountEmail"] == FUNCTIONS.split(":")[1]
        assert fn["labels"] == {"spotcron": "1"}
    assert "eventTrigger" not in job_done and job_done["serviceConfig"]["ingressSettings"] == "ALLOW_ALL"

    assert deployer.plan(jobs).actions == []


def test_deployed_iam_is_least_privilege(deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR))
    project = cloud.project_policies.all()[f"projects/{PROJECT}"]
    assert {b["role"]: sorted(b["members"]) for b in project["bindings"]} == {
        "roles/owner": ["user:owner@example.com"],  # the deployer's own binding is left alone
        "roles/compute.instanceAdmin.v1": [FUNCTIONS],
        "roles/logging.logWriter": [f"serviceAccount:{BUILD}"],  # the job build account: none (its logs bucket)
        # Google's, granted when Eventarc first made its agent: deploy leaves it alone.
        "roles/eventarc.serviceAgent": ["serviceAccount:service-123456789012@gcp-sa-eventarc.iam.gserviceaccount.com"],
        # The one storage role on the project, conditional: Cloud Functions' source copy only.
        "roles/storage.objectAdmin": [f"serviceAccount:{BUILD}"],
    }  # otherwise no storage or registry role on the project: those sit on the one bucket and the one repository
    [copy] = [b for b in project["bindings"] if b["role"] == "roles/storage.objectAdmin"]
    bucket = "projects/_/buckets/gcf-v2-sources-123456789012-us-central1"
    assert copy["condition"]["expression"] == (f'resource.name == "{bucket}" || '
                                               f'resource.name.startsWith("{bucket}/objects/")')
    repository = cloud.registry.policies.all()[f"{LOCATION}/repositories/spotcron"]
    assert {b["role"]: sorted(b["members"]) for b in repository["bindings"]} == {
        "roles/artifactregistry.writer": [f"serviceAccount:{BUILD}"],  # the functions' images: no job reads them
    }
    jobs_repository = cloud.registry.policies.all()[f"{LOCATION}/repositories/spotcron-jobs"]
    assert {b["role"]: sorted(b["members"]) for b in jobs_repository["bindings"]} == {
        "roles/artifactregistry.reader": [VM],  # owners push prebuilt images here; no build writes it
    }
    built_repository = cloud.registry.policies.all()[f"{LOCATION}/repositories/spotcron-built"]
    assert {b["role"]: sorted(b["members"]) for b in built_repository["bindings"]} == {
        "roles/artifactregistry.reader": [VM],
        "roles/artifactregistry.writer": [f"serviceAccount:{JOB_BUILD}"],
    }
    run = cloud.functions.run_policies
    assert run.members(f"{LOCATION}/services/spotcron-job-done", "roles/run.invoker") == {VM}
    assert run.members(f"{LOCATION}/services/spotcron-start-job", "roles/run.invoker") == {FUNCTIONS}
    assert cloud.iam.policies.members(
        f"projects/{PROJECT}/serviceAccounts/spotcron-vm@{PROJECT}.iam.gserviceaccount.com",
        "roles/iam.serviceAccountUser") == {FUNCTIONS}
    every = [b for store in (cloud.project_policies, run, cloud.iam.policies, cloud.pubsub.policies,
                             cloud.storage.policies, cloud.registry.policies)
             for p in store.all().values() for b in p["bindings"]]
    assert not [b for b in every if b["role"] in ("roles/owner", "roles/editor", "roles/viewer")
                and any(m.startswith("serviceAccount:") for m in b["members"])]
    assert not [b for b in every if {"allUsers", "allAuthenticatedUsers"} & set(b["members"])]


def test_request_shapes(deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR))
    calls = cloud.calls()
    # The results bucket, and the job builds' logs bucket (tests/deploy/test_build_logs_bucket.py).
    [bucket] = [c for c in calls if (c.method, c.path) == ("POST", "/storage/v1/b") and c.body["name"] == BUCKET]
    assert bucket.query["project"] == PROJECT
    assert bucket.body["iamConfiguration"] == {"uniformBucketLevelAccess": {"enabled": True},
                                               "publicAccessPrevention": "enforced"}
    uploads = [c for c in calls if c.path == f"/upload/storage/v1/b/{BUCKET}/o"]
    # The source archive (only if absent: its name is its hash), the three deployed specs, their
    # digests' markers (engine/deployed.py: a start a deploy overtakes still runs) and since objects.
    assert (len(uploads), [u.query.get("ifGenerationMatch") for u in uploads].count("0")) == (10, 1), \
        [(u.query.get("ifGenerationMatch"), u.status) for u in uploads]
    [create_bot] = [c for c in calls if c.method == "POST" and c.path == f"/v1/{LOCATION}/jobs"
                    and c.body["name"].endswith("/spotcron-bot")]
    assert "state" not in create_bot.body  # output-only: paused entries are paused with :pause
    assert json.loads(base64.b64decode(create_bot.body["pubsubTarget"]["data"]))["job"] == "bot"
    # A failed publish is retried (Cloud Scheduler's default is retryCount 0: the tick is lost).
    assert create_bot.body["retryConfig"] == {"retryCount": 3, "minBackoffDuration": "10s",
                                              "maxBackoffDuration": "60s", "maxDoublings": 3}
    [pause] = [c for c in calls if c.path.endswith(":pause")]
    assert pause.path == f"/v1/{LOCATION}/jobs/spotcron-nightly:pause"
    # (The first creates of a project's first triggers are refused while Eventarc's agent is new.)
    [create_start] = [c for c in calls if c.method == "POST" and c.query.get("functionId") == "spotcron-start-job"
                      and c.status == 200]
    assert create_start.body["eventTrigger"]["serviceAccountEmail"] == FUNCTIONS.split(":")[1]
    assert create_start.body["eventTrigger"]["eventType"] == "google.cloud.pubsub.topic.v1.messagePublished"
    assert create_start.body["buildConfig"]["entryPoint"] == "start_job"
    # Pass 2 sets the URLs alone. (A function whose first build failed while the build account's
    # grants propagated is updated whole once before that: deploy runs its create again.)
    updates = [c for c in calls if c.method == "PATCH" and "/functions/" in c.path and c.status == 200]
    masks = [c.query["updateMask"] for c in updates]
    assert masks.count("serviceConfig.environmentVariables") == 4
    assert all("buildConfig.source" in m for m in masks if m != "serviceConfig.environmentVariables")


def test_no_change_plan_lists_once_per_kind(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs)
    cloud.reset_log()
    assert deployer.plan(jobs).actions == []
    assert Counter((c.api, c.method, c.path.rsplit(":", 1)[-1] if ":" in c.path else c.path)
                   for c in cloud.calls()) == Counter({
        ("serviceusage", "GET", f"/v1/projects/{PROJECT}/services"): 1,
        ("scheduler", "GET", f"/v1/{LOCATION}/jobs"): 1,
        ("functions", "GET", f"/v2/{LOCATION}/functions"): 1,
        ("pubsub", "GET", f"/v1/projects/{PROJECT}/topics"): 1,
        ("iam", "GRPC", "/google.iam.admin.v1.IAM/ListServiceAccounts"): 1,
        ("storage", "GET", f"/storage/v1/b/{BUCKET}"): 1,
        ("storage", "GET", f"/storage/v1/b/{BUCKET}/o"): 1,
        ("storage", "GET", f"/storage/v1/b/{BUCKET}/iam"): 1,
        # The job builds' logs bucket and its policy: compared whole on every deploy.
        ("storage", "GET", f"/storage/v1/b/{BUCKET}-build-logs"): 1,
        ("storage", "GET", f"/storage/v1/b/{BUCKET}-build-logs/iam"): 1,
        ("resourcemanager", "POST", "getIamPolicy"): 1,
        ("pubsub", "GET", "getIamPolicy"): 1,  # the events topic: no function publishes starts
        ("iam", "GRPC", "/google.iam.admin.v1.IAM/GetIamPolicy"): 1,
        ("run", "GET", "getIamPolicy"): 4,
        ("artifactregistry", "GET", f"/v1/{LOCATION}/repositories/spotcron"): 1,
        ("artifactregistry", "GET", f"/v1/{LOCATION}/repositories/spotcron-jobs"): 1,
        ("artifactregistry", "GET", f"/v1/{LOCATION}/repositories/spotcron-built"): 1,
        ("artifactregistry", "GET", "getIamPolicy"): 3,  # the functions' repository and the jobs' two

        # One get per rule and for the subnet: a fixed three, whatever the number of jobs.
        ("compute", "GET", f"/compute/v1/projects/{PROJECT}/global/firewalls/spotcron-deny-ingress"): 1,
        ("compute", "GET", f"/compute/v1/projects/{PROJECT}/global/firewalls/spotcron-deny-ingress-v6"): 1,
        ("compute", "GET", f"/compute/v1/projects/{PROJECT}/regions/us-central1/subnetworks/default"): 1,
        # One listing of the project's alert policies, for the one `alerts:` makes (or a left-over one).
        ("monitoring", "GET", f"/v3/projects/{PROJECT}/alertPolicies"): 1,
    })
    assert not cloud.changing_calls()


def test_many_jobs_cost_list_pages_not_gets(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = [JobSpec(name=f"job-{i:04d}", schedule="0 * * * *", image="busybox") for i in range(1001)]
    cloud.enable_apis()
    for job in jobs:  # as if deployed earlier; the plan must still read them with list calls only
        cloud.scheduler.jobs[f"{LOCATION}/jobs/spotcron-{job.name}"] = {
            "name": f"{LOCATION}/jobs/spotcron-{job.name}", "schedule": "0 * * * *", "timeZone": "Etc/UTC",
            "state": "ENABLED", "pubsubTarget": {"topicName": "projects/demo-proj/topics/spotcron-start"}}
    actions = deployer.plan(jobs).actions
    assert sum(1 for a in actions if a.resource_type == SCHEDULER_JOB) == 1002  # data and description differ
    scheduler_calls = [c for c in cloud.calls() if c.api == "scheduler"]
    assert [(c.method, c.query.get("pageSize"), c.query.get("pageToken")) for c in scheduler_calls] == [
        ("GET", "500", None), ("GET", "500", "500"), ("GET", "500", "1000")]


def test_editing_a_schedule_is_exactly_one_update(deployer: Deployer, cloud: FakeCloud, jobs_dir: Path) -> None:
    deployer.deploy(deployer.jobs(jobs_dir))
    bot = jobs_dir / "bot.yaml"
    bot.write_text(bot.read_text().replace('"0 */4 * * *"', '"15 */4 * * *"'))
    jobs = deployer.jobs(jobs_dir)
    [spec, action] = deployer.plan(jobs).actions
    assert (spec.kind, spec.resource_type, spec.name) == (UPDATE, DEPLOYED_SPEC, "deployed/bot.json")
    assert (action.kind, action.resource_type, action.name) == (UPDATE, SCHEDULER_JOB, "spotcron-bot")
    assert set(action.changes) == {"schedule", "data"}  # the message carries the spec's new digest
    cloud.reset_log()
    deployer.deploy(jobs)
    # The spec and the markers of its old and new digests (engine/deployed.py: the entry marks
    # what it will name too), then the entry's update.
    calls = cloud.changing_calls()
    uploads, patch = calls[:-1], calls[-1]
    assert 3 <= len(uploads) <= 4
    assert all((u.method, u.path) == ("POST", f"/upload/storage/v1/b/{BUCKET}/o") for u in uploads)
    assert (patch.method, patch.path) == ("PATCH", f"/v1/{LOCATION}/jobs/spotcron-bot")
    assert patch.query["updateMask"] == "pubsubTarget,schedule"
    assert cloud.scheduler.entries()["spotcron-bot"]["schedule"] == "15 */4 * * *"
    assert deployer.plan(jobs).actions == []


def test_an_entry_without_retries_gets_them_in_one_update(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs)
    cloud.scheduler.jobs[f"{LOCATION}/jobs/spotcron-bot"].pop("retryConfig")  # as an older deploy left it
    [action] = deployer.plan(jobs).actions
    assert (action.name, set(action.changes)) == ("spotcron-bot", {"retry"})
    cloud.reset_log()
    deployer.deploy(jobs)
    [patch] = cloud.changing_calls()
    assert (patch.path, patch.query["updateMask"]) == (f"/v1/{LOCATION}/jobs/spotcron-bot", "retryConfig")
    assert deployer.plan(jobs).actions == []


def test_removing_a_job_is_exactly_one_delete(deployer: Deployer, cloud: FakeCloud, jobs_dir: Path) -> None:
    deployer.deploy(deployer.jobs(jobs_dir))
    (jobs_dir / "nightly.yaml").unlink()
    jobs = deployer.jobs(jobs_dir)
    [action, spec] = deployer.plan(jobs).actions
    assert (action.kind, action.name) == (DELETE, "spotcron-nightly")
    assert (spec.kind, spec.name) == (DELETE, "deployed/nightly.json")  # after its entry: no tick is refused
    cloud.reset_log()
    deployer.deploy(jobs)
    assert changes(cloud) == [("DELETE", f"/storage/v1/b/{BUCKET}/o/deployed/nightly.json"),
                              ("DELETE", f"/v1/{LOCATION}/jobs/spotcron-nightly")]
    assert "spotcron-nightly" not in cloud.scheduler.entries()
    assert deployer.plan(jobs).actions == []


def test_pausing_and_resuming_use_the_state_calls(deployer: Deployer, cloud: FakeCloud, jobs_dir: Path) -> None:
    deployer.deploy(deployer.jobs(jobs_dir))
    nightly = jobs_dir / "nightly.yaml"
    nightly.write_text(nightly.read_text().replace("paused: true", "paused: false"))
    jobs = deployer.jobs(jobs_dir)
    [spec, action] = deployer.plan(jobs).actions
    assert spec.resource_type == DEPLOYED_SPEC and set(action.changes) == {"paused", "data"}
    cloud.reset_log()
    deployer.deploy(jobs)
    # The spec, its digest's markers (old and new, each holding its spec) and its since object; the
    # entry's marker of the new digest is written only when absent.
    assert changes(cloud) == [("PATCH", f"/v1/{LOCATION}/jobs/spotcron-nightly"),
                              *[("POST", f"/upload/storage/v1/b/{BUCKET}/o")] * 4,
                              ("POST", f"/v1/{LOCATION}/jobs/spotcron-nightly:resume")]
    assert cloud.scheduler.entries()["spotcron-nightly"]["state"] == "ENABLED"
    assert deployer.plan(jobs).actions == []


def test_failure_while_reading_changes_nothing(deployer: Deployer, cloud: FakeCloud) -> None:
    cloud.fail_after(1)  # the list of enabled APIs is read; the bucket's read fails
    with pytest.raises(DeployError, match=r"^could not read what is deployed, so nothing was changed: .*HTTP 503.*"
                                          r"\(gave up after 3 attempts\)$"):
        deployer.deploy(deployer.jobs(JOBS_DIR))
    assert not cloud.changing_calls()


@pytest.mark.parametrize("after_calls", [15, 25, 35, 45, 60])
def test_interrupted_apply_converges_when_run_again(deployer: Deployer, cloud: FakeCloud, after_calls: int) -> None:
    """The fake fails every call after K: the apply stops part-way; the next deploy finishes it."""
    jobs = deployer.jobs(JOBS_DIR)
    cloud.fail_after(after_calls)
    with pytest.raises(DeployFailed) as failed:
        deployer.deploy(jobs)
    message = str(failed.value)
    assert "HTTP 503" in message and "gave up after 3 attempts" in message
    assert message.startswith(("deploy stopped:", "applied ", "enabled the APIs, then"))
    assert message.endswith(("What succeeded stays in place; run deploy again to continue from where it stopped.",
                             "Run deploy again to check and finish."))
    assert failed.value.result.passes  # something was applied before the failure
    half = cloud.state()
    cloud.heal()
    cloud.clock.sleep(300)  # run again minutes later: Google has made the default network by then
    deployer.deploy(jobs)
    assert deployer.plan(jobs).actions == []
    full = cloud.state()
    assert sorted(full["jobs"]) == ["spotcron-benchmark", "spotcron-bot", "spotcron-nightly", "spotcron-sweep"]
    assert len(full["functions"]) == 4 and len(full["topics"]) == 3 and len(full["accounts"]) == 4
    if after_calls <= 35:  # these stop inside the first pass: the stack was really half-built
        assert half != full


def test_lost_answers_are_adopted_not_duplicated(deployer: Deployer, cloud: FakeCloud) -> None:
    """Creates that took effect but whose answer was lost: the retry meets 409 and adopts."""
    jobs = deployer.jobs(JOBS_DIR)
    cloud.enable_apis()  # enabling an API again is no conflict: the answers are lost on creates
    cloud.lose_answers(12)
    # Enough attempts that no single call can meet all 12 lost answers (which concurrent calls of a
    # phase get them depends on thread timing).
    deployer.deploy(jobs, caller=quick_caller(attempts=13))
    assert deployer.plan(jobs).actions == []
    assert len(cloud.scheduler.jobs) == 4 and len(cloud.functions.functions) == 4
    assert any(c.status == 409 for c in cloud.calls())  # the adopting path really ran


def test_new_accounts_not_yet_visible_to_iam_are_retried(deployer: Deployer, cloud: FakeCloud) -> None:
    cloud.iam.visibility_lag = 2
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs)
    refused = [c for c in cloud.calls() if c.status in (400, 404) and "Policy" in c.path]
    assert refused and all(c.path.endswith(("setIamPolicy", "/iam", "getIamPolicy")) or c.method == "GRPC"
                           for c in refused)
    assert deployer.plan(jobs).actions == []


def test_other_peoples_resources_are_never_touched(deployer: Deployer, cloud: FakeCloud) -> None:
    cloud.pubsub.topics[f"projects/{PROJECT}/topics/billing-alerts"] = {
        "name": f"projects/{PROJECT}/topics/billing-alerts"}
    cloud.scheduler.jobs[f"{LOCATION}/jobs/nightly-backup"] = {
        "name": f"{LOCATION}/jobs/nightly-backup", "schedule": "0 0 * * *", "timeZone": "UTC", "state": "ENABLED",
        "pubsubTarget": {"topicName": f"projects/{PROJECT}/topics/billing-alerts", "data": "e30="}}
    cloud.functions.functions[f"{LOCATION}/functions/their-api"] = {"name": f"{LOCATION}/functions/their-api",
                                                                    "labels": {"team": "web"}}
    deployer.deploy(deployer.jobs(JOBS_DIR))
    assert f"projects/{PROJECT}/topics/billing-alerts" in cloud.pubsub.topics
    assert "nightly-backup" in cloud.scheduler.entries()
    assert f"{LOCATION}/functions/their-api" in cloud.functions.functions
    assert not [c for c in cloud.calls() if "billing-alerts" in c.path or "nightly-backup" in c.path
                or "their-api" in c.path]


def test_lifecycle_rules_of_others_on_our_bucket_are_kept(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs)
    theirs = {"action": {"type": "Delete"}, "condition": {"age": 7, "matchesPrefix": ["exports/"]}}
    cloud.storage.buckets[BUCKET]["lifecycle"]["rule"].append(theirs)
    assert deployer.plan(jobs).actions == []
    deployer.deploy(jobs, settings=deployer.settings.model_copy(update={"results_retention_days": 30}))
    assert cloud.storage.buckets[BUCKET]["lifecycle"]["rule"] == [
        theirs, {"action": {"type": "Delete"}, "condition": {"age": 30, "matchesPrefix": ["runs/"]}},
        {"action": {"type": "Delete"}, "condition": {"age": 1, "matchesPrefix": ["tokens/"]}},
        {"action": {"type": "Delete"}, "condition": {"age": 30, "matchesPrefix": ["limits/"]}},
        {"action": {"type": "Delete"}, "condition": {"age": 8, "matchesPrefix": ["digests/"]}},
        {"action": {"type": "Delete"}, "condition": {"age": 8, "matchesPrefix": ["overrides/"]}},
        {"action": {"type": "Delete"}, "condition": {"age": 1, "matchesPrefix": ["deploy/build-"]}}]


def test_public_invoker_added_by_hand_is_removed(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs)
    service = f"{LOCATION}/services/spotcron-job-done"
    policy = cloud.functions.run_policies.get(service)
    policy["bindings"] += [{"role": "roles/run.invoker", "members": ["allUsers"]},
                           {"role": "roles/run.developer", "members": ["user:alice@example.com"]}]
    cloud.functions.run_policies.set(service, policy)
    [action] = deployer.plan(jobs).actions
    assert action.name == "function:spotcron-job-done"
    assert action.changes == {"roles/run.invoker": (("allUsers", VM), (VM,))}
    deployer.deploy(jobs)
    assert cloud.functions.run_policies.members(service, "roles/run.invoker") == {VM}
    assert cloud.functions.run_policies.members(service, "roles/run.developer") == {"user:alice@example.com"}


def test_new_source_rebuilds_functions_and_drops_the_old_archive(deployer: Deployer, cloud: FakeCloud,
                                                                 tmp_path: Path) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs)
    old = deployer.source.object_name
    deployer.source = build_source(make_source_root(tmp_path / "v2", main="def start_job(e):\n    return 2\n"))
    actions = deployer.plan(jobs).actions
    assert sorted((a.kind, a.resource_type) for a in actions) == [
        ("create", SOURCE), ("delete", SOURCE)] + [("update", FUNCTION)] * 4
    assert all(set(a.changes) == {"source"} for a in actions if a.resource_type == FUNCTION)
    deployer.deploy(jobs)
    assert [name for (_, name) in cloud.storage.objects if name.startswith("deploy/")] == [deployer.source.object_name]
    assert old != deployer.source.object_name
    assert deployer.plan(jobs).actions == []


def test_failed_function_build_is_deployed_again(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    cloud.functions.fail_builds = True
    with pytest.raises(DeployFailed, match=r"create function spotcron-job-done: .*Build failed: injected build error"):
        deployer.deploy(jobs)
    assert not [a for a in deployer.reporter.advanced if a[0].startswith("create scheduler_job")]  # phase stopped
    cloud.functions.fail_builds = False
    actions = deployer.plan(jobs).actions
    # Each failed function is deployed again, whole (its fields matched; only its state did not).
    assert {a.name for a in actions if a.resource_type == FUNCTION and "healthy" in a.changes} == {
        "spotcron-credentials", "spotcron-job-done", "spotcron-start-job", "spotcron-sweep"}
    deployer.deploy(jobs)
    assert {f["state"] for f in cloud.functions.functions.values()} == {"ACTIVE"}
    assert deployer.plan(jobs).actions == []


def test_bucket_owned_by_someone_else_stops_the_plan(deployer: Deployer, cloud: FakeCloud) -> None:
    cloud.storage.foreign_buckets.add(BUCKET)
    with pytest.raises(DeployError, match=(
            "bucket 'demo-proj-spotcron' exists but this account cannot read it; bucket names are global, so it "
            "probably belongs to another project: set another `bucket:` in the stack file")):
        deployer.plan(deployer.jobs(JOBS_DIR))
    assert not cloud.changing_calls()


def test_dry_run_changes_nothing(deployer: Deployer, cloud: FakeCloud) -> None:
    result = deployer.deploy(deployer.jobs(JOBS_DIR), dry_run=True)
    assert len(result.plan) == 51 and result.passes == []
    # The APIs an empty project lacks come first (logging, storage and Service Usage are on by default).
    assert [a.name for a in result.plan[:12]] == sorted(set(REQUIRED_APIS) - {
        "logging.googleapis.com", "storage.googleapis.com", "serviceusage.googleapis.com"})
    assert not cloud.changing_calls()
    assert cloud.state()["jobs"] == {}


def test_each_digest_marker_holds_its_spec(deployer: Deployer, cloud: FakeCloud, jobs_dir: Path) -> None:
    """A start an edit overtook is read by the schedule that fired it (engine/deployed.py's fired_with)."""
    deployer.deploy(deployer.jobs(jobs_dir))
    before = cloud.storage.objects[(BUCKET, "deployed/bot.json")][0]
    bot = jobs_dir / "bot.yaml"
    bot.write_text(bot.read_text().replace('"0 */4 * * *"', '"15 */4 * * *"'))
    deployer.deploy(deployer.jobs(jobs_dir))
    after = cloud.storage.objects[(BUCKET, "deployed/bot.json")][0]
    assert before != after
    for data in (before, after):
        assert cloud.storage.objects[(BUCKET, f"digests/bot/{digest_of(data)}")][0] == data


def test_an_edit_that_keeps_the_schedule_keeps_its_since(deployer: Deployer, cloud: FakeCloud, jobs_dir: Path) -> None:
    """The dispatcher's and missed-tick pass's floor moves only when the schedule changes."""
    deployer.deploy(deployer.jobs(jobs_dir))
    bot = jobs_dir / "bot.yaml"

    def since_of_deployed() -> bytes:
        data = cloud.storage.objects[(BUCKET, "deployed/bot.json")][0]
        return cloud.storage.objects[(BUCKET, f"digests/bot/{digest_of(data)}.since")][0]

    assert since_of_deployed() == b""  # a new job: since its own deploy
    bot.write_text(bot.read_text().replace("GREETING: hello", "GREETING: hi"))
    deployer.deploy(deployer.jobs(jobs_dir))
    assert since_of_deployed() != b""  # carried forward from the first deploy
    before = cloud.storage.objects[(BUCKET, "deployed/bot.json")][0]
    bot.write_text(bot.read_text().replace('"0 */4 * * *"', '"15 */4 * * *"'))
    deployer.deploy(deployer.jobs(jobs_dir))
    # The schedule changed: since this deploy, naming the spec whose schedule it replaced.
    assert since_of_deployed() == f"\nreplaced={digest_of(before)}".encode()
