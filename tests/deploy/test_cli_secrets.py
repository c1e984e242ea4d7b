"""`spotcron secrets set` and `list` against the fake Secret Manager: the value comes from stdin or a
file (never argv), is stored with its checksum, older versions can be destroyed, and nothing prints it."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from spotcron.cli import cli
from spotcron.cli.deploy import DeployContext
from tests.deploy.conftest import BUCKET, PROJECT, quick_caller, user_repository
from tests.fakes.deploy.cloud import FakeCloud

STACK = f"project: {PROJECT}\nregion: us-central1\nbucket: {BUCKET}\n"
TOKEN = f"projects/{PROJECT}/secrets/bot-token"


@pytest.fixture
def context(cloud: FakeCloud, tmp_path: Path, monkeypatch) -> DeployContext:
    from google.auth.credentials import AnonymousCredentials

    from spotcron.gcp.admin.calls import REQUIRED_APIS

    cloud.access.enable_all(REQUIRED_APIS)  # a project deploy has set up: the APIs it needs are on
    user_repository(tmp_path, monkeypatch, STACK)
    return DeployContext(credentials=lambda project: AnonymousCredentials(),
                         clients=lambda project, credentials, concurrency: cloud.clients(concurrency),
                         caller=lambda project: quick_caller(), interactive=lambda: False)


def _run(context, *args, stdin=None):
    return CliRunner().invoke(cli, ["secrets", *args], obj=context, input=stdin, env={"COLUMNS": "200"},
                              catch_exceptions=False)


def test_set_creates_the_secret_adds_versions_and_destroys_older_ones(context, cloud: FakeCloud):
    first = _run(context, "set", "bot-token", "--cloud", stdin="s3cr3t-one\n")
    assert first.exit_code == 0, first.output
    assert first.output.strip() == f"{TOKEN}: version 1 added (secret created)"
    versions = cloud.secrets.secrets[TOKEN]["versions"]
    assert versions[0]["data"] == b"s3cr3t-one"  # the trailing newline dropped
    assert cloud.secrets.secrets[TOKEN]["labels"] == {"spotcron": "1"}
    _run(context, "set", "bot-token", "--cloud", stdin="s3cr3t-two")
    third = _run(context, "set", "bot-token", "--destroy-older", stdin="s3cr3t-three")
    assert third.exit_code == 0, third.output
    assert third.output.strip() == f"{TOKEN}: version 3 added; destroyed versions 1, 2"
    assert [v["state"] for v in versions] == ["DESTROYED", "DESTROYED", "ENABLED"]
    assert "s3cr3t" not in first.output + third.output
    # The value travelled in the request body only, never in a URL.
    assert not [c for c in cloud.calls() if "s3cr3t" in c.path]


def test_set_reads_a_file_and_refuses_an_empty_value(context, cloud: FakeCloud, tmp_path):
    (tmp_path / "key.json").write_text('{"k": 1}')
    done = _run(context, "set", "sa-key", "--cloud", "--from-file", str(tmp_path / "key.json"))
    assert done.exit_code == 0, done.output
    assert cloud.secrets.secrets[f"projects/{PROJECT}/secrets/sa-key"]["versions"][0]["data"] == b'{"k": 1}'
    empty = _run(context, "set", "other", "--cloud", stdin="")
    assert empty.exit_code == 2 and "no value given" in empty.output


def test_the_value_is_never_an_argument():
    assert [p.name for p in cli.commands["secrets"].commands["set"].params if p.param_type_name == "argument"] == \
        ["name"]


def test_set_local_writes_the_git_ignored_dotenv_for_up(context, tmp_path):
    done = _run(context, "set", "bot-token", "--local", "--state-dir", str(tmp_path / ".spotcron"),
                stdin='va"lue\n')
    assert done.exit_code == 0, done.output
    path = tmp_path / ".spotcron" / "secrets.env"
    assert path.stat().st_mode & 0o777 == 0o600
    from spotcron.local.secret_manager import read_dotenv
    assert read_dotenv(path) == {"SPOTCRON_SECRET_BOT_TOKEN": 'va"lue'}
    _run(context, "set", "bot-token", "--local", "--state-dir", str(tmp_path / ".spotcron"), stdin="second")
    assert read_dotenv(path) == {"SPOTCRON_SECRET_BOT_TOKEN": "second"}


def test_list_shows_each_jobs_secrets_and_versions(context, cloud: FakeCloud, tmp_path):
    cloud.secrets.add(TOKEN, b"a", b"b")
    (tmp_path / "jobs" / "bot.yaml").write_text(
        'schedule: "0 * * * *"\nimage: mirror.gcr.io/library/busybox:1.36\nsecrets:\n  BOT_TOKEN: bot-token\n'
        '  MISSING: {secret: gone, version: 2}\n')
    done = _run(context, "list", "--cloud")
    assert done.exit_code == 0, done.output
    assert "bot-token" in done.output and "2 (2 enabled)" in done.output
    assert "no such secret" in done.output
