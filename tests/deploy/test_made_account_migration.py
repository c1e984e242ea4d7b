"""The accounts deploy makes for jobs with secrets: a name change moves a job to a new account and
retires the old one cleanly; an account made for another job is never taken over; and the record
of a retired account lives exactly until its grants are gone (deploy/retirement.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from google.cloud.iam_admin_v1 import types

from spotcron.core.settings import Settings
from spotcron.deploy import secret_grants
from spotcron.deploy.secret_grants import secrets_account
from spotcron.gcp.admin.calls import DeployError
from tests.deploy.conftest import BUCKET, PROJECT, Deployer, make_settings
from tests.deploy.test_job_accounts import every_binding_of
from tests.fakes.deploy.cloud import FakeCloud

TOKEN = f"projects/{PROJECT}/secrets/bot-token"


def old_scheme(settings: Settings, job: str) -> str:
    """How made accounts were named before: 19 characters of the name and 24 bits of hash."""
    return settings.account_email(f"sc-{job[:19].rstrip('-')}-{hashlib.sha256(job.encode()).hexdigest()[:6]}")


def with_secret(jobs_dir: Path, account: str) -> None:
    """bot reads bot-token, its image in the repository of `account` (the one that account reads)."""
    settings = make_settings()
    bot = jobs_dir / "bot.yaml"
    lines = [line for line in bot.read_text().splitlines() if not line.startswith(("secrets:", "  BOT_TOKEN"))]
    text = "\n".join(lines) + "\n"
    for candidate in (settings.registry, settings.registry_for(old_scheme(settings, "bot")),
                      settings.registry_for(secrets_account(settings, "bot"))):
        text = text.replace(candidate + "/bot:", settings.registry_for(account) + "/bot:")
    bot.write_text(text + "secrets:\n  BOT_TOKEN: bot-token\n")


def _records(cloud: FakeCloud) -> list[str]:
    return [name for (bucket, name) in cloud.storage.objects if bucket == BUCKET and name.startswith("deploy/retired/")]


def test_a_job_moved_to_the_new_account_name_leaves_nothing_with_the_old_one(
        deployer: Deployer, cloud: FakeCloud, jobs_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = make_settings()
    old, new = old_scheme(settings, "bot"), secrets_account(settings, "bot")
    assert old != new
    cloud.secrets.add(TOKEN, b"v1")
    with monkeypatch.context() as patched:  # a stack deployed by a release that named accounts the old way
        patched.setattr(secret_grants, "secrets_account", old_scheme)
        with_secret(jobs_dir, old)
        deployer.deploy(deployer.jobs(jobs_dir))
    assert cloud.secrets.readers(TOKEN) == {f"serviceAccount:{old}"}
    assert every_binding_of(cloud, f"serviceAccount:{old}")
    with_secret(jobs_dir, new)
    deployer.deploy(deployer.jobs(jobs_dir))
    cloud.clock.advance(cloud.access.grant_delay_s)
    assert cloud.secrets.readers(TOKEN) == {f"serviceAccount:{new}"}
    assert every_binding_of(cloud, f"serviceAccount:{old}") == set()
    assert cloud.iam.policies.members(f"projects/{PROJECT}/serviceAccounts/{old}", "roles/iam.serviceAccountUser") \
        == set()
    assert _records(cloud) == []  # revoked in full: nothing left to remember
    assert deployer.plan(deployer.jobs(jobs_dir)).actions == []


def test_an_account_made_for_another_job_is_never_taken_over(deployer: Deployer, cloud: FakeCloud,
                                                            jobs_dir: Path) -> None:
    settings = make_settings()
    account = secrets_account(settings, "bot")
    cloud.secrets.add(TOKEN, b"v1")
    cloud.enable_apis()
    cloud.clients().iam.create_service_account(request=types.CreateServiceAccountRequest(
        name=f"projects/{PROJECT}", account_id=account.split("@")[0],
        service_account=types.ServiceAccount(display_name="spotcron job payroll (secrets)")))
    with_secret(jobs_dir, account)
    with pytest.raises(DeployError) as refused:
        deployer.deploy(deployer.jobs(jobs_dir))
    text = str(refused.value)
    assert "nothing was changed" in text and f"job bot: the account deploy makes for its secrets, {account}" in text
    assert "'spotcron job payroll (secrets)'" in text and "gcloud iam service-accounts delete" in text
    assert cloud.secrets.readers(TOKEN) == set()


def test_the_record_of_a_retired_account_outlives_a_failed_deploy_and_goes_with_its_grants(
        deployer: Deployer, cloud: FakeCloud, jobs_dir: Path, tmp_path: Path) -> None:
    from spotcron.deploy.apply import DeployFailed
    from spotcron.deploy.source import build_source
    from tests.deploy.conftest import make_source_root
    from tests.deploy.test_job_accounts import JOB, JOB_ACCOUNT, create_account, name_account

    create_account(cloud)
    name_account(jobs_dir)
    deployer.deploy(deployer.jobs(jobs_dir))
    assert _records(cloud) == []
    bot = jobs_dir / "bot.yaml"
    bot.write_text(bot.read_text().replace(f"service_account: {JOB_ACCOUNT}\n", ""))
    deployer.source = build_source(make_source_root(tmp_path / "src2", main="def start_job(event):\n    return 2\n"))
    cloud.functions.fail_builds = True
    with pytest.raises(DeployFailed):
        deployer.deploy(deployer.jobs(jobs_dir))
    assert _records(cloud) == [f"deploy/retired/{JOB_ACCOUNT}"]  # written before the spec stopped naming it
    assert every_binding_of(cloud, JOB)
    cloud.functions.fail_builds = False
    deployer.deploy(deployer.jobs(jobs_dir))
    assert _records(cloud) == []
    assert every_binding_of(cloud, JOB) == set()
    assert deployer.plan(deployer.jobs(jobs_dir)).actions == []
