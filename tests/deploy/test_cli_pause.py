"""`spotcron pause|resume JOB --cloud` through click, against the fake Google Cloud; and what
`spotcron delete` says about Google Cloud."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from spotcron.cli import SpotcronGroup
from spotcron.cli.deploy import DeployContext
from spotcron.cli.manage import COMMANDS
from spotcron.gcp.admin.calls import MissingCredentials
from tests.deploy.conftest import (
    BUCKET,
    JOBS_DIR,
    PROJECT,
    STACK,
    Deployer,
    make_settings,
    quick_caller,
    user_repository,
)
from tests.fakes.deploy.cloud import FakeCloud

LOCATION = f"projects/{PROJECT}/locations/us-central1"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return user_repository(tmp_path, monkeypatch)


@pytest.fixture
def context(cloud: FakeCloud, workdir: Path) -> DeployContext:
    from google.auth.credentials import AnonymousCredentials

    return DeployContext(credentials=lambda project: AnonymousCredentials(),
                         clients=lambda project, credentials, concurrency: cloud.clients(concurrency),
                         caller=lambda project: quick_caller(), interactive=lambda: False,
                         sleep=cloud.clock.sleep)


@pytest.fixture
def invoke(context: DeployContext) -> Callable[..., Result]:
    group = SpotcronGroup("spotcron")
    for command in COMMANDS:
        group.add_command(command)

    def run(*args: str, obj: DeployContext | None = None) -> Result:
        return CliRunner().invoke(group, list(args), obj=obj or context, env={"COLUMNS": "200"},
                                  catch_exceptions=False)

    return run


def _said(result: Result) -> str:
    return " ".join(result.output.split())


def test_pause_cloud_per_job_pauses_the_entry_and_edits_the_file(invoke, deployer: Deployer, cloud: FakeCloud,
                                                                 workdir: Path) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR), settings=make_settings())
    result = invoke("pause", "bot", "--cloud")
    assert result.exit_code == 0, result.output
    assert cloud.scheduler.entries()["spotcron-bot"]["state"] == "PAUSED"
    assert (workdir / "jobs" / "bot.yaml").read_text().endswith("paused: true\n")
    lines = result.output.splitlines()
    assert lines[:2] == [f"paused bot on Google Cloud (project {PROJECT}, region us-central1, scheduling: per-job):",
                         f"  - deployed spec gs://{BUCKET}/deployed/bot.json: paused: true"]
    assert lines[2].startswith(f"  - scheduler entry {LOCATION}/jobs/spotcron-bot: its message names the deployed "
                               "spec's digest ")
    assert "paused bot in jobs/bot.yaml (paused: true), so the next `spotcron deploy` keeps it paused." \
        in _said(result)

    again = invoke("pause", "bot", "--cloud")
    assert again.exit_code == 0, again.output
    assert _said(again) == (f"bot is already paused on Google Cloud (project {PROJECT}, region us-central1, "
                            "scheduling: per-job); nothing changed there. jobs/bot.yaml already says paused: true, "
                            "so the next `spotcron deploy` keeps it paused.")

    resumed = invoke("resume", "bot", "--cloud")
    assert resumed.exit_code == 0, resumed.output
    assert cloud.scheduler.entries()["spotcron-bot"]["state"] == "ENABLED"
    assert "paused" not in (workdir / "jobs" / "bot.yaml").read_text()


def test_pause_cloud_shared_says_the_spec_and_the_version_changed(invoke, deployer: Deployer, cloud: FakeCloud,
                                                                  workdir: Path) -> None:
    (workdir / "infra" / "stack.yaml").write_text(STACK + "scheduling: shared\n")
    deployer.deploy(deployer.jobs(JOBS_DIR), settings=make_settings(scheduling="shared"))
    job_file = workdir / "jobs" / "bot.yaml"
    job_file.write_text(job_file.read_text().replace('"0 */4 * * *"', '"5 * * * *"'))  # not deployed yet
    result = invoke("pause", "bot", "--cloud")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"paused bot on Google Cloud (project {PROJECT}, region us-central1, scheduling: shared):"
    assert lines[1] == f"  - deployed spec gs://{BUCKET}/deployed/bot.json: paused: true"
    assert lines[2].startswith(f"  - scheduler entry {LOCATION}/jobs/spotcron-dispatch: its message names the "
                               "deployed specs' version ")
    deployed = json.loads(cloud.storage.objects[(BUCKET, "deployed/bot.json")][0])
    assert (deployed["paused"], deployed["schedule"]) == (True, "0 */4 * * *")  # the file's other edit waits for deploy
    assert job_file.read_text().endswith("paused: true\n")


def test_a_job_not_deployed_is_an_error_and_the_file_is_left_alone(invoke, cloud: FakeCloud, workdir: Path) -> None:
    cloud.enable_apis()
    before = (workdir / "jobs" / "bot.yaml").read_text()
    result = invoke("pause", "bot", "--cloud")
    assert result.exit_code == 2
    assert _said(result).startswith("error: bot is not deployed on Google Cloud: no scheduler entry spotcron-bot in "
                                    f"{LOCATION}")
    assert "`spotcron deploy` deploys it" in _said(result)
    assert (workdir / "jobs" / "bot.yaml").read_text() == before
    assert cloud.changing_calls() == []


def test_without_credentials_it_says_how_to_log_in(invoke, context: DeployContext, workdir: Path) -> None:
    def missing(project: str) -> None:
        raise MissingCredentials("Your default credentials were not found.", "deploy needs them")

    context.credentials = missing
    result = invoke("resume", "nightly", "--cloud")
    assert result.exit_code == 2
    assert "no Google credentials found" in result.output
    assert "resume --cloud reads and changes the deployed job on Google Cloud" in _said(result)
    assert "paused: true" in (workdir / "jobs" / "nightly.yaml").read_text()


def test_cloud_options_go_with_cloud(invoke, workdir: Path) -> None:
    result = invoke("pause", "bot", "--project", "other")
    assert result.exit_code == 2
    assert "--project goes with --cloud" in result.output
    assert "paused" not in (workdir / "jobs" / "bot.yaml").read_text()


def test_a_local_pause_points_at_cloud_and_delete_at_deploy(invoke, workdir: Path) -> None:
    paused = invoke("pause", "bot")
    assert paused.exit_code == 0, paused.output
    assert "On Google Cloud, `spotcron deploy` pauses it (or add --cloud to do it now, without a deploy)." \
        in _said(paused)
    deleted = invoke("delete", "bot", "--yes")
    assert deleted.exit_code == 0, deleted.output
    assert "on Google Cloud nothing changes now: if bot is deployed there, the next `spotcron deploy` removes its " \
           "deployment (its scheduler entry and deployed spec)" in _said(deleted)
    assert _said(deleted).endswith("On Google Cloud it stays deployed until you run `spotcron deploy`, which "
                                   "removes its scheduler entry and deployed spec there.")
