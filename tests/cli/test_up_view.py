"""What `spotcron up` shows: one plain line per event in a pipe; broken job files with file:line."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path

from rich.console import Console

from spotcron.cli.live import JobLoader, UpView
from tests.cli.conftest import NOW, make_attempt, make_record

GOOD = 'schedule: "*/5 * * * *"\nimage: spotcron/bot:latest\nmachine: {type: e2-small}\n'


def view_on(buffer: io.StringIO, records: dict | None = None) -> UpView:
    out = Console(file=buffer, width=100, force_terminal=False, highlight=False)
    return UpView(out, now=lambda: NOW, read_record=lambda job, run_id: (records or {}).get((job, run_id)),
                  upcoming=lambda: {"hello-bot": NOW + timedelta(minutes=3)})


def test_a_pipe_gets_one_plain_line_per_run_start_and_end():
    buffer = io.StringIO()
    done = make_record("hello-bot", "20260302-1200", created=NOW, cost=0.00012, exit_code=0)
    failed = make_record("crasher", "20260302-1200", "failed", created=NOW, cost=0.0001, exit_code=3,
                         reason="the job exited with code 3\nTraceback (most recent call last): ...",
                         attempts=(make_attempt("crasher", "20260302-1200", start=NOW, seconds=2, exit_code=3),))
    view = view_on(buffer, {("hello-bot", "20260302-1200"): done, ("crasher", "20260302-1200"): failed}).start()
    for job in ("hello-bot", "crasher"):
        view.on_event({"type": "run.scheduled", "job": job, "run_id": "20260302-1200", "state": "scheduled"})
        view.on_event({"type": "run.started", "job": job, "run_id": "20260302-1200", "state": "running",
                       "vm": f"sc-{job}-a1", "zone": "local-zone1-a"})
    assert set(view.flying) == {("hello-bot", "20260302-1200"), ("crasher", "20260302-1200")}
    view.on_event({"type": "run.finished", "job": "hello-bot", "run_id": "20260302-1200", "state": "succeeded"})
    view.on_event({"type": "run.finished", "job": "crasher", "run_id": "20260302-1200", "state": "failed"})
    view.stop()
    lines = buffer.getvalue().splitlines()
    assert lines == [
        "12:00:00 hello-bot/20260302-1200 started  VM sc-hello-bot-a1 in local-zone1-a",
        "12:00:00 crasher/20260302-1200 started  VM sc-crasher-a1 in local-zone1-a",
        "12:00:00 hello-bot/20260302-1200 succeeded  in 1m00s, $0.00012, exit 0",
        "12:00:00 crasher/20260302-1200 failed  in 2s, $0.0001, exit 3: the job exited with code 3 "
        "Traceback (most recent call last): ...",
    ]
    assert view.flying == {}


def test_the_terminal_panel_shows_next_fire_times_and_runs_in_flight():
    buffer = io.StringIO()
    view = view_on(buffer)
    view.on_event({"type": "run.started", "job": "bot", "run_id": "r1", "state": "running", "vm": "sc-bot-a1",
                   "zone": "z"})
    out = Console(file=io.StringIO(), width=100)
    out.print(view.panel())
    text = out.file.getvalue()
    assert "hello-bot" in text and "2026-03-02 12:03" in text and "3m00s" in text
    assert "bot/r1" in text and "running" in text and "sc-bot-a1" in text


def two_jobs_watched(tmp_path: Path) -> tuple[Path, io.StringIO, JobLoader]:
    """A jobs folder with hello-bot and other, and a loader whose view writes to a buffer."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "hello-bot.yaml").write_text(GOOD)
    (jobs / "other.yaml").write_text(GOOD)
    buffer = io.StringIO()
    return jobs, buffer, JobLoader(jobs, 60, view_on(buffer))


def test_a_broken_job_file_is_reported_with_file_and_line_and_the_others_keep_running(tmp_path: Path):
    jobs, buffer, loader = two_jobs_watched(tmp_path)
    assert [s.name for s in loader()] == ["hello-bot", "other"]
    assert buffer.getvalue() == ""
    (jobs / "other.yaml").write_text(GOOD.replace('"*/5 * * * *"', '"*/5 * * *"'))
    (jobs / "new.yaml").write_text("schedule: 5\nimage: x\n")
    specs = loader()
    # other keeps its last good version; new was never good, so it does not run.
    assert [s.name for s in specs] == ["hello-bot", "other"]
    said = buffer.getvalue()
    assert f"{jobs / 'other.yaml'}:1: schedule:" in said
    assert f"{jobs / 'new.yaml'}:1: schedule:" in said
    assert f"12:00:00 error  {jobs / 'new.yaml'}:1: schedule:" in said
    assert "12:00:00 warning  2 problems in the job files; jobs running: hello-bot; kept as loaded before: other" \
        in said
    loader()  # the same problems again: said once
    assert buffer.getvalue() == said
    (jobs / "other.yaml").write_text(GOOD)
    (jobs / "new.yaml").unlink()
    assert [s.name for s in loader()] == ["hello-bot", "other"]
    assert "reloaded  job files fixed; jobs running: hello-bot, other" in buffer.getvalue()


def test_a_pipe_hears_of_jobs_added_removed_paused_and_resumed(tmp_path: Path):
    jobs, buffer, loader = two_jobs_watched(tmp_path)
    loader()
    assert buffer.getvalue() == ""  # the first load: up lists the jobs itself
    (jobs / "other.yaml").unlink()
    (jobs / "new.yaml").write_text(GOOD)
    (jobs / "hello-bot.yaml").write_text(GOOD + "paused: true\n")
    loader()
    assert buffer.getvalue().splitlines() == [
        "12:00:00 hello-bot paused  no tick starts it until it is resumed",
        "12:00:00 new added",
        "12:00:00 other removed  its job file is gone; runs in flight finish",
    ]
    (jobs / "hello-bot.yaml").write_text(GOOD)
    loader()
    assert buffer.getvalue().splitlines()[-1] == "12:00:00 hello-bot resumed"
    loader()  # nothing changed: nothing said
    assert len(buffer.getvalue().splitlines()) == 4


def test_up_timeout_without_once_is_an_error(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from spotcron.cli import SpotcronGroup
    from spotcron.cli.up import up

    monkeypatch.chdir(tmp_path)
    group = SpotcronGroup("spotcron")
    group.add_command(up)
    result = CliRunner().invoke(group, ["up", "--timeout", "60"])
    assert result.exit_code == 2
    assert result.output.strip() == ("error: --timeout goes with --once: without it up runs until Ctrl-C; add "
                                     "--once or leave --timeout out")


def test_a_queued_run_gets_a_line_with_the_limit_and_shows_as_queued_in_flight():
    buffer = io.StringIO()
    view = view_on(buffer).start()
    view.on_event({"type": "run.scheduled", "job": "bot", "run_id": "r1", "state": "scheduled"})
    view.on_event({"type": "run.queued", "job": "bot", "run_id": "r1", "state": "queued",
                   "reason": "waiting for room: refused by the stack limit max_live_vms: 20 job VMs are live"})
    assert view.flying[("bot", "r1")].state == "queued"
    view.stop()
    assert buffer.getvalue().splitlines() == [
        "12:00:00 bot/r1 queued  waiting for room: refused by the stack limit max_live_vms: 20 job VMs are live"]
