"""A newcomer's `spotcron deploy --dry-run` before setting a project: the placeholder error also
points at `--dry-run --offline`, which shows what a first deploy creates; a real deploy is told
only what to set."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from spotcron.cli import cli
from spotcron.cli.deploy import DeployContext
from tests.deploy.conftest import user_repository

NEW_FOLDER = "project: my-project\nregion: us-central1\nbucket: my-project-spotcron\n"


def _no_credentials(project: str):
    raise AssertionError("credentials were asked for before the stack file was checked")


@pytest.mark.parametrize(("args", "points_offline"), [(["--dry-run"], True), (["--yes"], False)])
def test_placeholder_project_points_a_dry_run_at_offline(tmp_path, monkeypatch, args, points_offline):
    user_repository(tmp_path, monkeypatch, NEW_FOLDER, jobs=("bot.yaml",))
    done = CliRunner().invoke(cli, ["deploy", *args], obj=DeployContext(credentials=_no_credentials),
                              env={"COLUMNS": "200"}, catch_exceptions=False)
    assert done.exit_code == 2
    project = next(line for line in done.output.splitlines() if ": project: " in line)
    assert project.startswith("infra/stack.yaml:1: project: 'my-project' is the placeholder")
    assert ("`spotcron deploy --dry-run --offline` lists what a first deploy creates" in project) == points_offline


LOCAL_ONLY = ('schedule: "0 * * * *"\nimage: mirror.gcr.io/library/python:3.11-slim\n'
              "local:\n  command: python3 bot/bot.py\nsecrets:\n  TOKEN: {secret: bot-token}\n"
              "  HOOK: {secret: team-hook}\n")


def _offline(tmp_path, monkeypatch, job: str):
    user_repository(tmp_path, monkeypatch, NEW_FOLDER, jobs=())
    (tmp_path / "jobs" / "mybot.yaml").write_text(job)
    return CliRunner().invoke(cli, ["deploy", "--dry-run", "--offline"], obj=DeployContext(credentials=_no_credentials),
                              env={"COLUMNS": "200"}, catch_exceptions=False)


def test_the_offline_plan_warns_about_a_local_command_its_vm_would_not_run(tmp_path, monkeypatch):
    done = _offline(tmp_path, monkeypatch, LOCAL_ONLY)
    assert done.exit_code == 0, done.output
    assert ("warning: mybot: local.command runs `python3 bot/bot.py` on this machine, but on a VM the job runs "
            "mirror.gcr.io/library/python:3.11-slim's own default command") in " ".join(done.stderr.split())


def test_the_offline_plan_lists_the_account_deploy_makes_for_a_jobs_secrets_and_each_binding(tmp_path, monkeypatch):
    """docs/jobs.md: a job with secrets and no service_account runs as an account deploy makes
    (sc-JOB-HASH) that alone may read each of its secrets; the offline plan shows them as the online one does."""
    from spotcron.core.settings import Settings
    from spotcron.deploy.secret_grants import secrets_account

    done = _offline(tmp_path, monkeypatch, LOCAL_ONLY)
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    account = secrets_account(Settings(project="my-project", bucket="my-project-spotcron"), "mybot")
    assert account.startswith("sc-mybot-")
    assert f"+ create service_account {account}" in lines
    for secret in ("bot-token", "team-hook"):
        at = lines.index(f"~ update iam_policy secret:projects/my-project/secrets/{secret}")
        assert lines[at + 1] == f"    + roles/secretmanager.secretAccessor serviceAccount:{account}"


def test_the_offline_plan_points_at_a_command_not_at_a_makefile_the_folder_lacks(tmp_path, monkeypatch):
    done = _offline(tmp_path, monkeypatch, LOCAL_ONLY)
    assert done.exit_code == 0, done.output
    assert not (tmp_path / "Makefile").exists()
    flat = " ".join(done.stdout.split())
    assert "make plan" not in flat
    assert "`spotcron doctor` checks the project and `spotcron deploy --dry-run` reads what exists." in flat
