"""Tables never cut a value: a pipe gets everything in full, a narrow terminal drops whole columns."""

from __future__ import annotations

import re
from datetime import timedelta

from spotcron.present import views
from tests.cli.conftest import NOW, make_attempt, make_record

HOUR = timedelta(hours=1)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
LONG_REASON = ("the job exited with code 127 after printing a very long error message that goes on "
               "[and on] past any terminal")


def fill(bucket) -> None:
    bucket.add(make_record("hello-bot", "20260302-0800", created=NOW - 4 * HOUR, cost=0.00123456, exit_code=0))
    bucket.add(make_record("hello-bot", "20260302-1000", "failed", created=NOW - 2 * HOUR, cost=0.0004,
                           exit_code=127, reason=LONG_REASON))
    bucket.add(make_record("dl-benchmark", "20260302-1100-t4", "succeeded", variant="t4", created=NOW - HOUR,
                           attempts=(make_attempt("dl-benchmark", "20260302-1100-t4", start=NOW - timedelta(minutes=50),
                                                  machine_type="n1-standard-8", gpu="nvidia-tesla-t4 x1"),)))


def test_a_pipe_gets_every_value_in_full_whatever_the_width(invoke, bucket):
    fill(bucket)
    for columns in ("80", "200"):
        out = invoke("runs", env={"COLUMNS": columns}).stdout
        assert "…" not in out
        failed = [line for line in out.splitlines() if "20260302-1000" in line][0]
        for cell in ("hello-bot", "failed", "2026-03-02 10:00", "$0.0004", "127", LONG_REASON):
            assert cell in failed, (columns, failed)
        assert "us-central1-a n1-standard-8 SPOT + t4 x1" in out and "succeeded" in out
        assert "left out" not in out


def test_a_narrow_terminal_drops_whole_columns_and_says_which(invoke, bucket):
    fill(bucket)
    result = invoke("runs", env={"COLUMNS": "100", "TTY_COMPATIBLE": "1", "NO_COLOR": "1"})
    out = ANSI.sub("", result.stdout)
    assert "…" not in out
    assert all(len(line) <= 100 for line in out.splitlines())
    assert "left out to fit 100 columns: reason, attempts, zone / machine" in out
    failed = [line for line in out.splitlines() if "20260302-1000" in line][0]
    for cell in ("hello-bot", "failed", "2026-03-02 10:00", "$0.0004", "127"):
        assert cell in failed
    header = [line for line in out.splitlines() if line.startswith("job")][0]
    assert header.split() == ["job", "run", "status", "started", "(UTC)", "duration", "cost", "exit"]


def test_a_wide_terminal_shows_every_column_in_full(invoke, bucket):
    fill(bucket)
    out = ANSI.sub("", invoke("runs", env={"COLUMNS": "260", "TTY_COMPATIBLE": "1", "NO_COLOR": "1"}).stdout)
    assert LONG_REASON in out and "left out" not in out


def test_status_and_results_tables_are_never_cut(invoke, bucket):
    long_vm = "us-central1-a n1-standard-8 SPOT"
    job = "a-job-with-a-rather-long-name-" + "x" * 150
    bucket.add(make_record(job, "20260302-1100", "running", created=NOW - HOUR, deadline=NOW + HOUR))
    out = invoke("status", env={"COLUMNS": "60"}).stdout
    assert "…" not in out and job in out and long_vm.split()[0] in out
    bucket.add(make_record("bot", "20260302-0900", created=NOW - HOUR))
    name = "plots/" + "a-deeply-nested-folder/" * 10 + "loss.csv"
    bucket.results("bot", "20260302-0900", 1, {name: b"x"})
    out = invoke("results", "bot/20260302-0900", env={"COLUMNS": "40"}).stdout
    assert name in out and "…" not in out


def test_fit_columns_drops_whole_columns_lowest_priority_first():
    widths = {**dict.fromkeys(views.RUN_COLUMNS, 10), "reason": 40}  # 9 x 10 + 40 + 9 gaps of 2 = 148
    assert views.fit_columns(widths, 148) == list(views.RUN_COLUMNS)
    assert views.fit_columns(widths, 147) == [c for c in views.RUN_COLUMNS if c != "reason"]
    assert views.fit_columns(widths, 80) == ["job", "run", "status", "duration", "cost", "exit"]
    assert views.fit_columns(widths, 10) == ["job", "run", "status", "cost"]  # never fewer


def test_a_reason_is_one_line_in_full():
    record = make_record("bot", "r", "failed", created=NOW, reason="first line\n  second line " + "x" * 80)
    assert views.run_row(record, NOW).reason == "first line second line " + "x" * 80


def _group(*commands):
    from spotcron.cli import SpotcronGroup

    group = SpotcronGroup("spotcron")
    for command in commands:
        group.add_command(command)
    return group


def test_validate_and_cost_tables_are_never_cut(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from spotcron.cli.cost import cost
    from spotcron.cli.specs import validate

    monkeypatch.chdir(tmp_path)
    for name in ("SPOTCRON_JOBS", "SPOTCRON_STACK", "SPOTCRON_STATE_DIR", "SPOTCRON_PRICES"):
        monkeypatch.delenv(name, raising=False)
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "a-rather-long-job-name-test1.yaml").write_text(
        'schedule: "0 */4 * * *"\nimage: x\nmachine: {type: n1-standard-1}\n')
    (jobs / "bench.yaml").write_text(
        'schedule: "0 3 * * 1"\nimage: x\nmatrix:\n  - {name: cpu, machine: {type: n1-highcpu-16}}\n'
        '  - name: t4\n    machine: {type: n1-standard-8, gpu: {type: nvidia-tesla-t4}}\n')
    cli = _group(validate, cost)
    out = CliRunner().invoke(cli, ["validate", str(jobs)], env={"COLUMNS": "60"}).output
    assert "…" not in out and "a-rather-long-job-name-test1" in out and "n1-standard-8 + 1x nvidia-tesla-t4" in out
    out = CliRunner().invoke(cli, ["cost", "--jobs", str(jobs)], env={"COLUMNS": "60"}).output
    header = next(line for line in out.splitlines() if line.startswith("job"))
    assert header.split() == ["job", "ticks", "VMs", "VM/run", "compute", "disk", "sched", "fns", "store", "total",
                              "classic"]
    row = next(line for line in out.splitlines() if line.startswith("a-rather-long-job-name-test1"))
    assert len(row.split()) == 11 and "…" not in out
    narrow = CliRunner().invoke(cli, ["cost", "--jobs", str(jobs)],
                                env={"COLUMNS": "60", "TTY_COMPATIBLE": "1", "NO_COLOR": "1"}).output
    narrow = ANSI.sub("", narrow)
    assert "left out to fit 60 columns: store, fns, disk, sched, VM/run, compute" in " ".join(narrow.split())
    assert "a-rather-long-job-name-test1" in narrow and "…" not in narrow


def test_a_terminal_shortens_a_long_reason_to_its_width_and_keeps_ids_whole(invoke, bucket):
    fill(bucket)
    for width in (170, 200, 230):
        result = invoke("runs", env={"COLUMNS": str(width), "TTY_COMPATIBLE": "1", "NO_COLOR": "1"})
        out = ANSI.sub("", result.stdout)
        assert all(len(line) <= width for line in out.splitlines()), (width, out)
        failed = [line for line in out.splitlines() if "20260302-1000" in line][0]
        assert "hello-bot" in failed and "20260302-1100-t4" in out
        assert "the job exited" in failed, (width, out)
        reason = failed[failed.index("the job exited"):]
        assert reason.endswith("…") and LONG_REASON.startswith(reason[:-1]), (width, failed)
        assert f"reason shortened with … to fit {width} columns (--json has everything)" in out
