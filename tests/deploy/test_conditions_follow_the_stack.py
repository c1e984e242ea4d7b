"""A conditional grant holds exactly where deploy says, after the stack changes too.

Deploy compares a conditional binding by its role and its condition's *title* only
(deploy/policies.managed_view keys it `ROLE|TITLE`; the planner never compares the expression),
and adds members to whatever binding of ours carries that title (policies.apply_changes). The
expression of the build account's one project-wide storage grant names a region
(`gcf-v2-sources-NUMBER-REGION`, deploy/iam.conditions, docs/security.md "The one exception").
When the stack moves to another region, the desired expression changes and its title does not: the
plan shows nothing to change, the grant keeps reaching the old region's bucket (a stale grant no
deploy removes), and every function build in the new region is refused its source, deploy after
deploy ("run deploy again" cannot help).
"""

from __future__ import annotations

from spotcron.deploy.apply import DeployFailed
from tests.deploy.conftest import PROJECT, Deployer, make_settings
from tests.fakes.deploy.cloud import FakeCloud

BUILD = f"serviceAccount:spotcron-build@{PROJECT}.iam.gserviceaccount.com"


def _reads(cloud: FakeCloud, bucket: str) -> bool:
    resource = f"projects/_/buckets/{bucket}/objects/spotcron-job-done/function-source.zip"
    return cloud.access.allowed(BUILD, "storage.objects.get", resource,
                                [cloud.project_policies.policy(f"projects/{PROJECT}")])


def test_a_stack_moved_to_another_region_moves_the_build_accounts_source_copy_grant(
        deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy([])
    number = cloud.access.number
    assert _reads(cloud, f"gcf-v2-sources-{number}-us-central1")
    moved = make_settings(region="europe-west1")
    failure = ""
    try:
        deployer.deploy([], settings=moved)
    except DeployFailed as exc:
        failure = str(exc).splitlines()[1] if len(str(exc).splitlines()) > 1 else str(exc)
    cloud.clock.advance(cloud.access.grant_delay_s)
    assert _reads(cloud, f"gcf-v2-sources-{number}-europe-west1"), (
        f"after the move the build account still may not read the new region's source copy: {failure}")
    assert not _reads(cloud, f"gcf-v2-sources-{number}-us-central1"), "the old region's grant stays"


def test_the_plan_shows_a_grant_whose_condition_changed_replaced(deployer: Deployer, cloud: FakeCloud) -> None:
    from spotcron.deploy.planner import format_plan

    deployer.deploy([])
    assert deployer.plan([]).actions == []
    moved = make_settings(region="europe-west1")
    [update] = [a for a in deployer.plan([], settings=moved).actions if a.name == f"project:{PROJECT}"]
    assert update.kind == "update"
    lines = format_plan([update])
    assert f"    + roles/storage.objectAdmin|spotcron-functions-source-copy {BUILD}" in lines
    assert f"    - roles/storage.objectAdmin|spotcron-functions-source-copy|outdated {BUILD}" in lines
