"""A run after a strict deploy, as the identities that make its calls for real: the functions'
account starts the VM (Compute Engine insert, with actAs on the VM account), keeps the run's
records (Storage), tells the events topic (Pub/Sub), and the sweep lists and deletes VMs. Each
call is refused unless the IAM policies deploy wrote grant it, so a role deploy forgets fails
here. Through the real adapters (spotcron/gcp/) on FakeCloud's endpoints."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

import pytest

from spotcron.core.settings import Settings
from spotcron.engine.deps import Deps
from spotcron.engine.start_job import launch
from spotcron.engine.sweep import sweep
from spotcron.gcp.compute import GoogleCompute
from spotcron.gcp.pubsub import PubSubEvents
from spotcron.gcp.storage import GcsBlobs
from spotcron.testing.harness import CREDENTIALS_URL, JOB_DONE_URL, make_spec
from spotcron.testing.memory import FakeClock, MemoryMinter
from spotcron.testing.token_issuer import ClockedIdentity
from tests.deploy.conftest import BUCKET, JOBS_DIR, PROJECT, Deployer, make_settings
from tests.fakes.deploy.cloud import FakeCloud, FakeCredentials
from tests.fakes.deploy.common import PolicyStore

NOW = datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC)


def run_settings() -> Settings:
    return make_settings(job_done_url=JOB_DONE_URL, credentials_url=CREDENTIALS_URL)


def deps_as(cloud: FakeCloud, settings: Settings, member: str) -> Deps:
    """The functions' Deps (runtime/google.py) with every Google client calling as `member`."""
    clients = cloud.clients(member=member)
    clock = FakeClock(NOW)
    return Deps(settings=settings, blobs=GcsBlobs(BUCKET, client=clients.storage),
                compute=GoogleCompute(PROJECT, settings.zones, client_options={"api_endpoint": cloud.http.url},
                                      credentials=FakeCredentials(member)),
                events=PubSubEvents(PROJECT, publisher=_publisher(cloud, member)), identity=ClockedIdentity(clock),
                clock=clock, user_data=lambda: "#cloud-config\n", minter=MemoryMinter())


def _publisher(cloud: FakeCloud, member: str) -> Any:
    """google.cloud.pubsub's publisher, as the functions build it, over REST to the fake."""
    from google.cloud import pubsub_v1

    return pubsub_v1.PublisherClient(credentials=FakeCredentials(member), transport="rest",
                                     client_options={"api_endpoint": cloud.http.url})


def deployed(deployer: Deployer, cloud: FakeCloud) -> tuple[Settings, str, str]:
    deployer.deploy(deployer.jobs(JOBS_DIR))
    cloud.clock.advance(cloud.access.grant_delay_s)  # the last grants have propagated
    settings = run_settings()
    return settings, settings.functions_service_account_email, settings.vm_service_account_email


def deployed_bot(deps: Deps):
    """Job bot as deploy left it: what start_job resolves and runs (no other spec gets a VM)."""
    from spotcron.engine.deployed import SpecStore

    deployed_spec = SpecStore(deps.blobs).read("bot")
    assert deployed_spec is not None, "deploy left no deployed/bot.json"
    return deployed_spec.spec


def test_a_run_starts_and_is_swept_as_the_functions_account(deployer: Deployer, cloud: FakeCloud) -> None:
    settings, functions, vm = deployed(deployer, cloud)
    deps = deps_as(cloud, settings, f"serviceAccount:{functions}")
    [outcome] = launch(deps, deployed_bot(deps), requested_at=NOW)
    assert outcome.state in ("starting", "running"), outcome
    [(who, body)] = cloud.instances.inserted
    assert who == f"serviceAccount:{functions}"
    assert [a["email"] for a in body["serviceAccounts"]] == [vm]
    assert any(topic.endswith(f"/topics/{settings.events_topic}") for topic, _ in cloud.pubsub.published)
    assert sweep(deps) is not None
    assert not [r for r in cloud.access.refusals if functions in r], cloud.access.refusals


def test_a_stranger_cannot_start_a_vm(deployer: Deployer, cloud: FakeCloud) -> None:
    settings, _, _ = deployed(deployer, cloud)
    deps = deps_as(cloud, settings, "serviceAccount:someone@other.iam.gserviceaccount.com")
    with pytest.raises(Exception):  # noqa: B017 - refused at its first read of the bucket
        launch(deps, make_spec(), requested_at=NOW)
    assert cloud.instances.inserted == []


def _revoke(store: PolicyStore, resource: str, role: str, member: str) -> None:
    policy: dict[str, Any] = store.get(resource)
    for binding in policy["bindings"]:
        if binding["role"] == role:
            binding["members"] = [m for m in binding["members"] if m != member]
    policy.pop("etag", None)
    store.set(resource, policy)


@pytest.mark.parametrize(("store", "resource", "role", "permission"), [
    ("project", f"projects/{PROJECT}", "roles/compute.instanceAdmin.v1", "compute.instances."),
    ("account", "VM", "roles/iam.serviceAccountUser", "iam.serviceAccounts.actAs"),
    ("bucket", f"projects/_/buckets/{BUCKET}", "roles/storage.objectAdmin", "storage.objects."),
    ("topic", "EVENTS", "roles/pubsub.publisher", "pubsub.topics.publish"),
])
def test_each_role_deploy_grants_the_functions_is_needed(deployer: Deployer, cloud: FakeCloud, store: str,
                                                         resource: str, role: str, permission: str) -> None:
    """Without any one of them the run's call is refused, as Google would refuse it."""
    settings, functions, vm = deployed(deployer, cloud)
    member = f"serviceAccount:{functions}"
    stores = {"project": cloud.project_policies, "account": cloud.iam.policies, "bucket": cloud.storage.policies,
              "topic": cloud.pubsub.policies}
    resource = {"VM": f"projects/{PROJECT}/serviceAccounts/{vm}",
                "EVENTS": f"projects/{PROJECT}/topics/{settings.events_topic}"}.get(resource, resource)
    assert member in stores[store].members(resource, role)  # deploy granted it
    _revoke(stores[store], resource, role, member)
    deps = deps_as(cloud, settings, member)
    with contextlib.suppress(Exception):  # a refused read stops the start; a refused insert ends the run
        launch(deps, deployed_bot(deps) if store != "bucket" else make_spec(), requested_at=NOW)
    assert any(permission in r and member in r for r in cloud.access.refusals), cloud.access.refusals
    if store != "topic":  # the events topic is told after the start
        assert cloud.instances.inserted == []


@pytest.mark.parametrize("forget", [False, True])
def test_a_job_with_its_own_account_runs_as_it(deployer: Deployer, cloud: FakeCloud, jobs_dir, forget: bool) -> None:
    """The VM of a job naming `service_account:` runs as that account: the functions need actAs on
    it (deploy grants Service Account User on that one account), or the insert is refused."""
    from tests.deploy.test_job_accounts import JOB_ACCOUNT, create_account, name_account

    create_account(cloud)
    name_account(jobs_dir)
    [bot] = [job for job in deployer.jobs(jobs_dir) if job.service_account == JOB_ACCOUNT]
    deployer.deploy(deployer.jobs(jobs_dir))
    cloud.clock.advance(cloud.access.grant_delay_s)
    settings = run_settings()
    member = f"serviceAccount:{settings.functions_service_account_email}"
    if forget:
        _revoke(cloud.iam.policies, f"projects/{PROJECT}/serviceAccounts/{JOB_ACCOUNT}",
                "roles/iam.serviceAccountUser", member)
    [outcome] = launch(deps_as(cloud, settings, member), bot, requested_at=NOW)
    if forget:
        assert outcome.state == "failed" and "iam.serviceAccounts.actAs" in (outcome.reason or "")
        assert cloud.instances.inserted == []
    else:
        assert outcome.state in ("starting", "running"), outcome
        [(_, body)] = cloud.instances.inserted
        assert [a["email"] for a in body["serviceAccounts"]] == [JOB_ACCOUNT]
        # The VM pulls the job's image as that account: from its own account's repository, which
        # the shared VM account cannot read.
        assert cloud.may_pull(JOB_ACCOUNT, bot.image)
        assert not cloud.may_pull(settings.vm_service_account_email, bot.image)


def test_the_vm_account_may_do_what_the_vm_does_and_no_more(deployer: Deployer, cloud: FakeCloud) -> None:
    """The VM's own calls, as the VM account, against the policies deploy wrote (propagated): pull
    the image, call job_done and the credentials broker (Cloud Run checks run.routes.invoke,
    https://cloud.google.com/run/docs/securing/managing-access); never start_job, never the
    bucket itself (its uploads use the broker's downscoped token)."""
    _, _, vm = deployed(deployer, cloud)
    member = f"serviceAccount:{vm}"
    location = f"projects/{PROJECT}/locations/us-central1"
    project = cloud.project_policies.policy(f"projects/{PROJECT}")

    def invoke(function: str) -> bool:
        service = f"{location}/services/{function}"
        return cloud.access.allowed(member, "run.routes.invoke", service,
                                    [cloud.functions.run_policies.policy(service), project])

    repository = f"{location}/repositories/spotcron-jobs"
    assert cloud.access.allowed(member, "artifactregistry.repositories.downloadArtifacts", repository,
                                [cloud.registry.policies.policy(repository), project])
    assert invoke("spotcron-job-done") and invoke("spotcron-credentials")
    assert not invoke("spotcron-start-job") and not invoke("spotcron-sweep")
    bucket = f"projects/_/buckets/{BUCKET}"
    assert not cloud.access.allowed(member, "storage.objects.create", f"{bucket}/objects/x",
                                    [cloud.storage.policies.policy(bucket), project])
