"""spotcron runs / logs / results / status / run, on an in-memory bucket, the local emulator bucket and
the Pub/Sub emulator."""

from __future__ import annotations

import base64
import contextlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from spotcron.cli.run_commands import RunsContext
from spotcron.core import layout
from spotcron.core.errors import SpotcronError
from spotcron.core.runs import Outcome, RunState, vm_name
from spotcron.engine.ports import Instance
from spotcron.present import views
from spotcron.testing.memory import MemoryCompute
from tests.cli.conftest import NOW, make_attempt, make_record

HOUR = timedelta(hours=1)
JOB_FILE = 'schedule: "0 * * * *"\nimage: spotcron/bot:latest\nmachine:\n  type: e2-small\ntimeout: 5m\n'


def line_of(output: str, *needles: str) -> str:
    """The one output line containing every needle."""
    lines = [line for line in output.splitlines() if all(n in line for n in needles)]
    assert len(lines) == 1, f"{needles} in {len(lines)} lines of:\n{output}"
    return lines[0]


def fill_three_runs(bucket) -> None:
    bucket.add(make_record("hello-bot", "20260302-0800", created=NOW - 4 * HOUR, cost=0.00123, exit_code=0))
    bucket.add(make_record("hello-bot", "20260302-1000", "failed", created=NOW - 2 * HOUR, cost=0.0004, exit_code=3,
                           reason="the job exited with code 3 after printing a very long error message"))
    bucket.add(make_record("dl-benchmark", "20260302-1100-t4", "running", variant="t4", created=NOW - HOUR,
                           attempts=(make_attempt("dl-benchmark", "20260302-1100-t4", start=NOW - timedelta(minutes=50),
                                                  seconds=None, machine_type="n1-standard-8",
                                                  gpu="nvidia-tesla-t4 x1"),)))


# --- spotcron runs -----------------------------------------------------------------------------------


def test_runs_table_shows_each_cell_newest_first(invoke, bucket):
    fill_three_runs(bucket)
    result = invoke("runs")
    assert result.exit_code == 0, result.output
    out = result.stdout
    header = line_of(out, "job", "run", "status")
    for column in views.RUN_COLUMNS:
        assert column in header
    ok = line_of(out, "20260302-0800")
    for cell in ("hello-bot", "succeeded", "2026-03-02 08:00", "1m00s", "us-central1-a e2-small SPOT", "$0.0012"):
        assert cell in ok
    failed = line_of(out, "20260302-1000")
    assert "failed" in failed and "$0.0004" in failed and " 3 " in failed
    assert "the job exited with code 3 after printing a very long error message" in failed  # in full
    live = line_of(out, "20260302-1100-t4")
    assert "dl-benchmark/t4" in live and "running" in live and "50m00s+" in live
    assert "us-central1-a n1-standard-8 SPOT + t4 x1" in live
    assert live.split().count("-") >= 2  # no cost and no exit code yet
    assert out.index("20260302-1100-t4") < out.index("20260302-1000") < out.index("20260302-0800")


def test_runs_json_is_the_records_newest_first(invoke, bucket):
    fill_three_runs(bucket)
    result = invoke("runs", "--json", "--limit", "2")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [(r["job"], r["run_id"]) for r in data] == [("dl-benchmark", "20260302-1100-t4"),
                                                      ("hello-bot", "20260302-1000")]
    assert data[1]["state"] == "failed" and data[1]["exit_code"] == 3 and data[1]["cost_usd"] == 0.0004
    assert data[1]["attempts"][0]["vm_name"] == vm_name("hello-bot", "20260302-1000", 1)
    assert data[1]["created_at"] == "2026-03-02T10:00:00Z"


def test_runs_of_one_job_and_one_variant(invoke, bucket):
    fill_three_runs(bucket)
    bucket.add(make_record("dl-benchmark", "20260302-1100-cpu", variant="cpu", created=NOW - HOUR))
    only_bot = json.loads(invoke("runs", "hello-bot", "--json").stdout)
    assert {r["run_id"] for r in only_bot} == {"20260302-0800", "20260302-1000"}
    only_t4 = json.loads(invoke("runs", "dl-benchmark/t4", "--json").stdout)
    assert [r["run_id"] for r in only_t4] == ["20260302-1100-t4"]


def test_runs_of_one_variant_with_repeats(invoke, bucket):
    # `repeat: 3` makes run ids end in -VARIANT-rN: the entry is still the one named
    for variant in ("t4", "cpu"):
        for repeat in (1, 2):
            bucket.add(make_record("dl-benchmark", f"20260302-1100-{variant}-r{repeat}", variant=variant,
                                   created=NOW - HOUR))
    result = invoke("runs", "dl-benchmark/t4", "--json")
    assert result.exit_code == 0, result.output
    assert sorted(r["run_id"] for r in json.loads(result.stdout)) == ["20260302-1100-t4-r1", "20260302-1100-t4-r2"]
    wrong = invoke("runs", "dl-benchmark/t5")
    assert wrong.exit_code == 2
    assert "job dl-benchmark has no matrix entry 't5' with runs; its entries: cpu, t4" in wrong.stderr


def test_the_job_and_run_columns_copied_together_name_the_run_for_logs_and_results(invoke, bucket):
    bucket.add(make_record("dl-benchmark", "20260302-1100-t4-r1", variant="t4", created=NOW - HOUR, exit_code=0))
    bucket.logs("dl-benchmark", "20260302-1100-t4-r1", 1, "trained\n")
    bucket.results("dl-benchmark", "20260302-1100-t4-r1", 1, {"metrics.json": b"{}"})
    row = next(line for line in invoke("runs").stdout.splitlines() if "20260302-1100-t4-r1" in line)
    job_cell, run_cell = row.split()[:2]
    assert (job_cell, run_cell) == ("dl-benchmark/t4", "20260302-1100-t4-r1")
    for pasted in ([job_cell, run_cell], [f"{job_cell}/{run_cell}"], [f"dl-benchmark/{run_cell}"]):
        result = invoke("logs", *pasted)
        assert result.exit_code == 0, (pasted, result.output)
        assert result.stdout == "trained\n"
        assert "metrics.json" in invoke("results", *pasted).stdout
    wrong = invoke("logs", "dl-benchmark/e2-std-4", run_cell)
    assert wrong.exit_code == 2
    assert "20260302-1100-t4-r1 is a run of dl-benchmark/t4, not dl-benchmark/e2-std-4" in wrong.stderr
    assert invoke("logs", "a", "b", "c").exit_code == 2


def test_results_cat_prints_one_file_as_it_is(invoke, bucket):
    bucket.add(make_record("hello-bot", "20260302-1000", created=NOW - HOUR, exit_code=0))
    bucket.results("hello-bot", "20260302-1000", 1, {"answer.json": b'{"answer": 42}\n', "deep/x.bin": b"\x00\xff"})
    result = invoke("results", "hello-bot/20260302-1000", "--cat", "answer.json")
    assert result.exit_code == 0, result.output
    assert result.stdout == '{"answer": 42}\n' and result.stderr == ""
    assert invoke("results", "hello-bot/20260302-1000", "--cat", "deep/x.bin").stdout_bytes == b"\x00\xff"
    missing = invoke("results", "hello-bot/20260302-1000", "--cat", "answer.jsn")
    assert missing.exit_code == 2
    assert ("error: hello-bot/20260302-1000 attempt 1 wrote no results/answer.jsn; did you mean 'answer.json'? "
            "(`spotcron results hello-bot/20260302-1000` lists its files)") in missing.stderr
    both = invoke("results", "hello-bot/20260302-1000", "--cat", "answer.json", "--json")
    assert both.exit_code == 2 and "--cat prints one file" in both.stderr


def test_runs_limit_says_how_many_are_hidden(invoke, bucket):
    fill_three_runs(bucket)
    result = invoke("runs", "-n", "1")
    assert "20260302-1100-t4" in result.stdout and "20260302-0800" not in result.stdout
    # the footer is for people: on stderr, so `spotcron runs | wc -l` counts runs (and the header)
    assert "showing the newest 1 of 3 runs; --limit 0 shows all" in result.stderr
    assert "showing the newest" not in result.stdout


def test_runs_on_an_empty_bucket_is_a_friendly_line(invoke):
    result = invoke("runs")
    assert result.exit_code == 0
    assert "No runs yet in the local bucket (.spotcron/bucket). Start one with `spotcron run JOB`" in result.stdout
    assert json.loads(invoke("runs", "--json").stdout) == []


def test_runs_of_an_unknown_job_suggests_a_close_name(invoke, bucket):
    fill_three_runs(bucket)
    result = invoke("runs", "hello-bto", "--bucket", "gs://my-bucket")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: no runs of job 'hello-bto' in gs://my-bucket; did you mean 'hello-bot'?"
    result = invoke("runs", "zzz")
    assert "no runs of job 'zzz' in the local bucket (.spotcron/bucket); jobs with runs: dl-benchmark, hello-bot" \
        in result.stderr


# --- spotcron logs -----------------------------------------------------------------------------------


def preempted_then_ok(bucket) -> None:
    job, run = "hello-bot", "20260302-1000"
    attempts = (make_attempt(job, run, 1, start=NOW - HOUR, seconds=20, outcome="preempted", exit_code=None),
                make_attempt(job, run, 2, start=NOW - HOUR + timedelta(minutes=2), zone="us-central1-b"))
    bucket.add(make_record(job, run, created=NOW - HOUR, attempts=attempts, exit_code=0))
    bucket.logs(job, run, 1, "attempt one started\n")
    bucket.logs(job, run, 2, "attempt two started\nall done\n")


def test_logs_prints_the_latest_attempt_or_the_given_one(invoke, bucket):
    preempted_then_ok(bucket)
    assert invoke("logs", "hello-bot/20260302-1000").stdout == "attempt two started\nall done\n"
    assert invoke("logs", "hello-bot/20260302-1000", "--attempt", "1").stdout == "attempt one started\n"
    result = invoke("logs", "hello-bot/20260302-1000", "--attempt", "3")
    assert result.exit_code == 2
    assert "error: run hello-bot/20260302-1000 has no attempt 3; its attempts: 1, 2" in result.stderr


def test_a_bare_run_id_is_found_in_its_job(invoke, bucket):
    preempted_then_ok(bucket)
    bucket.add(make_record("other", "20260302-0900", created=NOW - 3 * HOUR))
    assert invoke("logs", "20260302-1000").stdout == "attempt two started\nall done\n"


def test_a_job_name_alone_is_its_latest_run_and_says_which(invoke, bucket):
    preempted_then_ok(bucket)
    bucket.add(make_record("hello-bot", "20260302-0800", created=NOW - 4 * HOUR))
    result = invoke("logs", "hello-bot")
    assert result.exit_code == 0, result.output
    assert result.stdout == "attempt two started\nall done\n"
    assert result.stderr.startswith("hello-bot: its latest run, hello-bot/20260302-1000 (succeeded); name a run")
    listing = invoke("results", "hello-bot", "--json")
    assert listing.exit_code == 0 and "hello-bot/20260302-1000" in listing.stderr
    # A run id wins over a job of the same name; an unknown name is still an error.
    assert invoke("logs", "nope").stderr.strip().startswith("error: no run 'nope'")


def test_an_ambiguous_bare_run_id_lists_the_matches(invoke, bucket):
    preempted_then_ok(bucket)
    bucket.add(make_record("other", "20260302-1000", created=NOW - HOUR))
    bucket.logs("other", "20260302-1000", 1, "other job\n")
    result = invoke("logs", "20260302-1000")
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: run id '20260302-1000' exists in 2 jobs: hello-bot/20260302-1000, "
                                     "other/20260302-1000; write JOB/RUN or pass --job")
    assert invoke("logs", "20260302-1000", "--job", "other").stdout == "other job\n"


def test_unknown_runs_and_jobs_are_errors_that_say_where_to_look(invoke, bucket):
    preempted_then_ok(bucket)
    result = invoke("logs", "20990101-0000")
    assert result.stderr.strip() == ("error: no run '20990101-0000' in the local bucket (.spotcron/bucket); "
                                     "`spotcron runs` lists the runs there")
    result = invoke("logs", "hello-bot/20990101-0000")
    assert result.stderr.strip() == ("error: no run hello-bot/20990101-0000 in the local bucket (.spotcron/bucket); "
                                     "`spotcron runs hello-bot` lists its runs")
    result = invoke("logs", "nope/20260302-1000", "--bucket", "gs://b")
    assert result.stderr.strip() == "error: no runs of job 'nope' in gs://b; jobs with runs: hello-bot"
    result = invoke("results", "a/b/c")
    assert "error: 'a/b/c' is not a run; write RUN (e.g. 20261122-1000) or JOB/RUN" in result.stderr


def test_logs_of_a_run_without_logs(invoke, bucket):
    bucket.add(make_record("bot", "20260302-1100", "running", created=NOW - timedelta(minutes=5)))
    bucket.add(make_record("bot", "20260302-1000", "lost", created=NOW - HOUR, reason="the VM vanished"))
    result = invoke("logs", "bot/20260302-1100")
    assert result.exit_code == 2
    assert ("error: no logs yet for bot/20260302-1100 attempt 1: the run is running and none of its output has "
            "reached the bucket; add --follow to wait") in result.stderr
    result = invoke("logs", "bot/20260302-1000")
    assert ("error: no logs for bot/20260302-1000 attempt 1 (runs/bot/20260302-1000/attempt-1/logs.txt does not "
            "exist); the run ended lost: the VM vanished") in result.stderr


def test_follow_prints_new_bytes_and_stops_when_the_run_ends(invoke, bucket, sleeps):
    job, run = "bot", "20260302-1100"
    bucket.add(make_record(job, run, "running", created=NOW - timedelta(minutes=1)))
    bucket.logs(job, run, 1, "one\n")

    def finish() -> None:
        bucket.logs(job, run, 1, "one\ntwo\nthree\n")
        bucket.store.update(job, run, lambda r: r.with_state("succeeded", NOW, exit_code=0))

    sleeps.steps = [lambda: None, lambda: bucket.logs(job, run, 1, "one\ntwo\n"), finish,
                    lambda: pytest.fail("polled after the run ended")]
    result = invoke("logs", run, "--follow", "--interval", "0.5")
    assert result.exit_code == 0, result.output
    assert result.stdout == "one\ntwo\nthree\n"
    assert sleeps.calls == [0.5, 0.5, 0.5]
    assert "bot/20260302-1100 ended succeeded" in result.stderr


def test_follow_moves_to_the_next_attempt_after_a_preemption(invoke, bucket, sleeps):
    job, run = "bot", "20260302-1100"
    bucket.add(make_record(job, run, "running", created=NOW - timedelta(minutes=1)))
    bucket.logs(job, run, 1, "a1 start\n")

    def preempted() -> None:
        bucket.logs(job, run, 1, "a1 start\na1 last words\n")
        retry = make_attempt(job, run, 2, start=NOW, seconds=None, zone="us-central1-c")
        bucket.store.update(job, run, lambda r: r.with_attempt(retry, NOW))
        bucket.logs(job, run, 2, "a2 start\n")

    def done() -> None:
        bucket.store.update(job, run, lambda r: r.with_state("failed", NOW, reason="exit 1", exit_code=1))

    sleeps.steps = [preempted, done]
    result = invoke("logs", f"{job}/{run}", "-f")
    assert result.stdout == "a1 start\na1 last words\na2 start\n"
    assert "-- attempt 2 --" in result.stderr and "ended failed: exit 1" in result.stderr


def test_follow_opens_the_bucket_once(bucket, sleeps, invoke):
    opened: list[str | None] = []

    def opener(name, state_dir):
        opened.append(name)
        return contextlib.nullcontext(bucket.blobs)

    for where, run in ((None, "r1"), ("gs://b", "r2")):
        bucket.add(make_record("bot", run, "running", created=NOW - timedelta(minutes=1)))
        sleeps.steps = [lambda: None, lambda run=run: bucket.store.update("bot", run,
                                                                          lambda r: r.with_state("succeeded", NOW))]
        args = ("logs", f"bot/{run}", "-f") + (("--bucket", where) if where else ())
        assert invoke(*args, obj=RunsContext(open_blobs=opener, sleep=sleeps)).exit_code == 0
        assert opened == [where]
        opened.clear()


def test_logs_of_a_running_attempt_come_from_the_parts_shipped_so_far(invoke, bucket):
    job, run = "bot", "20260302-1100"
    bucket.add(make_record(job, run, "running", created=NOW - timedelta(minutes=1)))
    bucket.part(job, run, 1, 0, "one\n")
    bucket.part(job, run, 1, 4, "two\n")
    bucket.part(job, run, 1, 100, "not yet reachable: the part before it is missing\n")
    assert invoke("logs", f"{job}/{run}").stdout == "one\ntwo\n"
    bucket.logs(job, run, 1, "one\ntwo\nthree\n")  # the whole log, stored when the attempt ends
    assert invoke("logs", f"{job}/{run}").stdout == "one\ntwo\nthree\n"


class Ticking:
    """A clock the test moves: the time each object reaches the bucket."""

    def __init__(self, at):
        self.at = at

    def now(self):
        return self.at


def test_logs_timestamps_say_when_each_line_reached_the_bucket(invoke, bucket):
    clock = Ticking(NOW - timedelta(seconds=20))
    bucket.blobs.clock = clock
    job, run = "bot", "20260302-1155"
    start = NOW - timedelta(seconds=25)
    attempt = make_attempt(job, run, start=start, seconds=None).model_copy(
        update={"finished_at": NOW - timedelta(seconds=2), "deleted_at": NOW, "outcome": Outcome.EXITED, "exit_code": 0})
    bucket.add(make_record(job, run, created=start, attempts=(attempt,), exit_code=0))
    bucket.part(job, run, 1, 0, "one\ntw")  # a line cut across two parts is stamped when it was whole
    clock.at = NOW - timedelta(seconds=15)
    bucket.part(job, run, 1, 6, "o\nthree\n")
    clock.at = NOW
    bucket.logs(job, run, 1, "one\ntwo\nthree\nlast words")  # the tail no part held: the attempt's end
    result = invoke("logs", f"{job}/{run}", "--timestamps")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["2026-03-02T11:59:40Z one", "2026-03-02T11:59:45Z two",
                                          "2026-03-02T11:59:45Z three", "2026-03-02T11:59:58Z last words"]
    assert invoke("logs", f"{job}/{run}").stdout == "one\ntwo\nthree\nlast words"


def test_follow_with_timestamps_stamps_lines_as_they_come(invoke, bucket, sleeps):
    clock = Ticking(NOW - timedelta(seconds=30))
    bucket.blobs.clock = clock
    job, run = "bot", "20260302-1100"
    bucket.add(make_record(job, run, "running", created=NOW - timedelta(minutes=1)))
    bucket.part(job, run, 1, 0, "starting\n")

    def finish() -> None:
        clock.at = NOW
        bucket.part(job, run, 1, 9, "done\n")
        record = bucket.store.read(job, run)
        ended = record.attempts[0].model_copy(update={"finished_at": NOW, "deleted_at": NOW, "outcome": Outcome.EXITED,
                                                       "exit_code": 0})
        bucket.store.blobs.write(layout.run_record(job, run), record.model_copy(
            update={"state": RunState.SUCCEEDED, "attempts": (ended,), "exit_code": 0}).to_json())

    sleeps.steps.append(finish)
    result = invoke("logs", f"{job}/{run}", "-f", "-t")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["2026-03-02T11:59:30Z starting", "2026-03-02T12:00:00Z done"]


def test_follow_reads_each_part_once_then_moves_on_to_the_whole_log(invoke, bucket, sleeps, monkeypatch):
    from spotcron.present import logs as follow

    monkeypatch.setattr(follow, "LOG_PIECE", 3)  # parts longer than a piece are read in pieces
    job, run = "bot", "20260302-1100"
    bucket.add(make_record(job, run, "running", created=NOW - timedelta(minutes=1)))
    bucket.part(job, run, 1, 0, "héllo\n")  # a character split across two pieces

    def finish() -> None:
        bucket.logs(job, run, 1, "héllo\nworld\nbye\n")
        bucket.store.update(job, run, lambda r: r.with_state("succeeded", NOW, exit_code=0))

    sleeps.steps = [lambda: bucket.part(job, run, 1, 7, "world\n"), finish]
    before = bucket.blobs.calls["read_range"]
    result = invoke("logs", f"{job}/{run}", "--follow")
    assert result.stdout == "héllo\nworld\nbye\n"
    reads = bucket.blobs.calls["read_range"] - before
    assert reads < 40  # each byte read once, plus a look at the next name per poll (not a re-read per poll)


# --- spotcron results --------------------------------------------------------------------------------

FILES = {"metrics.json": b'{"seconds": 12.5}', "plots/loss.csv": b"step,loss\n1,0.5\n" * 100}


def test_results_lists_the_manifest(invoke, bucket):
    bucket.add(make_record("bench", "20260302-1000", created=NOW - HOUR))
    bucket.results("bench", "20260302-1000", 1, FILES)
    result = invoke("results", "bench/20260302-1000")
    assert result.exit_code == 0, result.output
    assert "results of bench/20260302-1000 attempt 1 (succeeded), from runs/bench/20260302-1000/attempt-1/" \
           "manifest.json" in result.stdout
    metrics = line_of(result.stdout, "metrics.json")
    assert "17 B" in metrics and views.manifest_files(bucket.blobs.read(
        layout.manifest("bench", "20260302-1000", 1)).data, "m")[0].sha256[:16] in metrics
    assert "1.6 KB" in line_of(result.stdout, "plots/loss.csv")
    listing = json.loads(invoke("results", "20260302-1000", "--json").stdout)
    assert listing["source"] == "manifest"
    assert [(f["name"], f["size"]) for f in listing["files"]] == [("metrics.json", 17), ("plots/loss.csv", 1600)]
    assert all(len(f["sha256"]) == 64 for f in listing["files"])


def test_results_without_a_manifest_lists_the_objects(invoke, bucket):
    bucket.add(make_record("bench", "r1", "failed", created=NOW - HOUR, exit_code=1))
    bucket.results("bench", "r1", 1, FILES, manifest=False)
    result = invoke("results", "bench/r1")
    assert "no manifest for bench/r1 attempt 1 (failed): the upload did not complete; objects under " \
           "runs/bench/r1/attempt-1/results/" in result.stdout
    assert "metrics.json" in result.stdout and "plots/loss.csv" in result.stdout


def test_download_keeps_relative_paths(invoke, bucket, tmp_path):
    bucket.add(make_record("bench", "r1", created=NOW - HOUR))
    bucket.results("bench", "r1", 1, FILES)
    result = invoke("results", "bench/r1", "--download", "out")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "metrics.json").read_bytes() == FILES["metrics.json"]
    assert (tmp_path / "out" / "plots" / "loss.csv").read_bytes() == FILES["plots/loss.csv"]
    assert "downloaded 2 files (1.6 KB) to out" in result.stdout


@pytest.mark.parametrize("name", ["../escaped.txt", "/etc/escaped.txt", "plots/../../escaped.txt",
                                  "a\\..\\escaped.txt"])
def test_download_refuses_to_write_outside_the_folder(invoke, bucket, tmp_path, name):
    bucket.add(make_record("bench", "r1", created=NOW - HOUR))
    bucket.results("bench", "r1", 1, {"fine.txt": b"ok", name: b"evil"})
    result = invoke("results", "bench/r1", "--download", "out")
    assert result.exit_code == 2
    assert f"error: refusing to download {name!r}" in result.stderr
    assert not (tmp_path / "escaped.txt").exists()
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*"))  # nothing written at all


def test_download_refuses_a_file_whose_digest_differs(invoke, bucket, tmp_path):
    bucket.add(make_record("bench", "r1", created=NOW - HOUR))
    bucket.results("bench", "r1", 1, FILES)
    bucket.blobs.write(layout.results_prefix("bench", "r1", 1) + "metrics.json", b"tampered")
    result = invoke("results", "bench/r1", "--download", "out")
    assert result.exit_code == 2
    assert "error: runs/bench/r1/attempt-1/results/metrics.json: sha256 is " in result.stderr
    assert "the manifest says" in result.stderr and not (tmp_path / "out" / "metrics.json").exists()


# --- spotcron status ---------------------------------------------------------------------------------


def test_status_shows_runs_in_progress_with_vm_age_and_deadline(invoke, bucket):
    fill_three_runs(bucket)
    bucket.add(make_record("bot", "20260302-1150", "starting", created=NOW - timedelta(minutes=10),
                           deadline=NOW - timedelta(minutes=2)))
    result = invoke("status")
    assert result.exit_code == 0, result.output
    live = line_of(result.stdout, "20260302-1100-t4")
    assert vm_name("dl-benchmark", "20260302-1100-t4", 1) in live and "1h00m" in live and "running" in live
    starting = line_of(result.stdout, "20260302-1150")
    assert "starting" in starting and "10m00s" in starting and "passed 2m00s ago" in starting
    assert "20260302-0800" not in result.stdout  # ended runs are not in progress


def test_status_with_a_project_lists_managed_vms(invoke, bucket, context):
    fill_three_runs(bucket)
    compute = MemoryCompute()
    labels = {"spotcron": "1", "job": "dl-benchmark", "run": "20260302-1100-t4", "attempt": "1"}
    compute.add_foreign(Instance("sc-live", "us-central1-a", "RUNNING", labels, "n1-standard-8", "SPOT",
                                 NOW - 50 * timedelta(minutes=1)))
    compute.add_foreign(Instance("sc-leftover", "us-central1-b", "STOPPED", {**labels, "run": "20260301-0000"},
                                 "e2-small", "SPOT", NOW - 30 * HOUR))
    projects: list[str] = []
    context.compute = lambda project: projects.append(project) or compute
    result = invoke("status", "--bucket", "gs://b", "--project", "proj")
    assert projects == ["proj"]
    assert "spotcron VMs in project proj" in result.stdout
    assert "(run not in progress)" not in line_of(result.stdout, "sc-live")
    leftover = line_of(result.stdout, "sc-leftover")
    assert "STOPPED" in leftover and "30h00m" in leftover and "(run not in progress)" in leftover
    result = invoke("status", "--project", "proj")  # local mode: no Compute Engine
    assert projects == ["proj"] and result.exit_code == 2
    assert result.stderr.strip() == ("error: --project goes with --bucket gs://NAME: local mode has no Compute "
                                     "Engine VMs to list; add --bucket or leave --project out")


def test_status_with_nothing_running(invoke, bucket):
    bucket.add(make_record("bot", "r1", created=NOW - HOUR))
    assert "No runs in progress in gs://b." in invoke("status", "--bucket", "gs://b").stdout


# --- spotcron run --------------------------------------------------------------------------------------


class FakeStack:
    """LocalStack's surface that `spotcron run` uses: a context manager with run_now and wait."""

    def __init__(self, bucket, state: str):
        self.bucket, self.state, self.waited, self.entered = bucket, state, [], 0

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        self.entered -= 1

    def run_now(self, spec, overrides=None):
        self.overrides = overrides
        record = make_record(spec.name, "m20260302-120000-ab12", self.state, created=NOW, exit_code=0)
        self.bucket.add(record)
        return [(spec.name, record.run_id)]

    def wait(self, runs, *, timeout, progress=None):
        assert self.entered == 1
        self.waited.append((list(runs), timeout))
        records = [self.bucket.store.read(job, run_id) for job, run_id in runs]
        progress(records)
        return records


@pytest.mark.parametrize(("state", "code"), [("succeeded", 0), ("failed", 1), ("running", 1)])
def test_run_locally_waits_and_reports(invoke, bucket, context, tmp_path, state, code):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE)
    stack = FakeStack(bucket, state)
    context.local_stack = lambda state_dir, limits=None: stack
    result = invoke("run", "bot")
    assert result.exit_code == code, result.output
    assert stack.entered == 0  # stopped again
    assert stack.waited == [([("bot", "m20260302-120000-ab12")], 300.0 + 300.0)]  # timeout + default grace
    assert "started bot/m20260302-120000-ab12" in result.stderr
    assert state in line_of(result.stdout, "m20260302-120000-ab12", "e2-small")
    assert "logs: spotcron logs bot/m20260302-120000-ab12" in result.stdout
    assert ("gave up waiting after 600s" in result.stderr) == (state == "running")


def test_run_of_an_unknown_job(invoke, tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE)
    result = invoke("run", "bto")
    assert result.exit_code == 2
    assert "error: no job named 'bto' in jobs/; did you mean 'bot'?" in result.stderr


def test_run_cloud_needs_a_project(invoke, tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE)
    result = invoke("run", "bot", "--cloud")
    assert result.exit_code == 2
    assert "error: --cloud needs the Google Cloud project: pass --project, set SPOTCRON_PROJECT" in result.stderr


def test_run_cloud_publishes_the_job_and_digest_to_the_start_topic(invoke, tmp_path, pubsub_topic):
    from spotcron.core.loader import load_job_file
    from spotcron.engine.deployed import start_message
    from spotcron.engine.messages import parse_start
    from tests.gcp.emulators import PROJECT

    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE)
    result = invoke("run", "bot", "--cloud", "--project", PROJECT, "--topic", pubsub_topic.topic,
                    env={"PUBSUB_EMULATOR_HOST": pubsub_topic.host})
    assert result.exit_code == 0, result.output
    response = pubsub_topic.subscriber.pull(subscription=pubsub_topic.subscription, max_messages=5, timeout=10)
    assert len(response.received_messages) == 1
    message = response.received_messages[0].message
    pubsub_topic.subscriber.acknowledge(subscription=pubsub_topic.subscription,
                                        ack_ids=[response.received_messages[0].ack_id])
    # The job's name and digest, what its scheduler entry publishes; never the spec itself.
    assert message.data == start_message(load_job_file(tmp_path / "jobs" / "bot.yaml"))
    attributes = dict(message.attributes)
    assert attributes["trigger"] == "manual" and len(attributes["nonce"]) == 16
    assert f"published bot to projects/{PROJECT}/topics/{pubsub_topic.topic}: message {message.message_id}" \
        in result.stdout
    assert f"m<UTC time>-{attributes['nonce'][:4]}" in result.stdout
    # start_job reads it as a manual run of the job.
    event = {"message": {"data": base64.b64encode(message.data).decode(), "attributes": attributes,
                         "publishTime": message.publish_time.isoformat()}}
    request = parse_start(event, None)
    assert request.manual and request.nonce == attributes["nonce"] and request.job == "bot"


def test_run_cloud_to_a_missing_topic_is_a_clear_error(invoke, tmp_path, pubsub_host):
    from tests.gcp.emulators import PROJECT

    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE)
    result = invoke("run", "bot", "--cloud", "--project", PROJECT, "--topic", "no-such-topic",
                    env={"PUBSUB_EMULATOR_HOST": pubsub_host})
    assert result.exit_code == 2
    assert f"publish to projects/{PROJECT}/topics/no-such-topic" in result.stderr


def test_a_gs_bucket_without_credentials_is_a_clear_error(tmp_path, monkeypatch):
    """The real opener on gs://: no traceback, the login hint, exit code 2."""
    from click.testing import CliRunner

    from tests.cli.conftest import make_cli

    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    result = CliRunner().invoke(make_cli(), ["runs", "--bucket", "gs://some-bucket"], obj=RunsContext(now=lambda: NOW))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: open gs://some-bucket: no Google credentials found: run `gcloud auth "
                                    "application-default login`")


# --- the same code on the local storage server ----------------------------------------------------------


def test_runs_reads_the_local_bucket(tmp_path, monkeypatch):
    """The default opener (open_bucket on --state-dir) beside a running local bucket, as beside `spotcron up`."""
    from click.testing import CliRunner

    from spotcron.engine.store import RunStore
    from spotcron.local.blobs import LOCAL_BUCKET
    from spotcron.local.bucket import LocalBucket
    from tests.cli.conftest import make_cli

    monkeypatch.delenv("SPOTCRON_BUCKET", raising=False)
    runner = CliRunner()
    context = RunsContext(now=lambda: NOW)  # the real opener
    state_dir = tmp_path / "state"
    # Kept running while the commands read: the CLI serves the same state dir from a second
    # server, and both see the one copy on disk.
    with LocalBucket(state_dir / "bucket", LOCAL_BUCKET) as served:
        store = RunStore(served.blobs())
        store.create(make_record("hello-bot", "20260302-0800", created=NOW - HOUR, cost=0.0021, exit_code=0))
        store.create(make_record("hello-bot", "20260302-1000", "failed", created=NOW, exit_code=2, reason="boom"))
        store.blobs.write(layout.logs("hello-bot", "20260302-1000", 1), b"traceback\n")
        result = runner.invoke(make_cli(), ["runs", "--state-dir", str(state_dir)], obj=context,
                               env={"COLUMNS": "220"}, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert "$0.0021" in line_of(result.stdout, "20260302-0800", "succeeded")
        assert "boom" in line_of(result.stdout, "20260302-1000", "failed")
        result = runner.invoke(make_cli(), ["logs", "20260302-1000", "--state-dir", str(state_dir)], obj=context)
        assert result.stdout == "traceback\n"
    result = runner.invoke(make_cli(), ["runs", "--state-dir", str(tmp_path / "empty")], obj=context)
    assert result.exit_code == 2 and "error: no local runs yet" in result.stderr


# --- views ---------------------------------------------------------------------------------------------


def test_dollars_are_never_in_scientific_notation():
    assert [views.format_usd(v) for v in (8.2e-05, 0.000219, 0.00099, 3e-7, 1e-12)] == \
        ["$0.000082", "$0.00022", "$0.00099", "$0.0000003", "<$0.0000001"]
    assert views.format_usd(0.0001) == "$0.0001"
    for value in (10 ** -k * m for k in range(1, 12) for m in (1, 2.5, 9.99)):
        assert "e" not in views.format_usd(value), value


def test_cells_for_unknowns_sizes_and_long_text():
    assert views.format_usd(None) == "-" and views.format_usd(0.0) == "$0" and views.format_usd(1.23456) == "$1.23"
    assert [views.format_size(n) for n in (None, 0, 1023, 1024, 5 * 1024**2, 3 * 1024**4)] == \
        ["-", "0 B", "1023 B", "1.0 KB", "5.0 MB", "3072.0 GB"]
    assert views.one_line(None) == "" and views.one_line("first line\n second") == "first line second"
    assert views.deadline_text(NOW + timedelta(seconds=250), NOW) == "in 4m10s"


def test_a_run_before_its_first_attempt_shows_the_spec_machine():
    record = make_record("bot", "r", "scheduled", created=NOW, attempts=())
    record = record.model_copy(update={"spec": {"machine": {"type": "e2-micro", "spot": False}}})
    row = views.run_row(record, NOW)
    assert row.machine == "e2-micro STANDARD" and row.duration == "-" and row.attempts == "0"
    assert row.started == "2026-03-02 12:00" and row.status_style == "cyan"
    with pytest.raises(SpotcronError, match=r"run bot/r has no attempt yet \(it is scheduled\)"):
        views.pick_attempt(record, None)


@pytest.mark.parametrize("name", ["", "..", "a/../b", "./a", "/abs", "a\\b", "a\x00b"])
def test_safe_relative_refuses(name):
    with pytest.raises(SpotcronError, match="refusing to download"):
        views.safe_relative(name)


def test_safe_relative_keeps_nested_paths():
    assert str(views.safe_relative("plots/2026/loss.csv")) == "plots/2026/loss.csv"


def test_run_refs():
    assert views.parse_run_ref("bot/r1", None) == ("bot", "r1")
    assert views.parse_run_ref("r1", "bot") == ("bot", "r1")
    assert views.parse_run_ref("r1", None) == (None, "r1")
    with pytest.raises(SpotcronError, match="names job 'bot' but --job says 'other'"):
        views.parse_run_ref("bot/r1", "other")


def test_newest_ids_sorts_manual_and_scheduled_by_time():
    pairs = [("a", "20260302-1000"), ("b", "m20260302-101530-ab12"), ("a", "20260302-0900"), ("c", "20260301-2300")]
    assert views.newest_ids(pairs, 2) == [("b", "m20260302-101530-ab12"), ("a", "20260302-1000")]
    assert len(views.newest_ids(pairs, 0)) == 4


def test_started_is_utc(monkeypatch):
    created = datetime(2026, 3, 2, 13, 0, tzinfo=UTC).astimezone()
    assert views.format_time(created) == "2026-03-02 13:00"


def test_download_helper_never_writes_through_a_symlink(tmp_path, bucket):
    from spotcron.cli.outputs import _download
    from spotcron.present.views import ResultFile

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "link").symlink_to(elsewhere, target_is_directory=True)
    bucket.blobs.write("p/link/x.txt", b"x")
    with pytest.raises(SpotcronError, match="refusing to download 'link/x.txt'"):
        _download(bucket.blobs, "p/", [ResultFile("link/x.txt")], out)
    assert not any(elsewhere.iterdir())


def test_manifest_entries_outside_results_are_left_out():
    manifest = (b'{"files": [{"name": "logs.txt", "size": 4}, {"name": "results/b.txt", "size": 2, "sha256": "ab"},'
                b' "results/a.txt", {"path": "results/c", "bytes": 3}]}')
    assert views.manifest_files(manifest, "m") == [views.ResultFile("a.txt"), views.ResultFile("b.txt", 2, "ab"),
                                                   views.ResultFile("c", 3)]


def test_manifest_errors_name_the_object():
    with pytest.raises(SpotcronError, match=r"runs/x/manifest.json: not JSON"):
        views.manifest_files(b"{", "runs/x/manifest.json")
    with pytest.raises(SpotcronError, match=r"files\[0\] has no name"):
        views.manifest_files(b'{"files": [{"size": 1}]}', "m")
    with pytest.raises(SpotcronError, match=r'm: no "files" list'):
        views.manifest_files(b'{"exit_code": 0}', "m")


def test_record_json_round_trips(bucket):
    record = make_record("bot", "r1", created=NOW, cost=0.5)
    assert json.loads(views.records_json([record]))[0]["cost_usd"] == 0.5
    assert Path(layout.run_record("bot", "r1")).name == "run.json"


# --- wrong arguments: where, what, how to fix; exit code 2 ------------------------------------------


def test_runs_of_an_unknown_matrix_entry_is_an_error(invoke, bucket):
    fill_three_runs(bucket)
    bucket.add(make_record("dl-benchmark", "20260302-1100-cpu", variant="cpu", created=NOW - HOUR))
    result = invoke("runs", "dl-benchmark/nope")
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: no runs of dl-benchmark/nope in the local bucket (.spotcron/bucket): "
                                     "job dl-benchmark has no matrix entry 'nope' with runs; its entries: cpu, t4")
    result = invoke("runs", "hello-bot/nope")
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: no runs of hello-bot/nope in the local bucket (.spotcron/bucket): "
                                     "job hello-bot has no matrix; write `spotcron runs hello-bot`")
    result = invoke("runs", "dl-benchmark/t")
    assert "did you mean 't4'?" in result.stderr


def test_download_into_a_folder_with_other_files_asks_first(invoke, bucket, tmp_path, context):
    import dataclasses

    asking = dataclasses.replace(context, interactive=lambda: True)
    bucket.add(make_record("bench", "r1", created=NOW - HOUR))
    bucket.results("bench", "r1", 1, FILES)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text("mine")
    result = invoke("results", "bench/r1", "--download", "home")
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: --download home: the folder already holds files this run did not "
                                     "write (notes.txt); download into a new or empty folder, or pass --force "
                                     "to write beside them")
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == ["notes.txt"]
    result = invoke("results", "bench/r1", "--download", "home", input="n\n", obj=asking)
    assert result.exit_code == 2 and "Write 2 files into home, beside notes.txt?" in result.output
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == ["notes.txt"]
    result = invoke("results", "bench/r1", "--download", "home", input="y\n", obj=asking)
    assert result.exit_code == 0 and (tmp_path / "home" / "metrics.json").is_file()
    result = invoke("results", "bench/r1", "--download", "home", "--force")
    assert result.exit_code == 0, result.output
    # A folder holding only an earlier download of this run needs no question.
    result = invoke("results", "bench/r1", "--download", "out")
    assert invoke("results", "bench/r1", "--download", "out").exit_code == 0


# --- logs in constant memory ---------------------------------------------------------------------------


def test_logs_are_read_in_pieces_never_whole(invoke, bucket, monkeypatch):
    from spotcron.present import logs as follow

    monkeypatch.setattr(follow, "LOG_PIECE", 1000)
    job, run = "bot", "20260302-1000"
    bucket.add(make_record(job, run, created=NOW - HOUR))
    text = "".join(f"line {n:05d} é\n" for n in range(2000))  # multi-byte characters cut across pieces
    bucket.logs(job, run, 1, text)
    sizes: list[int] = []
    original = bucket.blobs.read_range

    def read_range(name, start, size):
        sizes.append(size)
        return original(name, start, size)

    bucket.blobs.read_range = read_range
    before = dict(bucket.blobs.calls)
    result = invoke("logs", f"{job}/{run}")
    assert result.exit_code == 0 and result.stdout == text
    assert len(sizes) > 20 and set(sizes) == {1000}
    assert bucket.blobs.calls["read"] - before["read"] <= 2  # the record (twice at most), never the whole log


def test_follow_reads_only_what_is_new(invoke, bucket, sleeps, monkeypatch):
    from spotcron.present import logs as follow

    monkeypatch.setattr(follow, "LOG_PIECE", 64)
    job, run = "bot", "20260302-1100"
    bucket.add(make_record(job, run, "running", created=NOW - timedelta(minutes=1)))
    first = "x" * 300 + "\n"
    bucket.logs(job, run, 1, first)
    starts: list[int] = []
    original = bucket.blobs.read_range

    def read_range(name, start, size):
        starts.append(start)
        return original(name, start, size)

    bucket.blobs.read_range = read_range

    def finish() -> None:
        bucket.logs(job, run, 1, first + "done\n")
        bucket.store.update(job, run, lambda r: r.with_state(RunState.SUCCEEDED, NOW, exit_code=0))

    sleeps.steps = [finish]
    result = invoke("logs", f"{job}/{run}", "-f")
    assert result.stdout == first + "done\n"
    assert min(s for s in starts if s > 0) >= 64 and starts.count(0) == 1  # never from the start again
    assert max(starts) >= 301


@pytest.mark.parametrize(("args", "message"), [
    (["run", "bot", "--project", "p"], "error: --project goes with --cloud: a local run needs no project; "
                                       "add --cloud or leave --project out"),
    (["run", "bot", "--topic", "t"], "error: --topic goes with --cloud: a local run publishes to no topic; "
                                     "add --cloud or leave --topic out"),
    (["run", "bot", "--cloud", "--timeout", "60"], "error: --timeout goes without --cloud: a cloud run is not "
                                                   "waited for (add --follow to wait); watch it with `spotcron runs "
                                                   "JOB --bucket ...`"),
    (["results", "bot/r1", "--force"], "error: --force goes with --download DIR: nothing is written without it; "
                                       "add --download or leave --force out"),
    (["logs", "bot/r1", "--interval", "5"], "error: --interval goes with --follow: without it the logs are read "
                                            "once; add --follow or leave --interval out"),
])
def test_an_option_that_would_be_ignored_is_an_error(invoke, bucket, tmp_path, args, message):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE)
    bucket.add(make_record("bot", "r1", created=NOW - HOUR))
    result = invoke(*args)
    assert result.exit_code == 2 and result.stderr.strip() == message


def test_follow_takes_one_more_look_after_the_run_ended(invoke, bucket, sleeps):
    """A reader one write behind (two local bucket servers on the same files) saw the record
    ended but not the last log upload; the lines after it were lost."""
    job, run = "bot", "20260302-1100"
    bucket.add(make_record(job, run, "running", created=NOW - timedelta(minutes=1)))
    bucket.logs(job, run, 1, "tick 0\n")
    stale = {"on": False}
    original = bucket.blobs.read_range

    def lagging(name, start, size):
        if stale["on"]:
            stale["on"] = False
            return b""  # this poll's reader has not seen the last upload yet
        return original(name, start, size)

    def finish() -> None:
        bucket.logs(job, run, 1, "tick 0\ntick 1\n")
        bucket.store.update(job, run, lambda r: r.with_state(RunState.SUCCEEDED, NOW, exit_code=0))
        stale["on"] = True

    bucket.blobs.read_range = lagging
    sleeps.steps = [finish]
    result = invoke("logs", f"{job}/{run}", "-f")
    assert result.exit_code == 0 and result.stdout == "tick 0\ntick 1\n"


def test_run_locally_takes_the_stack_files_limits(invoke, bucket, context, tmp_path):
    """Before: a local run used the default limits whatever infra/stack.yaml said."""
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE)
    (tmp_path / "stack.yaml").write_text("limits: {max_live_vms: 40, max_gpus: 2}\n")
    given = []

    def local_stack(state_dir, limits=None):
        given.append(limits)
        return FakeStack(bucket, "succeeded")

    context.local_stack = local_stack
    result = invoke("run", "bot", "--stack", str(tmp_path / "stack.yaml"))
    assert result.exit_code == 0, result.output
    assert [(limits.max_live_vms, limits.max_gpus) for limits in given] == [(40, 2)]


class _BuiltBefore:
    """The image builder as `run --cloud` meets it: it may look builds up, never start one."""

    def __init__(self, digest: str | None):
        self.digest, self.looked_up = digest, []

    def find(self, build, image):
        self.looked_up.append(image)
        return self.digest

    def build(self, build, image):
        raise AssertionError("run --cloud never builds an image")


BUILT_JOB_FILE = JOB_FILE.replace("image: spotcron/bot:latest\n", "build: images/bot\n")


def test_run_cloud_of_a_job_that_builds_names_the_spec_deploy_pinned(invoke, context, tmp_path, pubsub_topic):
    from spotcron.core.images import pinned
    from spotcron.core.loader import load_job_file
    from spotcron.engine.deployed import start_message
    from tests.gcp.emulators import PROJECT

    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(BUILT_JOB_FILE)
    (tmp_path / "images" / "bot").mkdir(parents=True)
    (tmp_path / "images" / "bot" / "Dockerfile").write_text("FROM scratch\n")
    digest = "sha256:" + "ab" * 32
    context.builder = lambda settings: builder
    builder = _BuiltBefore(digest)
    result = invoke("run", "bot", "--cloud", "--project", PROJECT, "--topic", pubsub_topic.topic,
                    env={"PUBSUB_EMULATOR_HOST": pubsub_topic.host})
    assert result.exit_code == 0, result.output
    [image] = builder.looked_up
    response = pubsub_topic.subscriber.pull(subscription=pubsub_topic.subscription, max_messages=5, timeout=10)
    [received] = response.received_messages
    pubsub_topic.subscriber.acknowledge(subscription=pubsub_topic.subscription, ack_ids=[received.ack_id])
    # The digest of the spec as deploy deployed it: its image by digest, not the folder.
    deployed = load_job_file(tmp_path / "jobs" / "bot.yaml").model_copy(update={"image": pinned(image, digest)})
    assert received.message.data == start_message(deployed)
    assert received.message.data != start_message(load_job_file(tmp_path / "jobs" / "bot.yaml"))


def test_run_cloud_of_a_job_whose_folder_changed_since_its_build_says_deploy_first(invoke, context, tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(BUILT_JOB_FILE)
    (tmp_path / "images" / "bot").mkdir(parents=True)
    (tmp_path / "images" / "bot" / "Dockerfile").write_text("FROM scratch\n")
    context.builder = lambda settings: _BuiltBefore(None)
    result = invoke("run", "bot", "--cloud", "--project", "acme-prod")
    assert result.exit_code == 2
    assert ("error: job bot: no image is built from images/bot/ as it is now, so what runs on Google Cloud is not "
            "this folder; run `spotcron deploy`") in result.stderr


def test_results_without_a_manifest_lists_a_bounded_number_of_objects(invoke, bucket, monkeypatch):
    """The attempt's token may fill its results folder: without a manifest the command lists a
    bounded number of its objects, and says it stopped."""
    from spotcron.cli import outputs

    monkeypatch.setattr(outputs, "RESULTS_LISTED", 2)
    bucket.add(make_record("bench", "r1", "failed", created=NOW - HOUR, exit_code=1))
    bucket.results("bench", "r1", 1, {f"f{i}.txt": b"x" for i in range(5)}, manifest=False)
    result = invoke("results", "bench/r1", "--json")
    assert result.exit_code == 0, result.output
    assert [f["name"] for f in json.loads(result.stdout)["files"]] == ["f0.txt", "f1.txt"]
    assert "only the first 2 objects under runs/bench/r1/attempt-1/results/ are listed" in result.stderr
