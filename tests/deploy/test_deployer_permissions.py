"""The deployer's own permissions, per permission: the strict fakes hold the Editor basic role to
what Google gives it (everything here but writing IAM policies), so an Editor's deploy is refused
at its first policy write, and doctor says which permissions are missing before anything exists."""

from __future__ import annotations

from typing import Any

import pytest

from spotcron.core.errors import SpotcronError
from spotcron.deploy.apply import run_deploy
from spotcron.deploy.checkup import FAIL, run_checks
from spotcron.gcp.admin.calls import REQUIRED_APIS
from spotcron.gcp.admin.project_reads import project_reads
from spotcron.gcp.admin.settling import Settling
from spotcron.testing.harness import make_spec
from tests.deploy.conftest import JOBS_DIR, PROJECT, Deployer, make_settings, quick_caller
from tests.fakes.deploy.cloud import FakeCloud

EDITOR = "user:editor@example.com"


def _editor(cloud: FakeCloud) -> None:
    cloud.enable_apis()
    cloud.project_policies.grant(f"projects/{PROJECT}", "roles/editor", EDITOR)
    cloud.clock.advance(cloud.access.grant_delay_s)


def test_doctor_names_what_an_editor_lacks(cloud: FakeCloud) -> None:
    _editor(cloud)
    found = {c.name: c for c in run_checks(project_reads(cloud.clients(member=EDITOR), quick_caller()),
                                           make_settings(), [make_spec()], REQUIRED_APIS)}
    check = found["permissions"]
    assert check.status == FAIL
    assert "resourcemanager.projects.setIamPolicy" in check.detail and "storage.buckets.setIamPolicy" in check.detail
    assert "--role=roles/resourcemanager.projectIamAdmin" in check.fix
    assert "compute.firewalls.create" not in check.detail  # the rest an Editor holds


def test_an_editors_deploy_is_refused_at_its_first_policy_write(deployer: Deployer, cloud: FakeCloud) -> None:
    _editor(cloud)
    with pytest.raises(SpotcronError, match=r"setIamPolicy"):
        run_deploy(make_settings(), deployer.jobs(JOBS_DIR), deployer.source, cloud.clients(member=EDITOR),
                   confirm=lambda actions: True, reporter=deployer.reporter, concurrency=4, caller=quick_caller(),
                   poll_initial=0.01, settling=Settling(sleep=cloud.clock.sleep))
    assert any(".setIamPolicy' denied" in r and EDITOR in r for r in cloud.access.refusals)


def test_the_owner_deploys(deployer: Deployer, cloud: FakeCloud) -> None:
    result: Any = deployer.deploy(deployer.jobs(JOBS_DIR))
    assert result is not None
    assert not [r for r in cloud.access.refusals if ".setIamPolicy' denied" in r]
