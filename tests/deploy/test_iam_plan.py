"""The planned IAM data as the security model needs it (docs/security.md), in both scheduling modes."""

from __future__ import annotations

import dataclasses

import pytest

from spotcron.core.settings import Settings
from spotcron.deploy.desired import desired_state
from spotcron.deploy.iam import PRIMITIVE_ROLES, PUBLIC_MEMBERS, bindings, security_problems
from spotcron.deploy.naming import Names, member
from spotcron.deploy.planner import plan
from spotcron.deploy.resources import IAM_POLICY

SETTINGS = Settings(project="demo-proj", bucket="demo-proj-spotcron")


@pytest.fixture(params=[False, True], ids=["per-job", "shared"])
def names(request) -> Names:
    return dataclasses.replace(Names.of(SETTINGS), shared=request.param)


def planned(names: Names):
    return bindings(names)


def test_the_vm_account_holds_no_storage_role(names):
    vm = member(names.vm_account)
    assert [b for b in planned(names) if b.member == vm and "storage" in b.role] == []


def test_no_account_holds_a_project_wide_storage_role(names):
    assert [b for b in planned(names) if b.target.startswith("project:") and b.role.startswith("roles/storage.")] == []


def test_storage_roles_sit_on_the_one_results_bucket(names):
    targets = {b.target for b in planned(names) if b.role.startswith("roles/storage.")}
    assert targets == {f"bucket:{names.bucket}"}


def test_no_primitive_roles_no_public_members_no_public_functions(names):
    granted = planned(names)
    assert not [b for b in granted if b.role in PRIMITIVE_ROLES or b.member in PUBLIC_MEMBERS]
    assert security_problems(granted) == []
    invokers = {(b.target, b.member) for b in granted if b.role == "roles/run.invoker"}
    assert all(m.startswith("serviceAccount:spotcron-") for _, m in invokers)


def test_only_the_dispatcher_may_publish_starts(names):
    start = f"topic:{names.start_topic}"
    publishers = [b for b in planned(names) if b.target == start and b.role == "roles/pubsub.publisher"]
    assert bool(publishers) == names.shared  # per-job: Cloud Scheduler publishes, no function needs to


def test_the_vm_may_invoke_job_done_and_the_broker_and_nothing_else(names):
    vm = member(names.vm_account)
    assert sorted(b.target for b in planned(names) if b.member == vm and b.role == "roles/run.invoker") == [
        "function:spotcron-credentials", "function:spotcron-job-done"]


def test_a_whole_plan_from_nothing_passes_the_security_check():
    from spotcron.deploy.iam import Binding

    state = desired_state(SETTINGS, [], "deploy/source-1.zip", "")
    granted = [Binding(a.name, role, m, "") for a in plan(state, {}) if a.resource_type == IAM_POLICY
               for role, (old, new) in a.changes.items() for m in set(new) - set(old)]
    assert granted and security_problems(granted) == []
