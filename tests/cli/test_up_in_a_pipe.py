"""`spotcron up --once` in a pipe: its opening statements stay one line each, however long, as
every line a log keeps (a terminal wraps them as it likes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spotcron.local.containment import network_statement

SPOTCRON = Path(sys.executable).parent / "spotcron"


def test_up_once_statements_are_whole_lines_in_a_pipe(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "PUBSUB_EMULATOR_HOST")
           and not k.startswith("SPOTCRON_")}
    env["HOME"] = str(tmp_path)
    subprocess.run([str(SPOTCRON), "init"], cwd=tmp_path, env=env, check=True, capture_output=True)
    done = subprocess.run([str(SPOTCRON), "up", "--once"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert f"  {network_statement()}" in lines, lines[:6]
    assert lines[1].startswith("  ") and all(line.startswith(("  ", "spotcron up")) for line in lines[:3]), lines[:6]
