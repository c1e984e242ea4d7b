"""`spotcron validate` names every problem it can find at once: a field the model rejects does not
hide the checks that need a parsed job, and a broken stack file does not hide the jobs' problems."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from spotcron.cli import cli
from spotcron.core.errors import ConfigError
from spotcron.core.loader import load_jobs

THREE_MISTAKES = """\
schedule: "0 9 * * 1#1"
image: busybox
timeout: 120d
retries: {preemption: lots}
benchmark: {base: nope}
"""


def _problems(tmp_path: Path, files: dict[str, str]) -> list[str]:
    jobs = tmp_path / "jobs"
    jobs.mkdir(exist_ok=True)
    for name, text in files.items():
        (jobs / name).write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_jobs([jobs], grace=300)
    return [str(p) for p in caught.value.problems]


def test_a_field_the_model_rejects_does_not_hide_the_timeout_and_benchmark_problems(tmp_path):
    found = _problems(tmp_path, {"bot.yaml": THREE_MISTAKES})
    where = [line.split(": ")[0] + ": " + line.split(": ")[1] for line in found]
    assert where == [f"{tmp_path}/jobs/bot.yaml:1: schedule", f"{tmp_path}/jobs/bot.yaml:3: timeout",
                     f"{tmp_path}/jobs/bot.yaml:4: retries.preemption",
                     f"{tmp_path}/jobs/bot.yaml:5: benchmark.base"], found
    assert "use a timeout of at most" in found[1]
    assert "remove benchmark.base or add matrix entries" in found[3]


def test_the_checks_of_a_broken_field_are_not_repeated_or_guessed(tmp_path):
    # timeout itself is broken: its model error stands alone, no check runs on a stand-in value.
    found = _problems(tmp_path, {"bot.yaml": 'schedule: "61 * * * *"\nimage: busybox\ntimeout: 200d\n'})
    assert [line.split(": ")[1] for line in found] == ["schedule", "timeout"], found
    assert "120d" in found[1]


def test_validate_lists_the_stack_files_problems_and_every_jobs_in_every_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("SPOTCRON_JOBS", "SPOTCRON_STACK", "SPOTCRON_GRACE"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "infra").mkdir()
    (tmp_path / "infra" / "stack.yaml").write_text("grace: -1\n")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "a.yaml").write_text(THREE_MISTAKES)
    (tmp_path / "jobs" / "b.yaml").write_text('schedule: "0 9 * * *"\nimage: busybox\nmachine: {type: e2-smal}\n')
    result = CliRunner().invoke(cli, ["validate"], catch_exceptions=False)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("infra/stack.yaml:1: grace:")
    assert [line.split(": ")[0] for line in lines[1:-1]] == ["jobs/a.yaml:1", "jobs/a.yaml:3", "jobs/a.yaml:4",
                                                            "jobs/a.yaml:5", "jobs/b.yaml:3"], lines
    assert "did you mean 'e2-small'" in lines[5]
    assert lines[-1] == "6 problems in 3 files"


def test_a_duplicate_key_does_not_hide_the_rest_of_the_file(tmp_path):
    found = _problems(tmp_path, {"bot.yaml": 'schedule: "0 9 * * *"\nschedule: "0 10 * * *"\nimage: busybox\n'
                                             'imagee: x\nmachine: {type: e2-smal}\n'})
    assert [line.split(": ")[0].rsplit("/", 1)[-1] + ": " + line.split(": ")[1] for line in found] == [
        "bot.yaml:2: schedule", "bot.yaml:4: imagee", "bot.yaml:5: machine.type"], found
    assert "duplicate key; already set on line 1" in found[0] and "did you mean 'image'" in found[1]


def test_stack_file_problems_have_their_line_and_a_misspelt_setting_its_suggestion(tmp_path):
    from spotcron.core.settings import load_settings

    stack = tmp_path / "stack.yaml"
    stack.write_text("project: demo\nregoin: us-east1\nlimits:\n  max_live_vms: lots\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(stack, {"SPOTCRON_GRACE": "-1"})
    found = [str(p) for p in caught.value.problems]
    assert found[0].startswith(f"{stack}: grace: ") and found[0].endswith("(from SPOTCRON_GRACE)")
    assert found[1] == f"{stack}:2: regoin: unknown setting; did you mean 'region'?"
    assert found[2].startswith(f"{stack}:4: limits.max_live_vms: ")


def test_a_flattened_field_is_told_the_shape_it_was_meant_as(tmp_path):
    found = _problems(tmp_path, {"bot.yaml": 'schedule: "0 9 * * *"\nimage: busybox\nmachine: e2-small\n'
                                             'env: [LOG=debug, EMPTY=]\nretries: 3\n'})
    assert [line.split(": ", 2)[2] for line in found] == [
        "must be a mapping (indented key: value lines), not 'e2-small'; a machine type goes under type: write "
        "machine: {type: e2-small}",
        "must be a mapping (indented key: value lines), not a list; write env: {LOG: 'debug', EMPTY: ''}",
        "must be a mapping (indented key: value lines), not the number 3; write retries: {preemption: 3} (Spot "
        "preemptions, retried in the next zone) or {failure: 3} (a failed container)"]


def test_outside_a_jobs_folder_the_commands_say_how_to_start_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPOTCRON_JOBS", raising=False)
    for args in (["validate"], ["next", "hello"]):
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
        assert result.exit_code == 2
        assert "`spotcron init` starts one" in result.output and "--jobs (SPOTCRON_JOBS)" in result.output, args


def test_a_check_that_reads_a_broken_field_says_nothing_rather_than_judge_a_default(tmp_path):
    # matrix is broken, so "benchmark.base: the job has no matrix" would be false; timeout is fine.
    found = _problems(tmp_path, {"bot.yaml": 'schedule: "0 9 * * *"\nimage: busybox\ntimeout: 120d\n'
                                             'benchmark: {base: cpu}\nmatrix: [{name: cpu, machine: {tpye: x}}]\n'})
    fields = [line.split(": ")[1] for line in found]
    assert "benchmark.base" not in fields and "timeout" in fields, found


def test_the_valid_files_warnings_follow_the_errors_of_a_broken_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("SPOTCRON_JOBS", "SPOTCRON_STACK", "SPOTCRON_GRACE", "SPOTCRON_PRICES"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "a.yaml").write_text('schedule: "0 25 * * *"\nimage: busybox\n')
    (tmp_path / "jobs" / "b.yaml").write_text('schedule: "0 9 * * *"\nimage: busybox\nmachine: {type: c3-highcpu-4}\n')
    result = CliRunner().invoke(cli, ["validate"], catch_exceptions=False)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines[0] == "jobs/a.yaml:1: schedule: '0 25 * * *': hour 25 is out of range: allowed 0-23", lines
    assert lines[1] == "1 problem in 1 file"
    assert lines[2:] and all(line.startswith("warning: b: ") for line in lines[2:]), lines
    assert any("c3-highcpu-4" in line for line in lines[2:]), lines
