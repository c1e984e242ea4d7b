"""`spotcron doctor` and the same checks in `deploy --dry-run`: read-only looks at a project, each
failing check with what to run. Against the strict fake Google servers (tests/fakes/deploy/: the
enabled APIs and IAM policies deploy's fakes enforce), through the real adapter
(spotcron/gcp/admin/project_reads.py) and Google's own HTTP session."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from spotcron.cli import SpotcronGroup
from spotcron.cli.deploy import COMMANDS as DEPLOY_COMMANDS
from spotcron.cli.deploy import DeployContext
from spotcron.cli.doctor import COMMANDS as DOCTOR_COMMANDS
from spotcron.core.settings import Settings
from spotcron.deploy.checkup import FAIL, OK, UNKNOWN, gpu_needs, run_checks
from spotcron.deploy.checkup_rules import (
    LIST_ALLOWED,
    LIST_DENIED,
    LIST_UNKNOWN,
    gpu_metric,
    list_allows,
    location_allowed,
)
from spotcron.gcp.admin.calls import REQUIRED_APIS
from spotcron.gcp.admin.project_reads import project_reads
from spotcron.testing.harness import make_spec
from tests.deploy.conftest import BUCKET, JOBS_DIR, PROJECT, make_source_root, quick_caller, user_repository
from tests.fakes.deploy.access import OWNER
from tests.fakes.deploy.cloud import FakeCloud

STACK = f"project: {PROJECT}\nregion: us-central1\nbucket: {BUCKET}\n"
ORG_POLICY = "orgpolicy.googleapis.com"  # doctor reads policies through it; deploy does not need it


@pytest.fixture
def cloud(cloud: FakeCloud) -> FakeCloud:
    """A project in use: every API deploy needs (and Org Policy) enabled long ago."""
    cloud.enable_apis([*REQUIRED_APIS, ORG_POLICY])
    return cloud


@pytest.fixture
def empty() -> Iterator[FakeCloud]:
    """A project just created: only Google's default APIs on."""
    fake = FakeCloud(PROJECT).start()
    try:
        yield fake
    finally:
        fake.stop()


def plain_job():
    return make_spec()


def gpu_job():
    return make_spec(name="train", machine={"type": "n1-standard-4", "gpu": {"type": "nvidia-tesla-t4", "count": 1}})


def checks(cloud: FakeCloud, jobs=None, settings: Settings | None = None, member: str = OWNER):
    facts = project_reads(cloud.clients(member=member), quick_caller())
    found = run_checks(facts, settings or Settings(project=PROJECT, bucket=BUCKET), jobs or [plain_job()],
                       REQUIRED_APIS)
    return {c.name: c for c in found}


def test_a_healthy_project_passes_every_check_and_nothing_changes(cloud: FakeCloud) -> None:
    found = checks(cloud, [plain_job(), gpu_job()])
    assert {c.status for c in found.values()} == {OK}, [c for c in found.values() if c.status != OK]
    assert set(found) >= {"APIs", "permissions", "quota us-central1 nvidia-tesla-t4 (Spot)", "quota GPUS_ALL_REGIONS",
                          "policy compute.trustedImageProjects", "policy compute.requireShieldedVm",
                          "policy compute.skipDefaultNetworkCreation", "policy cloudfunctions.allowedIngressSettings",
                          "policy run.allowedIngress", "policy gcp.resourceLocations", "network default",
                          "subnetwork default in us-central1"}
    assert not cloud.changing_calls()
    asked = [c for c in cloud.calls() if c.path.endswith(":testIamPermissions")]
    assert asked and all(len(c.body["permissions"]) <= 100 for c in asked)


def test_a_region_where_cloud_build_may_be_restricted_is_a_warning() -> None:
    """Some projects may build only in six regions (https://cloud.google.com/build/docs/locations)."""
    from spotcron.deploy.checkup import WARN, check_build_region, failed, format_checks

    check = check_build_region(Settings(project=PROJECT, bucket=BUCKET, region="europe-west3"))
    assert check.name == "Cloud Build in europe-west3"
    assert check.status == WARN and "cannot run builds in this region" in check.detail
    assert "us-central1, us-west2, europe-west1, asia-east1, australia-southeast1, southamerica-east1" in check.fix
    assert not failed([check])
    assert format_checks([check])[0].startswith("! Cloud Build in europe-west3: ")
    assert format_checks([check])[-1] == "No check failed; see the warnings above."
    assert check_build_region(Settings(project=PROJECT, bucket=BUCKET)).status == OK


def test_run_checks_include_the_build_region(cloud: FakeCloud) -> None:
    assert "Cloud Build in us-central1" in checks(cloud)


def test_apis_deploy_enables_itself_are_no_failure(cloud: FakeCloud) -> None:
    """Deploy enables the APIs it needs after the user confirms: an API that is off is reported,
    not failed."""
    cloud.access.disable("cloudfunctions.googleapis.com")
    cloud.access.disable("eventarc.googleapis.com")
    check = checks(cloud)["APIs"]
    assert check.status == OK
    assert check.detail == (f"2 of {len(REQUIRED_APIS)} APIs deploy needs are off; deploy enables them first, after "
                            "you confirm: cloudfunctions.googleapis.com, eventarc.googleapis.com")


def test_service_usage_off_fails_deploy_cannot_enable_it(cloud: FakeCloud) -> None:
    cloud.access.disable("serviceusage.googleapis.com")
    check = checks(cloud)["APIs"]
    assert check.status == FAIL and "cannot turn it on itself" in check.detail
    assert check.fix == f"gcloud services enable serviceusage.googleapis.com --project {PROJECT}"


DEVELOPER = "user:dev@example.com"


def test_missing_permissions_name_the_roles_that_grant_them(cloud: FakeCloud) -> None:
    """testIamPermissions answers from the project's IAM policy as written (a custom role here,
    propagated), the same policy every other fake API enforces."""
    from spotcron.deploy.checkup_rules import DEPLOY_PERMISSIONS

    role = f"projects/{PROJECT}/roles/deployer"
    cloud.access.custom_roles[role] = frozenset(DEPLOY_PERMISSIONS) - {"compute.firewalls.create",
                                                                        "cloudscheduler.jobs.create"}
    cloud.project_policies.grant(f"projects/{PROJECT}", role, DEVELOPER)
    assert checks(cloud, member=DEVELOPER)["permissions"].status == UNKNOWN  # the grant has not propagated yet
    cloud.clock.advance(cloud.access.grant_delay_s)
    check = checks(cloud, member=DEVELOPER)["permissions"]
    assert check.status == FAIL
    assert "cloudscheduler.jobs.create, compute.firewalls.create" in check.detail
    assert f"add-iam-policy-binding {PROJECT} --member=user:YOU@example.com --role=roles/cloudscheduler.admin" in check.fix
    assert "--role=roles/compute.securityAdmin" in check.fix
    assert checks(cloud)["permissions"].status == OK  # the Owner holds every one


def test_no_spot_gpu_quota_on_a_new_project_fails_before_the_first_start(cloud: FakeCloud) -> None:
    """A new project's T4 entries fail at insert with QUOTA_EXCEEDED; doctor says so first."""
    cloud.project_reads.region_quotas["us-central1"].update(
        {"PREEMPTIBLE_NVIDIA_T4_GPUS": (0.0, 0.0), "NVIDIA_T4_GPUS": (0.0, 0.0)})
    check = checks(cloud, [gpu_job()])["quota us-central1 nvidia-tesla-t4 (Spot)"]
    assert check.status == FAIL
    assert "PREEMPTIBLE_NVIDIA_T4_GPUS 0 free; NVIDIA_T4_GPUS 0 free" in check.detail
    assert check.fix.startswith("request at least 1 of PREEMPTIBLE_NVIDIA_T4_GPUS in us-central1")


def test_a_spot_gpu_may_use_standard_quota_and_gpus_all_regions_bounds_all(cloud: FakeCloud) -> None:
    cloud.project_reads.region_quotas["us-central1"].update(
        {"PREEMPTIBLE_NVIDIA_T4_GPUS": (0.0, 0.0), "NVIDIA_T4_GPUS": (2.0, 1.0)})
    cloud.project_reads.project_quotas["GPUS_ALL_REGIONS"] = (0.0, 0.0)
    found = checks(cloud, [gpu_job()])
    assert found["quota us-central1 nvidia-tesla-t4 (Spot)"].status == OK
    assert found["quota GPUS_ALL_REGIONS"].status == FAIL


@pytest.mark.parametrize(("constraint", "spec", "check", "needle"), [
    ("compute.trustedImageProjects", {"rules": [{"values": {"allowedValues": ["projects/debian-cloud"]}}]},
     "policy compute.trustedImageProjects", "projects/cos-cloud not allowed"),
    ("compute.requireShieldedVm", {"rules": [{"enforce": True}]}, "policy compute.requireShieldedVm",
     "GPU jobs run without Secure Boot"),
    ("cloudfunctions.allowedIngressSettings", {"rules": [{"values": {"allowedValues": ["ALLOW_INTERNAL_ONLY"]}}]},
     "policy cloudfunctions.allowedIngressSettings", "ALLOW_ALL not allowed"),
    ("run.allowedIngress", {"rules": [{"values": {"allowedValues": ["is:internal"]}}]}, "policy run.allowedIngress",
     "all not allowed"),
    ("gcp.resourceLocations", {"rules": [{"values": {"allowedValues": ["in:europe-west1-locations"]}}]},
     "policy gcp.resourceLocations", "may not be created in us-central1"),
])
def test_organisation_policies_that_would_refuse_spotcron(cloud, constraint, spec, check, needle) -> None:
    cloud.project_reads.policies[constraint] = spec
    found = checks(cloud, [plain_job(), gpu_job()])[check]
    assert found.status == FAIL and needle in found.detail
    assert f"gcloud org-policies describe {constraint} --effective --project {PROJECT}" in found.fix


def test_shielded_vm_enforced_is_fine_without_gpu_jobs(cloud: FakeCloud) -> None:
    cloud.project_reads.policies["compute.requireShieldedVm"] = {"rules": [{"enforce": True}]}
    assert checks(cloud, [plain_job()])["policy compute.requireShieldedVm"].status == OK


def test_no_default_network_fails_with_what_to_create_or_name(cloud: FakeCloud) -> None:
    """compute.skipDefaultNetworkCreation: the project has no `default` network for the VMs."""
    cloud.compute.networks = {}
    cloud.project_reads.policies["compute.skipDefaultNetworkCreation"] = {"rules": [{"enforce": True}]}
    found = checks(cloud)
    assert found["policy compute.skipDefaultNetworkCreation"].detail.startswith("enforced")
    network = found["network default"]
    assert network.status == FAIL
    assert f"gcloud compute networks create default --subnet-mode=auto --project {PROJECT}" in network.fix
    assert "`network:` (and `subnetwork:`)" in network.fix


def test_a_named_network_without_a_subnet_in_the_region_fails(cloud: FakeCloud) -> None:
    cloud.compute.networks["jobs-vpc"] = {"auto": False, "subnets": {"europe-west1": ["jobs"]}}
    found = checks(cloud, settings=Settings(project=PROJECT, bucket=BUCKET, network="jobs-vpc", subnetwork="jobs"))
    assert found["network jobs-vpc"].status == OK
    subnet = found["subnetwork jobs in us-central1"]
    assert subnet.status == FAIL
    assert "gcloud compute networks subnets create jobs --network jobs-vpc --region us-central1" in subnet.fix


def test_an_unreadable_policy_is_unknown_not_a_crash(cloud: FakeCloud) -> None:
    cloud.access.disable(ORG_POLICY)
    found = checks(cloud)
    policy = found["policy compute.trustedImageProjects"]
    assert policy.status == UNKNOWN and "could not check" in policy.detail
    assert "enable orgpolicy.googleapis.com" in policy.fix
    assert found["APIs"].status == OK  # doctor's own reading API is not one deploy needs


def test_rules_of_list_policies() -> None:
    assert list_allows({}, "ALLOW_ALL") == LIST_ALLOWED
    assert list_allows({"rules": [{"denyAll": True}]}, "x") == LIST_DENIED
    assert list_allows({"rules": [{"allowAll": True}]}, "x") == LIST_ALLOWED
    assert list_allows({"rules": [{"values": {"deniedValues": ["is:projects/cos-cloud"]}}]},
                       "projects/cos-cloud") == LIST_DENIED
    assert list_allows({"rules": [{"values": {"allowedValues": ["in:under-org"]}}]}, "x") == LIST_UNKNOWN
    assert location_allowed({"rules": [{"values": {"allowedValues": ["in:us-locations"]}}]}, "us-east4") == LIST_ALLOWED
    assert location_allowed({"rules": [{"values": {"allowedValues": ["in:us-central1-locations"]}}]},
                            "us-central1") == LIST_ALLOWED
    assert location_allowed({"rules": [{"values": {"allowedValues": ["in:eu-locations"]}}]}, "us-east4") == LIST_DENIED
    assert [gpu_metric(g) for g in ("nvidia-tesla-t4", "nvidia-l4", "nvidia-a100-80gb", "nvidia-h100-80gb")] == [
        "NVIDIA_T4_GPUS", "NVIDIA_L4_GPUS", "NVIDIA_A100_80GB_GPUS", "NVIDIA_H100_GPUS"]


def test_gpu_needs_cover_placement_regions() -> None:
    settings = Settings(project=PROJECT, bucket=BUCKET, placement={"regions": ["us-central1", "us-east1"]})
    needs = gpu_needs(settings, [gpu_job()])
    assert [(n.region, n.gpu, n.count, n.spot) for n in needs] == [
        ("us-central1", "nvidia-tesla-t4", 1, True), ("us-east1", "nvidia-tesla-t4", 1, True)]


# --- the commands ---------------------------------------------------------------------------------


@pytest.fixture
def invoke(cloud: FakeCloud, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    from google.auth.credentials import AnonymousCredentials

    user_repository(tmp_path, monkeypatch, STACK)
    make_source_root(tmp_path / "src")
    context = DeployContext(credentials=lambda project: AnonymousCredentials(),
                            clients=lambda project, credentials, concurrency: cloud.clients(concurrency),
                            source_root=lambda: tmp_path / "src", caller=lambda project: quick_caller(),
                            interactive=lambda: False, poll_initial=0.01)
    group = SpotcronGroup("spotcron")
    for command in [*DEPLOY_COMMANDS, *DOCTOR_COMMANDS]:
        group.add_command(command)

    def run(*args: str, obj: DeployContext | None = None) -> Result:
        return CliRunner().invoke(group, list(args), obj=obj or context, env={"COLUMNS": "200"},
                                  catch_exceptions=False)

    return run


def test_doctor_exits_0_on_a_healthy_project(invoke, cloud: FakeCloud) -> None:
    result = invoke("doctor")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].startswith(f"spotcron doctor — project {PROJECT}, region us-central1")
    assert f"✓ APIs: the {len(REQUIRED_APIS)} APIs deploy needs are enabled" in result.output
    assert result.output.splitlines()[-1].startswith("All ") and result.output.splitlines()[-1].endswith(
        "checks passed.")
    assert not cloud.changing_calls()


def test_doctor_exits_1_and_prints_the_fix(invoke, cloud: FakeCloud) -> None:
    cloud.access.disable("serviceusage.googleapis.com")
    result = invoke("doctor")
    assert result.exit_code == 1, result.output
    assert "✗ APIs: serviceusage.googleapis.com is off" in result.output
    assert f"    fix: gcloud services enable serviceusage.googleapis.com --project {PROJECT}" in result.output
    assert "1 check failed: a deploy or a run would fail" in result.output


def test_dry_run_runs_the_same_checks_first_and_exits_1_when_one_fails(invoke, cloud: FakeCloud) -> None:
    cloud.project_reads.policies["compute.trustedImageProjects"] = {"rules": [{"denyAll": True}]}
    result = invoke("deploy", "--dry-run")
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    failed = lines.index(next(line for line in lines if line.startswith("✗ policy compute.trustedImageProjects")))
    plan = lines.index(next(line for line in lines if line.startswith("Plan: ")))
    assert failed < plan  # the checks come before the plan
    assert lines[-1] == "A check above failed: fix it before deploying."
    assert not cloud.changing_calls()


def test_dry_run_offline_lists_a_first_deploy_without_credentials(invoke, cloud: FakeCloud) -> None:
    def no_credentials(project: str) -> None:
        raise AssertionError("--offline asked for credentials")

    result = invoke("deploy", "--dry-run", "--offline", obj=DeployContext(credentials=no_credentials,
                                                                           source_root=lambda: None))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1] == "What a first deploy creates in an empty project (nothing was read from Google, nothing changed):"
    assert "+ create bucket demo-proj-spotcron" in lines
    # The job builds' logs bucket, and Storage Admin there for their account (and nowhere else).
    assert "+ create bucket demo-proj-spotcron-build-logs" in lines
    grant = lines.index("~ update iam_policy bucket:demo-proj-spotcron-build-logs")
    assert lines[grant + 1] == f"    + roles/storage.admin serviceAccount:spotcron-job-build@{PROJECT}.iam.gserviceaccount.com"
    assert sum("roles/storage.admin" in line for line in lines) == 1
    assert "+ create function spotcron-start-job" in lines
    assert f"~ update subnetwork projects/{PROJECT}/regions/us-central1/subnetworks/default" in lines
    assert any(line.startswith("+ create scheduler_job spotcron-") for line in lines)
    assert cloud.calls() == []


def test_offline_goes_with_dry_run(invoke) -> None:
    result = invoke("deploy", "--offline")
    assert result.exit_code == 2
    assert "--offline goes with --dry-run" in result.output


def test_offline_shows_a_newcomers_plan_with_the_placeholders_still_in(invoke) -> None:
    """A newcomer has not set a project yet: the plan shows all the same, then what to set."""
    Path("infra/stack.yaml").write_text("project: my-project\nregion: us-central1\nbucket: my-project-spotcron\n")
    result = invoke("deploy", "--dry-run", "--offline", obj=DeployContext(credentials=None, source_root=lambda: None))
    assert result.exit_code == 0, result.output
    assert "+ create bucket my-project-spotcron" in result.output
    assert result.output.splitlines()[-2].startswith("Before a real deploy: infra/stack.yaml:1: project: 'my-project' "
                                                     "is the placeholder")
    Path("infra/stack.yaml").write_text("project: my-project\nregion: us-central1\nbucket: my-project-spotcron\n"
                                        "sweep_interval: 10s\n")
    assert invoke("deploy", "--dry-run", "--offline").exit_code == 2  # a real mistake still stops it


def test_the_examples_t4_entry_on_a_new_project_without_gpu_quota(cloud: FakeCloud) -> None:
    """The shipped dl-benchmark's T4 matrix entry would fail at every insert on a new project."""
    from spotcron.core.loader import load_jobs
    from tests.examples import example

    for region in cloud.project_reads.region_quotas.values():
        region.update({"PREEMPTIBLE_NVIDIA_T4_GPUS": (0.0, 0.0), "NVIDIA_T4_GPUS": (0.0, 0.0)})
    jobs = load_jobs([example("dl-benchmark")])
    [quota] = [c for c in checks(cloud, jobs).values() if c.name.startswith("quota us-central1 nvidia-tesla-t4")]
    assert quota.status == FAIL and quota.detail.startswith("dl-benchmark needs 1 x nvidia-tesla-t4 per VM")


def test_with_compute_engine_off_its_checks_say_why_they_could_not_run(cloud: FakeCloud) -> None:
    cloud.access.disable("compute.googleapis.com")
    found = checks(cloud, [gpu_job()])
    assert found["APIs"].status == OK and "compute.googleapis.com" in found["APIs"].detail
    network = found["network default"]
    assert network.status == UNKNOWN and "compute.googleapis.com is not enabled yet; deploy enables it" in network.detail
    assert network.fix.startswith("run spotcron doctor again after the first deploy")
    assert found["quota us-central1 nvidia-tesla-t4 (Spot)"].status == UNKNOWN


def test_doctor_without_credentials_says_how_to_log_in_and_what_works_without(invoke) -> None:
    from spotcron.gcp.admin.calls import MissingCredentials

    def none(project: str) -> None:
        raise MissingCredentials("File x was not found", "deploy needs APIs")

    result = invoke("doctor", obj=DeployContext(credentials=none))
    assert result.exit_code == 2
    assert "no Google credentials found" in result.output
    assert "`spotcron deploy --dry-run --offline` shows what a first deploy creates" in result.output


def test_an_empty_project_fails_nothing_deploy_fixes_and_says_what_it_could_not_check(empty: FakeCloud) -> None:
    """A project just created: the APIs are off (deploy enables them), so the checks that read
    through them cannot be made yet; none fails, and nothing changes."""
    found = checks(empty, [plain_job(), gpu_job()])
    assert FAIL not in {c.status for c in found.values()}, [c for c in found.values() if c.status == FAIL]
    assert found["APIs"].status == OK and "deploy enables them first" in found["APIs"].detail
    assert found["network default"].status == UNKNOWN
    assert found["policy compute.trustedImageProjects"].status == UNKNOWN
    assert not empty.changing_calls()


def test_after_a_deploy_doctor_sees_what_deploy_did(empty: FakeCloud, source) -> None:
    """One project: the APIs deploy enabled are the ones doctor lists, and the checks that could
    not be made before (their APIs were off) now pass."""
    from tests.deploy.conftest import Deployer, make_settings

    deployer = Deployer(empty, make_settings(), source)
    deployer.deploy(deployer.jobs(JOBS_DIR))
    found = checks(empty, [plain_job()])
    assert found["APIs"].detail == f"the {len(REQUIRED_APIS)} APIs deploy needs are enabled"
    assert found["permissions"].status == OK
    assert found["network default"].status == OK and found["subnetwork default in us-central1"].status == OK
    assert {c.status for n, c in found.items() if n.startswith("policy ")} == {UNKNOWN}  # Org Policy: not deploy's
