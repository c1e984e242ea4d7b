"""`spotcron secrets set/list` pick local or Secret Manager as the rest of the CLI does: local unless
--cloud, and while the stack names a real project, a clear word instead of a guess. Without Google
credentials, --cloud says what is missing and how to fix it, in two lines, with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from spotcron.cli import cli
from spotcron.cli.deploy import DeployContext
from spotcron.gcp.admin.calls import MissingCredentials
from spotcron.local.secret_manager import read_dotenv
from tests.deploy.conftest import BUCKET, PROJECT, quick_caller, user_repository
from tests.fakes.deploy.cloud import FakeCloud

NEW_FOLDER = "project: my-project\nregion: us-central1\nbucket: my-project-spotcron\n"  # what `spotcron init` writes
REAL = f"project: {PROJECT}\nregion: us-central1\nbucket: {BUCKET}\n"
JOB = 'schedule: "0 * * * *"\nimage: mirror.gcr.io/library/busybox:1.36\nsecrets:\n  BOT_TOKEN: bot-token\n' \
      '  API_KEY: api-key\n  OTHER: other\n'


def _no_credentials(project: str):
    raise MissingCredentials("Your default credentials were not found. To set up Application Default "
                             "Credentials, see https://cloud.google.com/docs/authentication/external/set-up-adc "
                             "for more information.", "Deploy needs these APIs enabled: compute.googleapis.com")


def _folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stack: str) -> Path:
    user_repository(tmp_path, monkeypatch, stack, jobs=())
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB)
    return tmp_path


def _run(*args: str, obj: DeployContext | None = None, stdin: str | None = None, env: dict | None = None):
    return CliRunner().invoke(cli, ["secrets", *args], obj=obj or DeployContext(credentials=_no_credentials),
                              input=stdin, env={"COLUMNS": "200", **(env or {})}, catch_exceptions=False)


def test_set_in_a_new_folder_stores_locally_without_a_flag(tmp_path, monkeypatch):
    _folder(tmp_path, monkeypatch, NEW_FOLDER)
    done = _run("set", "bot-token", stdin="value-1\n")
    assert done.exit_code == 0, done.output
    assert read_dotenv(tmp_path / ".spotcron" / "secrets.env") == {"SPOTCRON_SECRET_BOT_TOKEN": "value-1"}
    assert done.output.splitlines()[-1] == ("For deployed jobs (Secret Manager), set project: in infra/stack.yaml "
                                            "and add --cloud.")
    assert "value-1" not in done.output


def test_set_with_a_real_project_and_no_flag_asks_which_and_stores_nothing(tmp_path, monkeypatch, cloud: FakeCloud):
    _folder(tmp_path, monkeypatch, REAL)
    context = DeployContext(credentials=lambda project: None,
                            clients=lambda project, credentials, concurrency: cloud.clients(concurrency),
                            caller=lambda project: quick_caller())
    done = _run("set", "bot-token", obj=context, stdin="value-1")
    assert done.exit_code == 2
    assert "`spotcron secrets set bot-token --local`" in done.output
    assert f"`spotcron secrets set bot-token --cloud` for the jobs deployed to project {PROJECT}" in done.output
    assert not (tmp_path / ".spotcron" / "secrets.env").exists() and not cloud.secrets.secrets


@pytest.mark.parametrize(("flags", "said"), [
    (["--local", "--cloud"], "--local and --cloud exclude each other"),
    (["--local", "--destroy-older"], "--destroy-older goes with --cloud"),
])
def test_contradicting_flags_are_refused(tmp_path, monkeypatch, flags, said):
    _folder(tmp_path, monkeypatch, REAL)
    done = _run("set", "bot-token", *flags, stdin="v")
    assert done.exit_code == 2 and said in done.output


def test_cloud_with_the_placeholder_project_says_where_to_set_it(tmp_path, monkeypatch):
    _folder(tmp_path, monkeypatch, NEW_FOLDER)
    done = _run("set", "bot-token", "--cloud", stdin="v")
    assert done.exit_code == 2
    assert "infra/stack.yaml: project: 'my-project' is the placeholder" in done.output


def test_list_locally_says_where_each_value_comes_from_never_the_value(tmp_path, monkeypatch):
    _folder(tmp_path, monkeypatch, NEW_FOLDER)
    _run("set", "bot-token", "--local", stdin="from-the-file")
    done = _run("list", env={"SPOTCRON_SECRET_API_KEY": "from-the-env"})
    assert done.exit_code == 0, done.output
    rows = {line.split()[1]: line for line in done.output.splitlines()[1:] if line.startswith("bot ")}
    assert rows["BOT_TOKEN"].endswith("SPOTCRON_SECRET_BOT_TOKEN  .spotcron/secrets.env")
    assert rows["API_KEY"].endswith("SPOTCRON_SECRET_API_KEY    environment")
    assert rows["OTHER"].endswith("missing: spotcron secrets set other --local")
    assert "from-the" not in done.output


@pytest.mark.parametrize("command", [["list", "--cloud"], ["set", "bot-token", "--cloud"]])
def test_without_credentials_cloud_says_what_is_missing_and_how_to_fix_it(tmp_path, monkeypatch, command):
    _folder(tmp_path, monkeypatch, REAL)
    done = _run(*command, stdin="v")
    assert done.exit_code == 2
    lines = done.output.strip().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"error: no Google credentials: `spotcron secrets {' '.join(command)}`")
    assert lines[0].endswith(f"Secret Manager of project {PROJECT}.")
    assert lines[1].startswith("Log in with `gcloud auth application-default login`")
    assert "--local" in lines[1]
    assert "googleapis.com" not in done.output  # not deploy's list of APIs


@pytest.mark.parametrize("name", ["bad name", "ghp_abcdefghijklmnopqrstuvwxyz0123456789", "projects/p/secrets/x"])
def test_a_name_that_is_no_secret_name_is_refused_before_anything_is_stored(tmp_path, monkeypatch, name):
    _folder(tmp_path, monkeypatch, NEW_FOLDER)
    done = _run("set", name, "--local", stdin="v")
    assert done.exit_code == 2 and "NAME is not a secret's name" in done.output
    assert name not in done.output and not (tmp_path / ".spotcron" / "secrets.env").exists()


def test_list_locally_names_stored_values_no_job_names_never_the_values(tmp_path, monkeypatch):
    user_repository(tmp_path, monkeypatch, NEW_FOLDER, jobs=())
    (tmp_path / "jobs" / "hello.yaml").write_text('schedule: "0 * * * *"\nimage: mirror.gcr.io/library/busybox:1.36\n')
    assert _run("set", "bot-token", "--local", stdin="the-value").exit_code == 0
    done = _run("list", "--local", env={"SPOTCRON_SECRET_API_KEY": "env-value"})
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert lines[0] == "No job names a secret (see docs/jobs.md, \"secrets\")."
    row = next(line for line in lines if "SPOTCRON_SECRET_BOT_TOKEN" in line)
    assert row.endswith(".spotcron/secrets.env; no job names it")
    assert next(line for line in lines if "SPOTCRON_SECRET_API_KEY" in line).endswith("environment; no job names it")
    assert "the-value" not in done.output and "env-value" not in done.output
    # Once a job names it, the row is that job's.
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB)
    done = _run("list", "--local")
    assert "no job names it" not in done.output
    assert next(line for line in done.output.splitlines() if "SPOTCRON_SECRET_BOT_TOKEN" in line).startswith("bot ")
