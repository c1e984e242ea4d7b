"""`spotcron pause`, `resume` and `delete`: what they change, what they keep, and when they ask."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

from click.testing import CliRunner

from spotcron.cli import SpotcronGroup
from spotcron.cli.manage import COMMANDS
from spotcron.core import layout
from spotcron.core.loader import load_jobs
from spotcron.engine.deployed import SpecStore
from spotcron.local.scheduler import LocalScheduler
from spotcron.testing.memory import FakeClock
from tests.cli.conftest import NOW, make_record

BOT = """\
# The bot: comments and layout stay as written.
schedule: "*/5 * * * *"   # every five minutes
image: spotcron/bot:latest
local: {command: [true]}
"""


def cli(context, *args: str, stdin: str | None = None):
    group = SpotcronGroup("spotcron")
    for command in COMMANDS:
        group.add_command(command)
    return CliRunner().invoke(group, list(args), obj=context, input=stdin, env={"COLUMNS": "200"},
                              catch_exceptions=False)


def jobs_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("SPOTCRON_JOBS", "SPOTCRON_STACK", "SPOTCRON_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(BOT)
    return tmp_path / "jobs"


def test_pause_and_resume_set_paused_in_the_job_file_and_keep_the_rest(context, tmp_path, monkeypatch):
    jobs = jobs_folder(tmp_path, monkeypatch)
    result = cli(context, "pause", "bot")
    assert result.exit_code == 0, result.output
    assert (jobs / "bot.yaml").read_text() == BOT + "paused: true\n"
    said = " ".join(result.output.split())
    assert said.startswith("paused bot (jobs/bot.yaml: paused: true). A running `spotcron up` fires it no more "
                           "from its next tick; `spotcron run bot` still runs it by hand.")
    assert "already paused" in cli(context, "pause", "bot").output
    resumed = cli(context, "resume", "bot")
    assert resumed.exit_code == 0
    assert (jobs / "bot.yaml").read_text() == BOT  # the line goes: a resumed file reads as one never paused
    assert "resumed bot (jobs/bot.yaml: its paused: line removed)." in " ".join(resumed.output.split())
    (jobs / "bot.yaml").write_text(BOT.replace("local:", "paused: true  # until the API is back\nlocal:"))
    cli(context, "resume", "bot")
    assert (jobs / "bot.yaml").read_text() == BOT.replace("local:", "# until the API is back\nlocal:")


def test_a_file_that_cannot_be_edited_safely_is_left_alone(context, tmp_path, monkeypatch):
    jobs = jobs_folder(tmp_path, monkeypatch)
    flow = '{schedule: "0 * * * *", image: spotcron/bot:latest}\n'
    (jobs / "bot.yaml").write_text(flow)
    result = cli(context, "pause", "bot")
    assert result.exit_code == 2
    assert "error: jobs/bot.yaml: cannot set paused: true in it: it does not parse once edited" in result.output
    assert (jobs / "bot.yaml").read_text() == flow
    (jobs / "bot.yaml").write_text('schedule: "61 * * * *"\nimage: x\n')
    broken = cli(context, "pause", "bot")
    assert broken.exit_code == 2 and "schedule" in broken.output
    assert cli(context, "pause", "nope").exit_code == 2


def test_a_running_up_stops_firing_a_paused_job_at_its_next_tick(context, tmp_path, monkeypatch):
    jobs = jobs_folder(tmp_path, monkeypatch)
    fired: list[str] = []
    clock = FakeClock(datetime(2026, 11, 22, 8, 2, tzinfo=UTC))
    scheduler = LocalScheduler(lambda: load_jobs([jobs]), lambda topic, data, attributes: fired.append(topic) or "1",
                               clock, start_topic="start", sweep_topic="sweep", sweep_interval_s=3600, watch=[jobs])
    scheduler.reload()
    clock.set(datetime(2026, 11, 22, 8, 5, tzinfo=UTC))
    scheduler.step()
    assert fired.count("start") == 1
    cli(context, "pause", "bot")
    clock.set(datetime(2026, 11, 22, 8, 10, tzinfo=UTC))
    scheduler.step()  # the file changed: reloaded before the 08:10 tick, which does not fire
    assert fired.count("start") == 1 and scheduler.upcoming() == {}
    cli(context, "resume", "bot")
    clock.set(datetime(2026, 11, 22, 8, 11, tzinfo=UTC))
    scheduler.step()
    assert scheduler.upcoming() == {"bot": datetime(2026, 11, 22, 8, 15, tzinfo=UTC)}  # 08:10 is not made up
    clock.set(datetime(2026, 11, 22, 8, 15, tzinfo=UTC))
    scheduler.step()
    assert fired.count("start") == 2


def test_delete_asks_then_removes_the_file_and_deployment_and_keeps_the_runs(context, bucket, tmp_path, monkeypatch):
    from spotcron.core.loader import load_job_file

    jobs = jobs_folder(tmp_path, monkeypatch)
    (tmp_path / ".spotcron" / "bucket").mkdir(parents=True)
    SpecStore(bucket.blobs).write(load_job_file(jobs / "bot.yaml"))
    bucket.add(make_record("bot", "20260302-1000", created=NOW, exit_code=0))
    bucket.logs("bot", "20260302-1000", 1, "hi\n")

    result = cli(context, "delete", "bot")  # no terminal to ask on
    assert result.exit_code == 2 and "pass --yes" in result.output
    assert (jobs / "bot.yaml").exists()
    context.interactive = lambda: True
    result = cli(context, "delete", "bot", stdin="n\n")
    assert result.exit_code == 1 and (jobs / "bot.yaml").exists()
    assert "keep its 1 run with its logs and results (--delete-results removes it)" in result.output

    result = cli(context, "delete", "bot", stdin="y\n")
    assert result.exit_code == 0, result.output
    assert not (jobs / "bot.yaml").exists()
    assert (tmp_path / ".spotcron" / "deleted" / "bot.yaml").read_text() == BOT
    assert bucket.blobs.read(layout.deployed_spec("bot")) is None
    assert bucket.store.read("bot", "20260302-1000") is not None  # results stay unless asked
    assert "its 1 run stays (`spotcron runs bot`)" in result.output


def test_delete_results_too_but_never_under_a_run_in_flight(context, bucket, tmp_path, monkeypatch):
    jobs = jobs_folder(tmp_path, monkeypatch)
    (tmp_path / ".spotcron" / "bucket").mkdir(parents=True)
    bucket.add(make_record("bot", "20260302-1000", created=NOW, exit_code=0))
    bucket.logs("bot", "20260302-1000", 1, "hi\n")
    bucket.add(make_record("other", "20260302-1000", created=NOW, exit_code=0))
    flying = bucket.add(make_record("bot", "20260302-1100", "running", created=NOW))
    refused = cli(context, "delete", "bot", "--delete-results", "--yes")
    assert refused.exit_code == 2 and "has runs in flight (20260302-1100)" in refused.output
    assert (jobs / "bot.yaml").exists()
    bucket.store.update("bot", flying.run_id, lambda r: r.with_state("succeeded", NOW))
    result = cli(context, "delete", "bot", "--delete-results", "--yes")
    assert result.exit_code == 0, result.output
    assert bucket.blobs.list(layout.job_prefix("bot")) == []
    assert bucket.store.read("other", "20260302-1000") is not None


def test_delete_without_a_local_bucket_removes_the_file_only(context, tmp_path, monkeypatch):
    jobs = jobs_folder(tmp_path, monkeypatch)
    context = context.__class__(open_blobs=lambda bucket, state_dir: contextlib.nullcontext(None))
    result = cli(context, "delete", "bot", "--yes")
    assert result.exit_code == 0, result.output
    assert not (jobs / "bot.yaml").exists() and (tmp_path / ".spotcron" / "deleted" / "bot.yaml").exists()
