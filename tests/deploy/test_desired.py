"""Desired state from Settings and specs, and the least-privilege rules over its IAM bindings."""

from __future__ import annotations

import dataclasses
import json

import pytest

from spotcron.core.loader import load_jobs
from spotcron.core.settings import Settings
from spotcron.deploy.desired import desired_state, function_environment, scheduler_data, sweep_schedule
from spotcron.deploy.iam import Binding, bindings, security_problems
from spotcron.deploy.naming import Names
from spotcron.deploy.planner import plan
from spotcron.deploy.resources import (
    BUCKET,
    DEPLOYED_SPEC,
    FUNCTION,
    IAM_POLICY,
    SCHEDULER_JOB,
    SERVICE_ACCOUNT,
    TOPIC,
)
from spotcron.engine.deployed import canonical, digest
from tests.deploy.conftest import JOBS_DIR, make_settings

VM = "serviceAccount:spotcron-vm@demo-proj.iam.gserviceaccount.com"
FUNCTIONS = "serviceAccount:spotcron-functions@demo-proj.iam.gserviceaccount.com"
BUILD = "serviceAccount:spotcron-build@demo-proj.iam.gserviceaccount.com"
JOB_BUILD = "serviceAccount:spotcron-job-build@demo-proj.iam.gserviceaccount.com"


@pytest.fixture
def state():
    return desired_state(make_settings(), load_jobs([JOBS_DIR]), "deploy/source-0123.zip", "https://job-done.example")


def test_bucket_has_uniform_access_lifecycle_on_runs_and_our_label(state) -> None:
    bucket = state[(BUCKET, "demo-proj-spotcron")]
    assert bucket.fields == {
        "location": "us-central1", "uniform_access": True, "public_access_prevention": "enforced",
        "lifecycle": (("Delete", 90, ("runs/",)), ("Delete", 1, ("tokens/",)), ("Delete", 90, ("limits/",)),
                      ("Delete", 8, ("digests/",)),
                      ("Delete", 8, ("overrides/",)), ("Delete", 1, ("deploy/build-",))), "labels": {"spotcron": "1"},
    }


def test_topics_accounts_and_functions(state) -> None:
    assert sorted(n for t, n in state if t == TOPIC) == ["spotcron-events", "spotcron-start", "spotcron-sweep"]
    assert sorted(n for t, n in state if t == SERVICE_ACCOUNT) == [
        "spotcron-build@demo-proj.iam.gserviceaccount.com", "spotcron-functions@demo-proj.iam.gserviceaccount.com",
        "spotcron-job-build@demo-proj.iam.gserviceaccount.com", "spotcron-vm@demo-proj.iam.gserviceaccount.com"]
    start = state[(FUNCTION, "spotcron-start-job")].fields
    assert start["entry_point"] == "start_job" and start["runtime"] == "python312"
    assert start["source"] == "gs://demo-proj-spotcron/deploy/source-0123.zip"
    assert start["trigger"] == {"event_type": "google.cloud.pubsub.topic.v1.messagePublished",
                                "pubsub_topic": "projects/demo-proj/topics/spotcron-start",
                                "service_account": "spotcron-functions@demo-proj.iam.gserviceaccount.com",
                                "retry_policy": "RETRY_POLICY_RETRY"}
    assert state[(FUNCTION, "spotcron-sweep")].fields["trigger"]["pubsub_topic"] == "projects/demo-proj/topics/spotcron-sweep"
    done = state[(FUNCTION, "spotcron-job-done")].fields
    assert done["entry_point"] == "job_done" and done["trigger"] is None and done["ingress"] == "ALLOW_ALL"
    assert done["environment"]["SPOTCRON_JOB_DONE_URL"] == "https://job-done.example"


def test_scheduler_entry_per_job_publishes_its_name_and_digest(state) -> None:
    entries = {n: r.fields for (t, n), r in state.items() if t == SCHEDULER_JOB}
    assert sorted(entries) == ["spotcron-benchmark", "spotcron-bot", "spotcron-nightly", "spotcron-sweep"]
    jobs = {j.name: j for j in load_jobs([JOBS_DIR])}
    bot = entries["spotcron-bot"]
    # Never the spec itself: start_job reads that from deployed/JOB.json, which deploy writes.
    assert json.loads(bot["data"]) == {"job": "bot", "digest": digest(jobs["bot"])}
    deployed = state[(DEPLOYED_SPEC, "deployed/bot.json")]
    assert deployed.fields == {"digest": digest(jobs["bot"])}
    assert deployed.meta["data"] == canonical(jobs["bot"])
    assert bot["topic"] == "projects/demo-proj/topics/spotcron-start"
    assert (bot["schedule"], bot["time_zone"], bot["paused"]) == ("0 */4 * * *", "Etc/UTC", False)
    # A matrix job is one entry; start_job fans out to its entries.
    assert json.loads(entries["spotcron-benchmark"]["data"])["job"] == "benchmark"
    assert entries["spotcron-benchmark"]["time_zone"] == "Europe/Berlin"
    assert entries["spotcron-nightly"]["paused"] is True
    assert all(e["retry"] == {"retry_count": 3, "min_backoff_s": 10, "max_backoff_s": 60, "max_doublings": 3}
               for e in entries.values())
    assert entries["spotcron-sweep"]["schedule"] == "*/5 * * * *"
    assert entries["spotcron-sweep"]["topic"] == "projects/demo-proj/topics/spotcron-sweep"


def test_scheduler_data_is_stable_compact_json() -> None:
    [bot] = [j for j in load_jobs([JOBS_DIR]) if j.name == "bot"]
    # Sorted keys and no padding: the same spec always gives the same bytes, so no false diffs.
    assert scheduler_data(bot) == json.dumps({"digest": digest(bot), "job": "bot"}, separators=(",", ":"))
    assert canonical(bot).startswith(b'{"args":[],"benchmark":{"base":null,')


@pytest.mark.parametrize(("seconds", "cron"), [
    (60, "* * * * *"), (300, "*/5 * * * *"), (600, "*/10 * * * *"), (3600, "0 */1 * * *"),
    (7200, "0 */2 * * *"), (86400, "0 0 * * *"), (290, "*/5 * * * *"),
])
def test_sweep_schedule(seconds: int, cron: str) -> None:
    assert sweep_schedule(seconds) == cron


def test_function_environment_rebuilds_the_settings() -> None:
    from spotcron.core.settings import load_settings

    settings = make_settings(zones=("europe-west4-a", "europe-west4-b"), region="europe-west4")
    env = function_environment(settings, "https://x.example/job_done")
    assert env["SPOTCRON_ZONES"] == "europe-west4-a,europe-west4-b"
    assert env["SPOTCRON_SWEEP_INTERVAL"] == "300"
    rebuilt = load_settings(None, env)
    assert rebuilt == settings.model_copy(update={"job_done_url": "https://x.example/job_done"})


def test_unknown_job_done_url_is_left_out_until_known() -> None:
    assert "SPOTCRON_JOB_DONE_URL" not in function_environment(make_settings(), "")


# --- least privilege -------------------------------------------------------------------------


def test_bindings_are_least_privilege() -> None:
    granted = {(b.target, b.role, b.member) for b in bindings(Names.of(make_settings()))}
    project, bucket = "project:demo-proj", "bucket:demo-proj-spotcron"
    assert granted == {
        (project, "roles/compute.instanceAdmin.v1", FUNCTIONS),
        ("service_account:spotcron-vm@demo-proj.iam.gserviceaccount.com", "roles/iam.serviceAccountUser", FUNCTIONS),
        (bucket, "roles/storage.objectAdmin", FUNCTIONS),
        ("topic:spotcron-events", "roles/pubsub.publisher", FUNCTIONS),
        ("function:spotcron-start-job", "roles/run.invoker", FUNCTIONS),
        ("function:spotcron-sweep", "roles/run.invoker", FUNCTIONS),
        ("repository:spotcron-jobs", "roles/artifactregistry.reader", VM),
        ("repository:spotcron-built", "roles/artifactregistry.reader", VM),
        ("function:spotcron-job-done", "roles/run.invoker", VM),
        ("function:spotcron-credentials", "roles/run.invoker", VM),
        (project, "roles/logging.logWriter", BUILD),
        ("repository:spotcron", "roles/artifactregistry.writer", BUILD),
        (bucket, "roles/storage.objectViewer", BUILD),
        # The job images' builds: their own account, writing the jobs' repository only, and their
        # logs to a bucket of their own, as Google asks (no logging role: a Dockerfile could forge
        # any log line).
        ("bucket:demo-proj-spotcron-build-logs", "roles/storage.admin", JOB_BUILD),
        ("repository:spotcron-built", "roles/artifactregistry.writer", JOB_BUILD),  # never the owners' spotcron-jobs
        (bucket, "roles/storage.objectViewer", JOB_BUILD),
    }
    assert security_problems(bindings(Names.of(make_settings()))) == []
    assert all(b.why for b in bindings(Names.of(make_settings())))


def test_security_check_names_every_violation() -> None:
    bad = [
        Binding("project:p", "roles/editor", VM, ""),
        Binding("function:spotcron-job-done", "roles/run.invoker", "allUsers", ""),
        Binding("bucket:b", "roles/storage.objectViewer", "allAuthenticatedUsers", ""),
        Binding("project:p", "roles/logging.logWriter", "serviceAccount:123-compute@developer.gserviceaccount.com", ""),
    ]
    assert security_problems(bad) == [
        f"project:p: {VM} would get the primitive role roles/editor",
        "function:spotcron-job-done: roles/run.invoker would be granted to allUsers (public access)",
        "function:spotcron-job-done: the function would allow unauthenticated invocation",
        "bucket:b: roles/storage.objectViewer would be granted to allAuthenticatedUsers (public access)",
        "project:p: roles/logging.logWriter would be granted to the default account "
        "serviceAccount:123-compute@developer.gserviceaccount.com",
    ]


def test_plan_from_nothing_grants_nothing_public_or_primitive(state) -> None:
    """The security check over a whole plan: every IAM grant it would make."""
    granted = [Binding(a.name, role, m, "")
               for a in plan(state, {}) if a.resource_type == IAM_POLICY
               for role, (old, new) in a.changes.items() for m in set(new) - set(old)]
    assert len(granted) == 16
    assert security_problems(granted) == []
    job_done = [b for b in granted if b.target == "function:spotcron-job-done"]
    assert [(b.role, b.member) for b in job_done] == [("roles/run.invoker", VM)]


def test_the_vm_account_holds_no_storage_role_anywhere() -> None:
    """Its storage token comes from the broker, limited to its attempt (tests/security/test_broker.py)."""
    for shared in (False, True):
        names = dataclasses.replace(Names.of(make_settings()), shared=shared)
        assert not [b for b in bindings(names) if b.member == VM and b.role.startswith("roles/storage.")]


def test_a_storage_role_the_vm_account_holds_in_a_managed_role_is_revoked(state) -> None:
    """A storage role deploy manages (the build account holds objectViewer) is taken from the VM
    account wherever it was granted; other members keep theirs."""
    from spotcron.deploy.iam import managed_members, managed_roles
    from spotcron.deploy.policies import managed_view
    from spotcron.deploy.resources import Resource

    names = Names.of(make_settings())
    deployed = {"bindings": [
        {"role": "roles/storage.objectAdmin", "members": [FUNCTIONS]},
        {"role": "roles/storage.objectViewer", "members": [VM, "user:someone@example.com"]},
    ]}
    view = managed_view(deployed, managed_members(names), managed_roles(names))
    target = "bucket:demo-proj-spotcron"
    [action] = [a for a in plan(state, {(IAM_POLICY, target): Resource(IAM_POLICY, target, view)})
                if a.name == target]
    # The VM account holds no storage role: the broker mints its tokens.
    assert action.changes == {
        "roles/storage.objectViewer": ((VM,), ()),
        # The build reads its source here, under deploy/ only.
        "roles/storage.objectViewer|spotcron-deploy-source-only": ((), (BUILD,)),
        # The job images' build reads its context here, under deploy/build- only.
        "roles/storage.objectViewer|spotcron-build-contexts-only": ((), (JOB_BUILD,)),
    }


def test_accounts_of_other_projects_are_used_but_not_created() -> None:
    settings = Settings(project="demo-proj", bucket="b-demo", vm_service_account="runner@shared-proj.iam.gserviceaccount.com")
    state = desired_state(settings, [], "deploy/source-1.zip", "")
    accounts = sorted(n for t, n in state if t == SERVICE_ACCOUNT)
    assert "runner@shared-proj.iam.gserviceaccount.com" not in accounts
    assert (IAM_POLICY, "service_account:runner@shared-proj.iam.gserviceaccount.com") in state
