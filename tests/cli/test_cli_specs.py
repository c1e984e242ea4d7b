"""spotcron validate / next / schema through click's CliRunner, and the root group's error handling."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from spotcron.cli import SpotcronGroup, cli
from spotcron.core.errors import ConfigError, CronError, Problem
from tests.examples import EXAMPLES, SCHEMA, example

ROOT = Path(__file__).resolve().parents[2]
OK = 'schedule: "0 * * * *"\nimage: spotcron/bot:latest\n'


@pytest.fixture
def run(tmp_path, monkeypatch):
    """Invoke the CLI from an empty directory with no SPOTCRON_* settings leaking in."""
    monkeypatch.chdir(tmp_path)
    for name in ("SPOTCRON_JOBS", "SPOTCRON_STACK", "SPOTCRON_GRACE"):
        monkeypatch.delenv(name, raising=False)

    def invoke(*args: str, env: dict[str, str] | None = None):
        return CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)

    return invoke


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)
    return folder / name


def test_validate_the_example_jobs(run, example_jobs):
    result = run("validate", str(example_jobs))
    assert result.exit_code == 0, result.output
    assert "2 jobs valid" in result.stdout
    assert "hello-bot" in result.stdout and "dl-benchmark" in result.stdout
    assert "n1-standard-8 + 1x nvidia-tesla-t4" in result.stdout


def test_the_shipped_examples_validate_without_a_warning(run, example_jobs):
    """`make run` starts with `spotcron validate`: the examples as shipped are deployable (the
    benchmark builds its images into the jobs' repository), so nothing is said about them."""
    result = run("validate", str(example_jobs), "--stack", str(ROOT / "infra" / "stack.yaml"))
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_validate_warns_about_a_local_command_its_vm_would_not_run(run, tmp_path):
    write(tmp_path / "jobs", "mybot.yaml", 'schedule: "0 * * * *"\nimage: mirror.gcr.io/library/python:3.11-slim\n'
          "local:\n  command: python3 bot/bot.py\n")
    result = run("validate")
    assert result.exit_code == 0, result.output
    assert ("warning: mybot: local.command runs `python3 bot/bot.py` on this machine, but on a VM the job runs "
            "mirror.gcr.io/library/python:3.11-slim's own default command") in " ".join(result.stderr.split())


def test_validate_warns_when_a_gpu_entry_shares_the_cpu_image(run, tmp_path):
    write(tmp_path / "jobs", "bench.yaml", OK + "local: {command: python3 x.py}\nmatrix:\n  - name: cpu\n"
          "  - name: t4\n    machine: {type: n1-standard-8, gpu: {type: nvidia-tesla-t4}}\n")
    result = run("validate")
    assert result.exit_code == 0, result.output
    assert "warning: bench: matrix entry 't4' asks for nvidia-tesla-t4 x1 but runs 'spotcron/bot:latest'" in \
        " ".join(result.stderr.split())


def test_validate_defaults_to_the_jobs_directory(run, tmp_path):
    write(tmp_path / "jobs", "bot.yaml", OK)
    result = run("validate")
    assert result.exit_code == 0 and "1 job valid" in result.stdout


def test_validate_reads_the_jobs_directory_from_the_environment(run, tmp_path):
    write(tmp_path / "elsewhere", "bot.yaml", OK)
    result = run("validate", env={"SPOTCRON_JOBS": str(tmp_path / "elsewhere")})
    assert result.exit_code == 0 and "1 job valid" in result.stdout


def test_validate_refuses_an_image_its_jobs_account_cannot_read(run, tmp_path):
    """Each account reads only the repository of its own jobs (docs/deploy.md): an image of the
    stack's shared jobs' repository, for a job with its own account, would fail every pull."""
    write(tmp_path / "infra", "stack.yaml", "project: demo-proj\nregion: us-central1\nbucket: demo-proj-x\n")
    write(tmp_path / "jobs", "bot.yaml", 'schedule: "0 * * * *"\n'
          "image: us-central1-docker.pkg.dev/demo-proj/spotcron-jobs/bot:1\n"
          "service_account: bot-runner@demo-proj.iam.gserviceaccount.com\n")
    result = run("validate")
    assert result.exit_code == 2
    [message, summary] = result.stderr.splitlines()
    assert message.startswith("jobs/bot.yaml: image: 'us-central1-docker.pkg.dev/demo-proj/spotcron-jobs/bot:1' is in "
                              "us-central1-docker.pkg.dev/demo-proj/spotcron-jobs, which this job's VM cannot read: it "
                              "runs as its own account bot-runner@demo-proj.iam.gserviceaccount.com, which reads only "
                              "us-central1-docker.pkg.dev/demo-proj/spotcron-jobs-")
    assert summary == "1 problem in 1 file"
    write(tmp_path / "jobs", "bot.yaml", 'schedule: "0 * * * *"\nimage: us-central1-docker.pkg.dev/demo-proj/'
          "spotcron-jobs/bot:1\n")
    assert run("validate").exit_code == 0  # the VM account's jobs read the shared one


def test_validate_reports_every_problem_and_exits_2(run, tmp_path):
    write(tmp_path / "jobs", "bot.yaml", 'schdule: "0 * * * *"\nimage: spotcron/bot\n')
    write(tmp_path / "jobs", "gpu.yaml", OK + "machine:\n  type: n1-standrd-1\n")
    result = run("validate", "jobs")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        'jobs/bot.yaml: schedule: required field is missing; add e.g. schedule: "0 */4 * * *"',
        "jobs/bot.yaml:1: schdule: unknown field; did you mean 'schedule'?",
        "jobs/gpu.yaml:4: machine.type: 'n1-standrd-1' is not a machine type; did you mean 'n1-standard-1'?",
        "3 problems in 2 files",
    ]
    assert "Traceback" not in result.output and result.stdout == ""


def test_validate_uses_the_stacks_grace(run, tmp_path):
    write(tmp_path / "jobs", "long.yaml", OK + "timeout: 119d\n")
    write(tmp_path, "ok.yaml", "results_retention_days: 125\n")  # retention must outlast the timeout too
    write(tmp_path, "stack.yaml", "grace: 2d\nresults_retention_days: 125\n")
    assert run("validate", "jobs", "--stack", "ok.yaml").exit_code == 0
    result = run("validate", "jobs", "--stack", "stack.yaml")
    assert result.exit_code == 2 and "plus the stack's grace (172800s)" in result.stderr


def test_validate_with_no_job_files(run, tmp_path):
    (tmp_path / "empty").mkdir()
    result = run("validate", "empty")
    assert result.exit_code == 2
    assert "empty: no job files (*.yaml, *.yml) found; see docs/jobs.md" in result.stderr


def test_next_json_has_exactly_the_documented_shape(run):
    result = run("next", str(example("hello-bot")), "-n", "3", "--after", "2026-01-01T01:30:00+00:00",
                 "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "job": "hello-bot", "time_zone": "Etc/UTC",
        "next": ["2026-01-01T04:00:00+00:00", "2026-01-01T08:00:00+00:00", "2026-01-01T12:00:00+00:00"],
    }


def test_next_json_keeps_the_local_offset_across_a_dst_change(run, tmp_path):
    write(tmp_path / "jobs", "berlin.yaml", OK.replace("0 * * * *", "30 2 * * *") + "time_zone: Europe/Berlin\n")
    result = run("next", "berlin", "-n", "3", "--after", "2026-03-27T12:00:00", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["job"] == "berlin" and data["time_zone"] == "Europe/Berlin"
    times = [datetime.fromisoformat(t) for t in data["next"]]
    assert all(t.utcoffset() is not None for t in times)
    # 02:30 does not exist on 29 March 2026: the run moves to 03:00 CEST (01:00 UTC).
    assert data["next"] == ["2026-03-28T02:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]


def test_next_for_people_shows_both_zones_the_reading_and_dst_notes(run, tmp_path):
    write(tmp_path / "jobs", "berlin.yaml", OK.replace("0 * * * *", "30 2 * * *") + "time_zone: Europe/Berlin\n")
    result = run("next", "berlin", "-n", "2", "--after", "2026-03-28T12:00:00+01:00")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "berlin: at 02:30" in out and "(30 2 * * *, Europe/Berlin)" in out
    assert "Sun 2026-03-29 03:00 CEST (+0200)" in out and "Sun 2026-03-29 01:00" in out
    assert "clocks jump forward" in " ".join(out.split())
    assert "Cloud Scheduler recommends UTC" in " ".join(out.split())


def test_next_mentions_matrix_entries_and_pause(run, tmp_path):
    write(tmp_path / "jobs", "m.yaml", OK + "paused: true\nmatrix:\n  - name: a\n  - name: b\n")
    result = run("next", "m", "-n", "1")
    assert result.exit_code == 0
    assert "each tick runs 2 matrix entries: a, b" in result.stdout and "paused" in result.stdout


def test_next_unknown_job_suggests_a_name(run, tmp_path):
    write(tmp_path / "jobs", "hello-bot.yaml", OK)
    result = run("next", "hello-bt")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: no job named 'hello-bt' in jobs/; did you mean 'hello-bot'?"


def test_next_on_an_invalid_job_prints_its_problems(run, tmp_path):
    path = write(tmp_path / "jobs", "bad.yaml", 'schedule: "0 0 * * * *"\nimage: spotcron/bot\n')
    result = run("next", str(path))
    assert result.exit_code == 2
    assert "bad.yaml:1: schedule: '0 0 * * * *' has 6 fields" in result.stderr
    assert result.stderr.strip().endswith("1 problem in 1 file")


def test_next_rejects_a_bad_after(run):
    result = run("next", str(example("hello-bot")), "--after", "tomorrow")
    assert result.exit_code == 2 and "'tomorrow' is not an ISO-8601 time" in result.stderr


def test_schema_output_is_the_committed_schema(run):
    result = run("schema")
    assert result.exit_code == 0
    assert result.stdout == SCHEMA.read_text(), "run: spotcron schema > jobs/schema.json"
    schema = json.loads(result.stdout)
    assert schema["title"] == "spotcron job" and "variant" not in schema["properties"]


def test_example_jobs_point_editors_at_the_schema():
    for name in EXAMPLES:
        assert example(name).read_text().startswith("# yaml-language-server: $schema=./schema.json\n")


@pytest.mark.parametrize("command", ["validate", "next", "schema"])
def test_help_texts(run, command):
    result = run(command, "--help")
    assert result.exit_code == 0 and "Examples:" in result.stdout or command == "schema"


def test_commands_are_registered():
    assert {"validate", "next", "schema"} <= set(cli.commands)


def group_raising(exc: Exception) -> click.Group:
    @click.group(cls=SpotcronGroup)
    def root() -> None:
        pass

    @root.command()
    def boom() -> None:
        raise exc

    return root


def test_any_spotcron_error_becomes_a_message_and_exit_2():
    result = CliRunner().invoke(group_raising(CronError("schedule '* *' has 2 fields")), ["boom"])
    assert result.exit_code == 2
    assert result.stderr == "error: schedule '* *' has 2 fields\n"
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_config_errors_print_one_line_per_problem():
    problems = [Problem("jobs/a.yaml", 3, "image", "bad"), Problem("jobs/a.yaml", None, "", "worse")]
    result = CliRunner().invoke(group_raising(ConfigError(problems)), ["boom"])
    assert result.exit_code == 2
    assert result.stderr.splitlines() == ["jobs/a.yaml:3: image: bad", "jobs/a.yaml: worse", "2 problems in 1 file"]


def test_other_exceptions_are_not_swallowed():
    result = CliRunner().invoke(group_raising(RuntimeError("bug")), ["boom"])
    assert result.exit_code == 1 and isinstance(result.exception, RuntimeError)


def test_help_stays_light():
    """`spotcron --help` must not pay for pydantic, rich, YAML or Google clients."""
    import subprocess
    import sys

    code = ("import sys; from spotcron.cli import cli; "
            "heavy = [m for m in sys.modules if m.split('.')[0] in ('pydantic', 'rich', 'yaml', 'matplotlib') "
            "or m.startswith(('google.cloud.', 'google.auth'))]; "
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == ""
