"""Commands in a pipe (a log, `| grep`): each line they print stays one line, however long, so
the paths and names in it can be copied (a terminal wraps them as it likes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spotcron.local.containment import network_statement

SPOTCRON = Path(sys.executable).parent / "spotcron"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE", "PUBSUB_EMULATOR_HOST")
           and not k.startswith("SPOTCRON_")}
    return {**env, "HOME": str(home)}


def _spotcron(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SPOTCRON), *args], cwd=folder, env=_env(folder), capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def test_init_benchmark_and_delete_keep_their_paths_on_one_line(tmp_path):
    done = _spotcron(tmp_path, "init", "--benchmark")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == ("wrote jobs/benchmark.yaml, benchmark/train.py, "
                                           "benchmark/spotcron_metrics.py, benchmark/Dockerfile, infra/stack.yaml, "
                                           "jobs/schema.json, .gitignore")
    deleted = _spotcron(tmp_path, "delete", "benchmark", "--yes")
    assert deleted.returncode == 0, deleted.stderr
    assert "  - delete its job file jobs/benchmark.yaml (a copy is kept at .spotcron/deleted/benchmark.yaml)" \
        in deleted.stdout.splitlines()


def test_up_once_statements_are_whole_lines_in_a_pipe(tmp_path):
    env = _env(tmp_path)
    subprocess.run([str(SPOTCRON), "init"], cwd=tmp_path, env=env, check=True, capture_output=True)
    done = subprocess.run([str(SPOTCRON), "up", "--once"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert f"  {network_statement()}" in lines, lines[:6]
    assert lines[1].startswith("  ") and all(line.startswith(("  ", "spotcron up")) for line in lines[:3]), lines[:6]


def test_next_dst_notes_and_validate_warnings_are_one_line_each_in_a_pipe(tmp_path):
    assert _spotcron(tmp_path, "init").returncode == 0
    job = tmp_path / "jobs" / "hello.yaml"
    text = job.read_text().replace("time_zone: Etc/UTC", "time_zone: Europe/Berlin")
    job.write_text(text.replace('schedule: "0 * * * *"', 'schedule: "30 2 * * *"').replace(
        "machine:\n  type: e2-small", "machine:\n  type: c3-highcpu-4"))
    shown = _spotcron(tmp_path, "next", "hello", "--after", "2026-03-27T00:00:00Z")
    assert shown.returncode == 0, shown.stderr
    notes = [line for line in shown.stdout.splitlines() if line.startswith("note: 2026-03-29")]
    assert notes and notes[0].endswith("so the job runs once right after the jump, at 03:00 (01:00 UTC)"), \
        shown.stdout
    checked = _spotcron(tmp_path, "validate")
    warned = [line for line in checked.stderr.splitlines() if line.startswith("warning: hello")]
    assert warned and all(line.endswith(".") for line in warned), checked.stderr


def test_up_says_it_waits_on_one_line_in_a_pipe(tmp_path):
    assert _spotcron(tmp_path, "init").returncode == 0
    up = subprocess.Popen([str(SPOTCRON), "up"], cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
    seen = []
    try:
        for line in up.stdout:  # ends when up exits, so a failed start cannot hang the test
            seen.append(line.rstrip("\n"))
            if line.startswith("Waiting for the next tick"):
                break
    finally:
        up.terminate()
        up.communicate(timeout=60)
    assert seen and seen[-1] == ("Waiting for the next tick. Ctrl-C stops everything; "
                                 "`spotcron run JOB` runs a job now."), seen
