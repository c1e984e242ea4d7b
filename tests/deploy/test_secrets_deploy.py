"""Deploy of jobs with secrets on the fake Google Cloud through the real clients: each job runs as
its own account, which may read exactly its secrets, and deploy refuses an unreadable secret
before it creates anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from google.cloud.iam_admin_v1 import types

from spotcron.cli import SpotcronGroup
from spotcron.cli.deploy import COMMANDS, DeployContext
from spotcron.core.descriptor import RunDescriptor
from spotcron.deploy.secret_grants import secrets_account
from spotcron.gcp.admin.calls import DeployError
from tests.deploy.conftest import (
    BUCKET,
    PROJECT,
    Deployer,
    make_settings,
    make_source_root,
    quick_caller,
    user_repository,
)
from tests.fakes.deploy.cloud import FakeCloud

ACCESSOR = "roles/secretmanager.secretAccessor"
TOKEN = f"projects/{PROJECT}/secrets/bot-token"
OTHER = f"projects/{PROJECT}/secrets/nightly-key"
VM = f"serviceAccount:spotcron-vm@{PROJECT}.iam.gserviceaccount.com"


def add_secrets(jobs_dir: Path) -> None:
    """Secrets for bot and nightly; each then runs as the account deploy makes for it, so its image
    is pushed to that account's repository (the only one it reads, core/job_repositories.py)."""
    settings = make_settings()
    for name, secrets in (("bot", "secrets:\n  BOT_TOKEN: bot-token\n"),
                          ("nightly", "secrets:\n  KEY: {secret: nightly-key, version: 1}\n")):
        path = jobs_dir / f"{name}.yaml"
        text = path.read_text().replace(settings.registry + "/", settings.registry_for(secrets_account(settings, name)) + "/")
        path.write_text(text + secrets)


def test_each_job_reads_exactly_its_own_secrets_as_its_own_account(deployer: Deployer, cloud: FakeCloud,
                                                                    jobs_dir) -> None:
    cloud.secrets.add(TOKEN, b"v1", b"v2")
    cloud.secrets.add(OTHER, b"k1")
    add_secrets(jobs_dir)
    deployer.deploy(deployer.jobs(jobs_dir))
    settings = make_settings()
    bot, nightly = secrets_account(settings, "bot"), secrets_account(settings, "nightly")
    assert bot != nightly
    assert bot in cloud.iam.accounts and nightly in cloud.iam.accounts
    # A real policy binding on each secret, for its job's account only: never the shared VM account.
    assert cloud.secrets.readers(TOKEN) == {f"serviceAccount:{bot}"}
    assert cloud.secrets.readers(OTHER) == {f"serviceAccount:{nightly}"}
    assert VM not in cloud.secrets.readers(TOKEN) | cloud.secrets.readers(OTHER)
    assert (f"projects/{PROJECT}", ACCESSOR) not in {
        (r, b["role"]) for r, p in cloud.project_policies.all().items() for b in p["bindings"]}
    # The deployed spec names the account and the secrets, never a value, and runs without metadata access.
    import json

    from spotcron.core.spec import JobSpec
    data, _ = next(v for k, v in cloud.storage.objects.items() if k[1] == "deployed/bot.json")
    deployed = JobSpec.from_payload(json.loads(data))
    assert deployed.service_account == bot and deployed.deploy_account and not deployed.reaches_metadata
    assert deployed.secrets["BOT_TOKEN"].secret == "bot-token"
    assert deployer.plan(deployer.jobs(jobs_dir)).actions == []  # a second plan changes nothing


@pytest.mark.parametrize(("setup", "expected"), [
    ("missing", "secrets.BOT_TOKEN (projects/demo-proj/secrets/bot-token): no such secret; create it with "
                "`spotcron secrets set bot-token --cloud`"),
    ("no-version", "has no enabled version"),
    ("disabled-pin", "secrets.KEY (projects/demo-proj/secrets/nightly-key): version 1 is disabled"),
])
def test_a_secret_that_cannot_be_read_stops_deploy_before_anything_is_created(deployer: Deployer, cloud: FakeCloud,
                                                                             jobs_dir, setup, expected) -> None:
    if setup != "missing":
        cloud.secrets.add(TOKEN, *([] if setup == "no-version" else [b"v1"]))
    cloud.secrets.add(OTHER, b"k1", states=("DISABLED",) if setup == "disabled-pin" else ())
    add_secrets(jobs_dir)
    cloud.reset_log()
    with pytest.raises(DeployError) as caught:
        deployer.deploy(deployer.jobs(jobs_dir))
    assert expected in str(caught.value)
    assert "nothing was changed" in str(caught.value)
    assert cloud.changing_calls() == []


def test_another_projects_secret_must_already_let_the_account_read_it(deployer: Deployer, cloud: FakeCloud,
                                                                     jobs_dir) -> None:
    # The project is in use: its owner made the job's account and reads secrets already.
    cloud.access.enable_all(["iam.googleapis.com", "secretmanager.googleapis.com"])
    cloud.clients().iam.create_service_account(request=types.CreateServiceAccountRequest(
        name=f"projects/{PROJECT}", account_id="bot-runner"))
    foreign = "projects/other-proj/secrets/shared"
    cloud.secrets.add(foreign, b"x")
    bot = jobs_dir / "bot.yaml"
    bot.write_text(bot.read_text() + f"service_account: bot-runner@{PROJECT}.iam.gserviceaccount.com\n"
                   f"secrets:\n  SHARED: {foreign}\n")
    with pytest.raises(DeployError) as caught:
        deployer.deploy(deployer.jobs(jobs_dir))
    assert "may not read it" in str(caught.value) and "gcloud secrets add-iam-policy-binding" in str(caught.value)


def test_the_start_function_creates_the_vm_as_the_jobs_account_with_names_only(deployer: Deployer, cloud: FakeCloud,
                                                                              jobs_dir) -> None:
    from spotcron.deploy.secret_grants import with_secret_accounts
    from spotcron.engine import transitions
    from spotcron.engine.attempts import instance_request

    add_secrets(jobs_dir)
    settings = make_settings()
    [bot] = [j for j in with_secret_accounts(settings, deployer.jobs(jobs_dir)) if j.name == "bot"]
    attempt = transitions.new_attempt(_record(bot), bot, settings.zones)
    assert attempt.service_account == secrets_account(settings, "bot")
    assert not bot.reaches_metadata  # its container still cannot reach the metadata server
    request = instance_request(_record(bot), bot, attempt, _Deps(settings))
    descriptor = RunDescriptor.from_metadata(request.metadata["spotcron-run"])
    assert [(s.name, s.version) for s in descriptor.secrets] == [("BOT_TOKEN", f"{TOKEN}/versions/latest")]
    assert descriptor.metadata_access is False


def test_dry_run_shows_the_jobs_account_and_its_accessor_binding(cloud: FakeCloud, tmp_path: Path, monkeypatch) -> None:
    stack = f"project: {PROJECT}\nregion: us-central1\nbucket: {BUCKET}\nsweep_interval: 5m\n"
    user_repository(tmp_path, monkeypatch, stack)
    make_source_root(tmp_path / "src")
    add_secrets(tmp_path / "jobs")
    cloud.secrets.add(TOKEN, b"v1")
    cloud.secrets.add(OTHER, b"k1")
    from google.auth.credentials import AnonymousCredentials

    context = DeployContext(credentials=lambda project: AnonymousCredentials(),
                            clients=lambda project, credentials, concurrency: cloud.clients(concurrency),
                            source_root=lambda: tmp_path / "src", caller=lambda project: quick_caller(),
                            interactive=lambda: False, poll_initial=0.01)
    group = SpotcronGroup("spotcron")
    for command in COMMANDS:
        group.add_command(command)
    result = CliRunner().invoke(group, ["deploy", "--dry-run"], obj=context, env={"COLUMNS": "200"},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    bot = secrets_account(make_settings(), "bot")
    lines = result.output.splitlines()
    assert f"+ create service_account {bot}" in lines
    assert f"~ update iam_policy secret:{TOKEN}" in lines
    assert f"    + {ACCESSOR} serviceAccount:{bot}" in lines
    assert not cloud.changing_calls()


# --- small stand-ins for the engine test -----------------------------------------------------------

def _record(spec):
    from datetime import UTC, datetime

    from spotcron.core.runs import RunRecord

    return RunRecord.model_validate({"job": spec.name, "run_id": "20260101-0000", "state": "starting",
                                     "created_at": datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
                                     "updated_at": datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
                                     "tick": datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
                                     "spec": spec.to_payload()})


class _Deps:
    def __init__(self, settings):
        self.settings = settings

        class _Clock:
            @staticmethod
            def now():
                from datetime import UTC, datetime
                return datetime(2026, 1, 1, tzinfo=UTC)

        class _Blobs:
            bucket = BUCKET

        self.clock, self.blobs = _Clock(), _Blobs()

    def user_data(self) -> str:
        return "#cloud-config\n"


def test_deploy_refuses_jobs_that_share_an_account_with_different_secrets(deployer: Deployer, cloud: FakeCloud,
                                                                          jobs_dir) -> None:
    """The job files' check refuses it too; deploy checks the jobs it is handed (and the accounts it
    makes) again, since a job running as an account with another job's secrets reads them."""
    cloud.enable_apis()
    cloud.secrets.add(TOKEN, b"v1")
    add_secrets(jobs_dir)
    jobs = deployer.jobs(jobs_dir)
    runner = f"runner@{PROJECT}.iam.gserviceaccount.com"
    jobs = [job.model_copy(update={"service_account": runner}) if job.name in ("bot", "nightly") else job
            for job in jobs]
    cloud.reset_log()
    with pytest.raises(DeployError, match="jobs share a service account, so nothing was changed") as caught:
        deployer.deploy(jobs)
    assert f"job bot: service account {runner} is also the account of job(s) nightly" in str(caught.value)
    assert cloud.changing_calls() == []
