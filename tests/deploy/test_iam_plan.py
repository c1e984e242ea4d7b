"""The planned IAM data as the security model needs it (docs/security.md), in both scheduling modes,
with two jobs that run as their own service accounts."""

from __future__ import annotations

import dataclasses

import pytest

from spotcron.core.settings import Settings
from spotcron.deploy.desired import desired_state
from spotcron.deploy.iam import PRIMITIVE_ROLES, PUBLIC_MEMBERS, Binding, bindings, security_problems
from spotcron.deploy.naming import Names, member
from spotcron.deploy.planner import format_plan, plan
from spotcron.deploy.resources import IAM_POLICY
from spotcron.testing.harness import make_spec

SETTINGS = Settings(project="demo-proj", bucket="demo-proj-spotcron")
JOB_ACCOUNTS = ("bot-runner@demo-proj.iam.gserviceaccount.com", "etl-runner@demo-proj.iam.gserviceaccount.com")
JOBS = [make_spec(name="bot", service_account=JOB_ACCOUNTS[0]), make_spec(name="etl", service_account=JOB_ACCOUNTS[1]),
        make_spec(name="plain")]
REPOSITORY = "repository:spotcron"
JOBS_REPOSITORY = "repository:spotcron-jobs"
BUILT_REPOSITORY = "repository:spotcron-built"


def own_built_repository(email: str) -> str:
    """The repository deploy's builds push to for the jobs that run as `email`: spotcron-built-HASH."""
    from spotcron.core.job_repositories import built_repository

    return f"repository:{built_repository('spotcron', email)}"


def own_repository(email: str) -> str:
    """The repository of the jobs that run as `email`: spotcron-jobs-HASH."""
    from spotcron.core.job_repositories import jobs_repository

    return f"repository:{jobs_repository('spotcron', email)}"


@pytest.fixture(params=[False, True], ids=["per-job", "shared"])
def names(request) -> Names:
    return dataclasses.replace(Names.of(SETTINGS), shared=request.param)


def planned(names: Names) -> list[Binding]:
    return bindings(names, JOB_ACCOUNTS)


def spotcron_and_job_accounts(names: Names) -> list[str]:
    return [member(email) for email in (*names.accounts, *JOB_ACCOUNTS)]


def test_the_vm_account_holds_no_storage_role(names):
    vm = member(names.vm_account)
    assert [b for b in planned(names) if b.member == vm and "storage" in b.role] == []


def test_no_account_holds_a_project_wide_storage_or_registry_role(names):
    assert [b for b in planned(names) if b.target.startswith("project:")
            and b.role.startswith(("roles/storage.", "roles/artifactregistry."))] == []


def test_registry_roles_sit_on_the_repositories_one_reader_each(names):
    registry = {(b.target, b.role, b.member) for b in planned(names) if b.role.startswith("roles/artifactregistry.")}
    # The functions' repository: written by their builder only, read by no job's VM. Per account the
    # jobs run as, the owners' repository: written by no spotcron account (owners push prebuilt
    # images there), read by that account only; the built one: written by the job images' builder,
    # read by that account only.
    assert registry == {(REPOSITORY, "roles/artifactregistry.writer", member(names.build_account)),
                        (BUILT_REPOSITORY, "roles/artifactregistry.writer", member(names.job_build_account)),
                        (BUILT_REPOSITORY, "roles/artifactregistry.reader", member(names.vm_account)),
                        (JOBS_REPOSITORY, "roles/artifactregistry.reader", member(names.vm_account)),
                        *((own_repository(a), "roles/artifactregistry.reader", member(a)) for a in JOB_ACCOUNTS),
                        *((own_built_repository(a), "roles/artifactregistry.reader", member(a)) for a in JOB_ACCOUNTS),
                        *((own_built_repository(a), "roles/artifactregistry.writer", member(names.job_build_account))
                          for a in JOB_ACCOUNTS)}
    assert len({own_repository(a) for a in JOB_ACCOUNTS}) == len(JOB_ACCOUNTS)


def test_each_job_account_holds_only_what_the_runner_needs(names):
    for email in JOB_ACCOUNTS:
        held = {(b.target, b.role) for b in planned(names) if b.member == member(email)}
        assert held == {(own_repository(email), "roles/artifactregistry.reader"),
                        (own_built_repository(email), "roles/artifactregistry.reader"),
                        ("function:spotcron-job-done", "roles/run.invoker"),
                        ("function:spotcron-credentials", "roles/run.invoker")}
        # Only the functions account may act as it, and only on that one account (not the project).
        on_it = {(b.role, b.member) for b in planned(names) if b.target == f"service_account:{email}"}
        assert on_it == {("roles/iam.serviceAccountUser", member(names.functions_account))}
    users = [b for b in planned(names) if b.role == "roles/iam.serviceAccountUser"]
    assert all(b.target.startswith("service_account:") for b in users)


def test_the_vm_and_job_accounts_hold_no_storage_role(names):
    runners = {member(names.vm_account), *(member(a) for a in JOB_ACCOUNTS)}
    assert [b for b in planned(names) if b.member in runners and "storage" in b.role] == []


def test_storage_roles_sit_on_the_one_results_bucket(names):
    targets = {b.target for b in planned(names) if b.role.startswith("roles/storage.")}
    # And Storage Admin on the job builds' logs bucket, which holds nothing else (Google's ask).
    assert targets == {f"bucket:{names.bucket}", f"bucket:{names.build_logs_bucket}"}
    admins = [b for b in planned(names) if b.role == "roles/storage.admin"]
    assert [(b.target, b.member) for b in admins] == [(f"bucket:{names.build_logs_bucket}",
                                                        member(names.job_build_account))]


def test_no_primitive_roles_no_public_members_no_public_functions(names):
    granted = planned(names)
    assert not [b for b in granted if b.role in PRIMITIVE_ROLES or b.member in PUBLIC_MEMBERS]
    assert security_problems(granted) == []
    invokers = {(b.target, b.member) for b in granted if b.role == "roles/run.invoker"}
    assert {m for _, m in invokers} <= set(spotcron_and_job_accounts(names))
    assert all(m.startswith("serviceAccount:") for _, m in invokers)


def test_the_security_check_refuses_project_wide_storage_and_registry_roles():
    bad = [Binding("project:p", "roles/artifactregistry.reader", "serviceAccount:a@p.iam.gserviceaccount.com", ""),
           Binding("project:p", "roles/storage.objectViewer", "serviceAccount:b@p.iam.gserviceaccount.com", "")]
    assert security_problems(bad) == [
        "project:p: serviceAccount:a@p.iam.gserviceaccount.com would get roles/artifactregistry.reader on the whole "
        "project; grant it on the one bucket or repository instead",
        "project:p: serviceAccount:b@p.iam.gserviceaccount.com would get roles/storage.objectViewer on the whole "
        "project; grant it on the one bucket or repository instead"]


def test_only_the_dispatcher_may_publish_starts(names):
    start = f"topic:{names.start_topic}"
    publishers = [b for b in planned(names) if b.target == start and b.role == "roles/pubsub.publisher"]
    assert bool(publishers) == names.shared  # per-job: Cloud Scheduler publishes, no function needs to


def test_the_vm_may_invoke_job_done_and_the_broker_and_nothing_else(names):
    vm = member(names.vm_account)
    assert sorted(b.target for b in planned(names) if b.member == vm and b.role == "roles/run.invoker") == [
        "function:spotcron-credentials", "function:spotcron-job-done"]


def test_a_whole_plan_from_nothing_passes_the_security_check():
    state = desired_state(SETTINGS, JOBS, "deploy/source-1.zip", "")
    granted = [Binding(a.name, role, m, "") for a in plan(state, {}) if a.resource_type == IAM_POLICY
               for role, (old, new) in a.changes.items() for m in set(new) - set(old)]
    assert granted and security_problems(granted) == []
    assert {b.member for b in granted} == set(spotcron_and_job_accounts(Names.of(SETTINGS)))


def test_the_plan_shows_each_job_accounts_grants():
    lines = format_plan(plan(desired_state(SETTINGS, JOBS, "deploy/source-1.zip", ""), {}))
    functions = "serviceAccount:spotcron-functions@demo-proj.iam.gserviceaccount.com"
    at = lines.index(f"~ update iam_policy service_account:{JOB_ACCOUNTS[0]}")
    assert lines[at + 1] == f"    + roles/iam.serviceAccountUser {functions}"
    at = lines.index(f"~ update iam_policy {own_repository(JOB_ACCOUNTS[1])}")
    assert f"    + roles/artifactregistry.reader serviceAccount:{JOB_ACCOUNTS[1]}" in lines[at:at + 6]
    assert f"+ create repository {own_repository(JOB_ACCOUNTS[1]).split(':', 1)[1]}" in lines
    at = lines.index("~ update iam_policy function:spotcron-job-done")
    assert f"    + roles/run.invoker serviceAccount:{JOB_ACCOUNTS[0]}" in lines[at:at + 5]


def test_the_vm_account_holds_nothing_project_wide(names):
    """With roles/logging.logWriter on the project, a container that opts in to the metadata
    server could forge the functions' log lines, `security: true` events included. The runner
    ships the job's output to the bucket; the VM writes no Cloud Logging."""
    vm = member(names.vm_account)
    project = f"project:{names.project}"
    assert [b.role for b in planned(names) if b.member == vm and b.target == project] == []
    assert "roles/logging.logWriter" in {b.role for b in planned(names)}  # still managed: revoked on deploy


def test_the_build_account_reads_only_the_deploy_source_objects(names):
    """The build account needs the functions' source archives only, never the rest of the
    results bucket (records, results, specs)."""
    from spotcron.deploy.iam import conditions

    build = member(names.build_account)
    [grant] = [b for b in planned(names) if b.member == build and "storage" in b.role]
    assert grant.target == f"bucket:{names.bucket}" and grant.condition is not None
    expression = conditions(names)[grant.condition]["expression"]
    assert expression == f'resource.name.startsWith("projects/_/buckets/{names.bucket}/objects/deploy/")'
