"""`spotcron deploy` through click, against the fake Google Cloud."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from spotcron.cli import SpotcronGroup
from spotcron.cli.deploy import COMMANDS, DeployContext, _default_credentials
from tests.deploy.conftest import BUCKET, PROJECT, make_source_root, quick_caller, user_repository
from tests.fakes.deploy.cloud import FakeCloud

STACK = f"project: {PROJECT}\nregion: us-central1\nbucket: {BUCKET}\nsweep_interval: 5m\n"


def _no_credentials(project: str) -> None:
    raise AssertionError("credentials were asked for before validation finished")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    user_repository(tmp_path, monkeypatch, STACK)
    make_source_root(tmp_path / "src")
    return tmp_path


@pytest.fixture
def context(cloud: FakeCloud, workdir: Path) -> DeployContext:
    from google.auth.credentials import AnonymousCredentials

    return DeployContext(credentials=lambda project: AnonymousCredentials(),
                         clients=lambda project, credentials, concurrency: cloud.clients(concurrency),
                         source_root=lambda: workdir / "src", caller=lambda project: quick_caller(),
                         interactive=lambda: False, poll_initial=0.01, sleep=cloud.clock.sleep)


@pytest.fixture
def invoke(context: DeployContext) -> Callable[..., Result]:
    group = SpotcronGroup("spotcron")
    for command in COMMANDS:
        group.add_command(command)

    def run(*args: str, obj: DeployContext | None = None, stdin: str | None = None) -> Result:
        return CliRunner().invoke(group, ["deploy", *args], obj=obj or context, input=stdin,
                                  env={"COLUMNS": "200"}, catch_exceptions=False)

    return run


def test_dry_run_prints_the_diff_and_changes_nothing(invoke, cloud: FakeCloud) -> None:
    result = invoke("--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"spotcron deploy — project {PROJECT}, region us-central1, 3 jobs from jobs/"
    assert "+ create bucket demo-proj-spotcron" in lines
    assert "+ create scheduler_job spotcron-bot" in lines
    assert "~ update iam_policy function:spotcron-job-done" in lines
    assert f"    + roles/run.invoker serviceAccount:spotcron-vm@{PROJECT}.iam.gserviceaccount.com" in lines
    assert "+ create api sts.googleapis.com" in lines  # an empty project: deploy enables what it needs first
    assert "Plan: 39 to create, 12 to update, 0 to delete." in lines  # the subnet is not read before compute is on
    assert lines[-1] == "Dry run: nothing was changed. Apply with `make deploy` (spotcron deploy)."
    assert not cloud.changing_calls()


def test_without_yes_and_without_a_terminal_it_refuses(invoke, cloud: FakeCloud) -> None:
    result = invoke()
    assert result.exit_code == 2
    assert result.output.splitlines()[-1] == (
        "error: deploy asks before changing anything, and there is no terminal to ask on: pass --yes to apply "
        "the plan above")
    assert not cloud.changing_calls()


def test_answering_no_changes_nothing(invoke, context: DeployContext, cloud: FakeCloud) -> None:
    context.interactive = lambda: True
    result = invoke(stdin="n\n")
    assert result.exit_code == 2
    assert "Apply these changes? [y/N]: n" in result.output
    assert result.output.splitlines()[-1] == "error: deploy cancelled: nothing was changed"
    assert not cloud.changing_calls()


def test_answering_yes_deploys(invoke, context: DeployContext, cloud: FakeCloud) -> None:
    context.interactive = lambda: True
    result = invoke(stdin="y\n")
    assert result.exit_code == 0, result.output
    assert len(cloud.scheduler.jobs) == 4


def test_yes_deploys_and_a_second_run_has_nothing_to_do(invoke, cloud: FakeCloud) -> None:
    first = invoke("--yes", "--concurrency", "4")
    assert first.exit_code == 0, first.output
    assert "the functions' URLs are known now: setting SPOTCRON_JOB_DONE_URL and" in first.output
    assert "Deployed: 55 changes in " in first.output  # 12 APIs, then two passes (the entries in the second)
    assert first.output.splitlines()[-1] == f"Runs and results: spotcron runs --bucket gs://{BUCKET}"
    assert len(cloud.scheduler.jobs) == 4 and len(cloud.functions.functions) == 4
    cloud.reset_log()
    second = invoke("--yes")
    assert second.exit_code == 0
    assert "No changes: the deployed stack matches the job specs and settings." in second.output
    assert not cloud.changing_calls()


def test_placeholder_project_fails_before_any_call(invoke, context: DeployContext, workdir: Path,
                                                   cloud: FakeCloud) -> None:
    (workdir / "infra" / "stack.yaml").write_text("# settings\nproject: my-project\nbucket: my-project-spotcron\n")
    context.credentials = _no_credentials
    result = invoke("--dry-run")
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        "infra/stack.yaml:2: project: 'my-project' is the placeholder; set your Google Cloud project id here "
        "or in SPOTCRON_PROJECT; `spotcron deploy --dry-run --offline` lists what a first deploy creates, with no "
        "project yet",
        "infra/stack.yaml:3: bucket: 'my-project-spotcron' is the placeholder; bucket names are global, so pick "
        "your own, e.g. your project id followed by -spotcron",
        "2 problems in 1 file",
    ]
    assert cloud.calls() == []


def test_invalid_job_spec_fails_before_credentials(invoke, context: DeployContext, workdir: Path,
                                                   cloud: FakeCloud) -> None:
    (workdir / "jobs" / "bad.yaml").write_text('schedule: "61 * * * *"\nimage: busybox\n')
    context.credentials = _no_credentials
    result = invoke("--yes")
    assert result.exit_code == 2
    assert result.output.startswith("jobs/bad.yaml:1: schedule: ")
    assert cloud.calls() == []


@pytest.mark.parametrize("name", ["sweep", "dispatch"])
def test_reserved_job_name_is_reported_with_its_file(invoke, context: DeployContext, workdir: Path,
                                                     cloud: FakeCloud, name: str) -> None:
    (workdir / "jobs" / f"{name}.yaml").write_text('schedule: "0 * * * *"\nimage: busybox\n')
    context.credentials = _no_credentials
    result = invoke("--dry-run")
    assert result.exit_code == 2
    assert result.output.splitlines()[0] == (
        f"jobs/{name}.yaml: name: '{name}' is reserved (its scheduler entry would be spotcron-{name}, the name of "
        "spotcron's own sweep or dispatch entry); rename the job")
    assert cloud.calls() == []


def test_missing_credentials_say_how_to_log_in(invoke, context: DeployContext, workdir: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(workdir / "no-such-key.json"))
    context.credentials = _default_credentials
    result = invoke("--dry-run")
    assert result.exit_code == 2
    message = result.output.splitlines()[-1]
    assert message.startswith("error: no Google credentials found: run `gcloud auth application-default login` "
                              "(or set GOOGLE_APPLICATION_CREDENTIALS). Deploy needs these APIs enabled: "
                              "compute.googleapis.com, cloudscheduler.googleapis.com, pubsub.googleapis.com,")
    assert "no-such-key.json" in message


def test_failed_apply_exits_2_with_what_to_do(invoke, cloud: FakeCloud) -> None:
    cloud.fail_after(45)
    result = invoke("--yes")
    assert result.exit_code == 2
    assert "error: deploy stopped:" in result.output or "error: enabled the APIs, then" in result.output
    assert result.output.rstrip().endswith(("run deploy again to continue from where it stopped.",
                                            "Run deploy again to check and finish."))
    cloud.heal()
    cloud.clock.sleep(300)  # run again minutes later: Google has made the default network by then
    assert invoke("--yes").exit_code == 0
    assert len(cloud.scheduler.jobs) == 4


def test_help_names_the_apis_to_enable(invoke) -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "gcloud auth application-default login" in text
    assert ("compute, cloudscheduler, pubsub, cloudfunctions, run, cloudbuild, eventarc, storage, iam, "
            "artifactregistry, logging, cloudresourcemanager") in text
    for option in ("--dry-run", "--yes", "--jobs", "--stack", "--concurrency"):
        assert option in text
