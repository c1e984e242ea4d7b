"""A plan printed into a pipe keeps each line whole: service account names and roles stay on the
line they belong to, so they can be copied and grepped (a terminal wraps as it likes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from spotcron.cli import SpotcronGroup
from spotcron.cli.deploy import COMMANDS
from tests.deploy.test_cli_deploy import context, workdir  # noqa: F401 (fixtures)

SPOTCRON = Path(sys.executable).parent / "spotcron"
FUNCTIONS_ACCOUNT = "serviceAccount:spotcron-functions@my-project.iam.gserviceaccount.com"


def _no_width_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE")}


def test_offline_plan_through_a_pipe_is_not_wrapped_at_80_columns(tmp_path):
    env = {**_no_width_env(), "HOME": str(tmp_path)}
    subprocess.run([str(SPOTCRON), "init"], cwd=tmp_path, env=env, check=True, capture_output=True)
    done = subprocess.run([str(SPOTCRON), "deploy", "--dry-run", "--offline"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)  # stdout is a pipe
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert f"    + roles/storage.objectAdmin {FUNCTIONS_ACCOUNT}" in lines
    assert "~ update iam_policy service_account:spotcron-vm@my-project.iam.gserviceaccount.com" in lines
    assert lines[0].startswith("spotcron deploy --dry-run --offline — project my-project, region us-central1, 1 job")
    assert not [line for line in lines if line.startswith("serviceAccount:")], "a name was wrapped onto its own line"


def test_dry_run_plan_in_a_pipe_keeps_each_binding_on_one_line(context):  # noqa: F811
    group = SpotcronGroup("spotcron")
    for command in COMMANDS:
        group.add_command(command)
    result = CliRunner().invoke(group, ["deploy", "--dry-run"], obj=context, env={"COLUMNS": None},
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    bindings = [line for line in lines if line.startswith("    + roles/")]
    assert bindings and all(" serviceAccount:" in line for line in bindings), bindings
    assert not [line for line in lines if line.startswith(("serviceAccount:", "service_account:"))]
