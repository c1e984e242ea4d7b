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
