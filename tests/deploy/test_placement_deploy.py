"""Deploy for placement: the advice role only when placement is on; settings reach the functions."""

from __future__ import annotations

from spotcron.core.loader import load_jobs
from spotcron.core.settings import load_settings
from spotcron.deploy.desired import desired_state, function_environment
from spotcron.deploy.iam import ADVICE_PERMISSIONS, ADVICE_ROLE, managed_roles, security_problems
from spotcron.deploy.naming import Names
from spotcron.deploy.resources import IAM_POLICY
from tests.deploy.conftest import JOBS_DIR, make_settings

FUNCTIONS = "serviceAccount:spotcron-functions@demo-proj.iam.gserviceaccount.com"
PLACED = {"regions": ["us-west4", "us-east1"]}


def project_roles(settings, jobs=None) -> dict[str, tuple[str, ...]]:
    state = desired_state(settings, jobs if jobs is not None else load_jobs([JOBS_DIR]), "deploy/source-0.zip",
                          "https://job-done.example")
    return state[(IAM_POLICY, "project:demo-proj")].fields


def test_the_advice_role_is_granted_only_when_placement_is_on():
    assert ADVICE_ROLE not in project_roles(make_settings())
    assert project_roles(make_settings(placement=PLACED))[ADVICE_ROLE] == (FUNCTIONS,)
    assert ADVICE_PERMISSIONS == ("compute.advice.capacity", "compute.advice.capacityHistory")


def test_turning_placement_off_revokes_the_advice_role():
    # A managed role: a deploy without placement takes it back from the functions account.
    assert ADVICE_ROLE in managed_roles(Names.of(make_settings()))


def test_the_advice_binding_passes_the_security_check():
    from spotcron.deploy.iam import bindings

    assert security_problems(bindings(Names.of(make_settings()), advice=True)) == []


def test_the_functions_get_the_placement_settings():
    settings = make_settings(placement=PLACED)
    env = function_environment(settings, "https://x.example/job_done")
    assert load_settings(None, env).placement == settings.placement


def test_each_placement_region_gets_private_google_access_on_its_subnet():
    from spotcron.deploy.resources import SUBNETWORK

    def subnets(settings):
        state = desired_state(settings, load_jobs([JOBS_DIR]), "deploy/source-0.zip", "https://job-done.example")
        return sorted(name for kind, name in state if kind == SUBNETWORK)

    home = "projects/demo-proj/regions/us-central1/subnetworks/default"
    assert subnets(make_settings()) == [home]
    # A VM without an external address in another region reaches Google's APIs through its own
    # region's subnet: each region placement may use needs Private Google Access there too.
    assert subnets(make_settings(placement=PLACED)) == [
        home, "projects/demo-proj/regions/us-east1/subnetworks/default",
        "projects/demo-proj/regions/us-west4/subnetworks/default"]
