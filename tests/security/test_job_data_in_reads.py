"""Job-written data where the control plane and the CLI read it, and what a publisher may send.

Each test drives the real entry points (functions/main.py through the harness in
spotcron.testing, the CLI through click's CliRunner); its docstring says what it shows.

A job's container that reaches the metadata server (`metadata_access`, or a job with its own
service account, where it is implied) holds its VM's identity token: docs/security.md says it "can
also ... call job_done and the broker as its own attempt: that reaches its own run and nothing
else". The harness's `h.token(...)` is that token, and `h.callback(body=...)` posts what the
container chooses.
"""

from __future__ import annotations

import contextlib
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from spotcron.cli._bucket import RunsContext
from spotcron.core import layout
from spotcron.core.metrics import METRICS_FILE, MetricsProblem, parse_metrics
from spotcron.testing.harness import make_spec

# The stack limits under the same publisher are tests/security/test_limits_hold.py.

RUN = "20261122-1200"
NOW = datetime(2026, 11, 22, 13, 0, tzinfo=UTC)


def spotcron(blobs, *args: str, cwd: Path | None = None):
    """`spotcron ARGS` on the harness's bucket, as a user runs it (exceptions kept, not raised)."""
    from spotcron.cli import cli

    context = RunsContext(open_blobs=lambda bucket, state_dir: contextlib.nullcontext(blobs), now=lambda: NOW,
                          interactive=lambda: False, launch=lambda url: None)
    return CliRunner().invoke(cli, list(args), obj=context, env={"COLUMNS": "220"}, catch_exceptions=True)


def crashed(result) -> str | None:
    """The exception a command died of (a traceback for the user), None when it ended normally."""
    if result.exception is None or isinstance(result.exception, SystemExit):
        return None
    return f"{type(result.exception).__name__}: {result.exception}"


def a_quiet_neighbour(h) -> None:
    """Another job of the stack whose run ended normally: what the user wants to see."""
    h.start(make_spec(name="neighbour"))
    h.finish_ok("neighbour", RUN)


def hostile_callback(h, job: str, run_id: str, **fields):
    """The container posts job_done itself with its VM's identity token and the fields it chooses."""
    body = {"job": job, "run_id": run_id, "attempt": 1, "status": "exited", "exit_code": 0, "uploaded": True,
            "timed_out": False, **fields}
    return h.callback(job, run_id, body=body)


# --- (1) what a job writes: the callback body's times ------------------------------------------------


def test_a_naive_started_at_in_the_callback_breaks_spotcron_runs_for_every_job(h):
    """job_done takes `started_at`/`finished_at` as any datetime pydantic accepts, naive ones too,
    and stores them. One attempt with a naive start and an aware end makes `duration_seconds`
    subtract offset-naive from offset-aware: `spotcron runs` (every job's table) dies with a
    TypeError, so one job's container hides every other job's runs."""
    a_quiet_neighbour(h)
    h.start(make_spec())
    h.upload("bot", RUN)
    answer = hostile_callback(h, "bot", RUN, started_at="2026-11-22T12:00:10", finished_at="2026-11-22T12:01:00Z")
    # Refused, not stored: a naive time is no time of the attempt's.
    assert answer.status_code == 400, answer.get_data(as_text=True)
    assert h.record("bot", RUN).state == "running" and h.live_vms(), "a refused callback changes nothing"
    result = spotcron(h.blobs, "runs")
    assert crashed(result) is None, f"`spotcron runs` crashed: {crashed(result)}"
    assert "neighbour" in result.output


def test_a_naive_started_at_in_the_callback_breaks_spotcron_page_for_every_job(h, tmp_path):
    """The same stored record makes `spotcron page` (the page of every job) die with a TypeError in
    `_run_row` → `RunRecord.duration_seconds`: no page is written for anyone."""
    a_quiet_neighbour(h)
    h.start(make_spec())
    h.upload("bot", RUN)
    hostile_callback(h, "bot", RUN, started_at="2026-11-22T12:00:10", finished_at="2026-11-22T12:01:00Z")
    result = spotcron(h.blobs, "page", "--out", str(tmp_path / "page"))
    assert crashed(result) is None, f"`spotcron page` crashed: {crashed(result)}"
    assert (tmp_path / "page" / "index.html").is_file()


def test_a_start_time_at_the_edge_of_the_calendar_breaks_spotcron_runs(h):
    """`started_at: 0001-01-01T00:00:00+01:00` is a valid aware datetime, stored as is; its UTC
    reading is before year 1, so `format_time` (`astimezone(UTC)`) raises OverflowError and
    `spotcron runs` dies for every job."""
    a_quiet_neighbour(h)
    h.start(make_spec())
    h.upload("bot", RUN)
    answer = hostile_callback(h, "bot", RUN, started_at="0001-01-01T00:00:00+01:00",
                              finished_at="2026-11-22T12:01:00Z")
    # Refused, not stored: no time before the attempt's VM existed is its start.
    assert answer.status_code == 400, answer.get_data(as_text=True)
    result = spotcron(h.blobs, "runs")
    assert crashed(result) is None, f"`spotcron runs` crashed: {crashed(result)}"
    assert "neighbour" in result.output


# --- (1) what a job writes: manifest and metrics.json, read by the CLI --------------------------------


def test_a_manifest_size_of_1e999_crashes_spotcron_results(h):
    """The bounded parser lets `1e999` through as a float (inf) on purpose ("the callers' own checks
    name the field"), but `manifest_files` does `int(size)` for any float: OverflowError, a
    traceback instead of the listing (NaN gives ValueError the same way)."""
    h.start(make_spec())
    h.upload("bot", RUN)
    h.blobs.write(layout.manifest("bot", RUN, 1),
                  b'{"exit_code": 0, "files": [{"name": "results/out.json", "size": 1e999, "sha256": "00"}]}')
    assert h.callback("bot", RUN).status_code == 200
    result = spotcron(h.blobs, "results", f"bot/{RUN}")
    assert crashed(result) is None, f"`spotcron results` crashed: {crashed(result)}"


def metrics_run(h, metrics: dict, job: str = "bot", *, accepted: bool = True) -> None:
    h.start(make_spec(name=job))
    h.upload(job, RUN)
    h.blobs.write(layout.results_prefix(job, RUN, 1) + METRICS_FILE, json.dumps(metrics).encode())
    # What the runner reports: its container ran for a minute.
    answer = hostile_callback(h, job, RUN, started_at="2026-11-22T12:00:10Z", finished_at="2026-11-22T12:01:10Z")
    assert answer.status_code == 200
    if accepted:
        assert h.record(job, RUN).metrics is not None  # accepted by the contract


def test_a_work_unit_with_square_brackets_crashes_spotcron_report(h, tmp_path, monkeypatch):
    """metrics.json's `work.unit` is any string of at most 32 characters. `spotcron report` puts it
    into rich Table titles and headers, which rich reads as markup: a unit of `[/]` raises
    MarkupError and the report dies (the cells of `print_table` are Text for this very reason;
    the report's tables are not)."""
    monkeypatch.chdir(tmp_path)
    metrics_run(h, {"work": {"value": 100, "unit": "[/]"}})
    result = spotcron(h.blobs, "report", "bot", "--jobs", str(tmp_path))
    assert crashed(result) is None, f"`spotcron report` crashed: {crashed(result)}"


def test_a_tiny_positive_work_value_crashes_spotcron_report(h, tmp_path, monkeypatch):
    """`work.value` must be finite and > 0: 5e-324 is both. The report's time per unit is then
    60 s / 5e-324 = inf, and `format_seconds(inf)` → `format_duration` → `int(round(inf))` raises
    OverflowError: the report dies."""
    monkeypatch.chdir(tmp_path)
    metrics_run(h, {"work": {"value": 5e-324, "unit": "samples"}})
    result = spotcron(h.blobs, "report", "bot", "--jobs", str(tmp_path))
    assert crashed(result) is None, f"`spotcron report` crashed: {crashed(result)}"


def test_a_time_metric_that_overflows_to_inf_breaks_spotcron_page_for_every_job(h, tmp_path):
    """A matrix job timed by `benchmark.time_metric`: one run writes `{"value": 1e305, "unit": "h"}`,
    finite and accepted. In seconds that is inf; the results page draws every matrix job's charts
    while building the one page of every job, and nothing but ImportError is caught there."""
    a_quiet_neighbour(h)
    spec = make_spec(name="bench", matrix=[{"name": "a"}, {"name": "b"}], benchmark={"time_metric": "train_seconds"})
    h.start(spec)
    for variant, value, unit in (("a", 41.0, "s"), ("b", 1e305, "h")):
        run_id = f"{RUN}-{variant}"
        h.upload("bench", run_id)
        metrics = {"metrics": {"train_seconds": {"value": value, "unit": unit}}}
        h.blobs.write(layout.results_prefix("bench", run_id, 1) + METRICS_FILE, json.dumps(metrics).encode())
        assert h.callback("bench", run_id).status_code == 200
        assert h.record("bench", run_id).metrics is not None
    result = spotcron(h.blobs, "page", "--out", str(tmp_path / "page"))
    assert crashed(result) is None, f"`spotcron page` crashed: {crashed(result)}"


# --- (3) stack limits ---------------------------------------------------------------------------------


# --- (2) publishers on the start topic ---------------------------------------------------------------


def test_manual_runs_that_got_a_vm_erase_the_scheduled_history(h):
    """A publisher on the start topic sends `trigger=manual` messages for a deployed job at quiet
    times (no live run, so even `concurrency: forbid` gives each a VM). Each such run did work, so
    it counts with the scheduled runs towards history_limit, and each one's end prunes the oldest
    genuine scheduled tick: record, logs, results and checkpoint. history_limit messages erase the
    job's whole scheduled history; the victim also pays for the VMs. Pruning tells runs with and
    without a VM apart, but not runs the schedule asked for from runs anyone could ask for."""
    spec = make_spec(history_limit=3, concurrency="forbid")
    scheduled = []
    for _ in range(3):
        h.start(spec)
        [run] = [r for r in h.records("bot") if r.state == "running"]
        h.finish_ok("bot", run.run_id)
        scheduled.append(run.run_id)
        h.clock.advance(4 * 3600)
    h.clock.set(h.clock.now().replace(minute=30))  # between two ticks: nothing live
    for nonce in ("aa01", "aa02", "aa03"):
        h.run_now(spec, nonce=nonce)
        [manual] = [r for r in h.records("bot") if r.state == "running"]
        h.finish_ok("bot", manual.run_id)
        h.clock.advance(60)
    gone = [run_id for run_id in scheduled if h.blobs.peek(layout.results_prefix("bot", run_id, 1) + "out.json") is None]
    assert gone == [], (f"3 manual-run messages pruned the results of the scheduled runs {gone}; "
                        f"left: {sorted(r.run_id for r in h.records('bot'))}")


# --- (1) what a job writes: bytes on the wire vs bytes in memory ------------------------------------


def test_a_gzip_encoded_metrics_file_is_read_far_past_the_cap(monkeypatch):
    """`read_capped` asks for cap + 1 bytes ("memory stays that size whatever the object holds"),
    but google-cloud-storage sends `Accept-Encoding: gzip` and inflates what it gets. A container
    that uploads its metrics.json with `contentEncoding: gzip` (its attempt token may set any
    metadata) gets the Range applied to the *compressed* bytes, and the functions hold the inflated
    ones: here 48 MiB for a 1 MiB cap; 1 MiB of deflate inflates to about 1 GiB in production,
    past the functions' memory (256-512 MB), so job_done and every sweep pass that reaches the run are killed.
    Driven on the local storage server (which models Cloud Storage's transcoding, see
    tests/contracts) with GcsBlobs, the adapter the functions use on Google Cloud and in local mode.

    What is measured is every body google-cloud-storage hands back to spotcron (the adapter may
    refuse an encoded object after the download, so its own return cannot be the measure), and
    the read must end in a problem that says why the file was ignored."""
    import gzip

    from google.cloud.storage.blob import Blob

    from spotcron.core.jobdata import JobDataProblem
    from spotcron.core.metrics import MAX_BYTES
    from spotcron.engine.broker import boundary_rules
    from spotcron.engine.results import read_capped
    from spotcron.local.bucket import LocalBucket
    from tests.contracts.storage_servers import StorageApi
    from tests.contracts.test_storage_cloud_behaviour_contract import _multipart

    name = layout.results_prefix("bot", RUN, 1) + METRICS_FILE
    bomb = gzip.compress(b'{"work": {"value": 1, "unit": "s"}, "pad": "' + b" " * (48 << 20) + b'"}', 6)
    assert len(bomb) < MAX_BYTES  # what is stored, and what a ranged read of cap + 1 fetches
    with LocalBucket(None, "spotcron-review") as bucket:
        job_token = bucket.downscoped_token(boundary_rules(bucket.bucket, "bot", RUN, 1))
        job = StorageApi("local-server", bucket.url, bucket.bucket, job_token)
        assert _multipart(job, {"name": name, "contentEncoding": "gzip"}, bomb).status == 200
        blobs = bucket.blobs()
        held = []
        download = Blob.download_as_bytes

        def measured(self, *args, **kwargs):
            data = download(self, *args, **kwargs)
            held.append(len(data))
            return data

        monkeypatch.setattr(Blob, "download_as_bytes", measured)
        problem = None
        try:
            read_capped(blobs, name, MAX_BYTES, "results/metrics.json")
        except JobDataProblem as exc:
            problem = str(exc)
    assert held, "nothing was downloaded"
    assert max(held) <= MAX_BYTES + 1, (f"a ranged read of {MAX_BYTES + 1} bytes put {max(held) >> 20} MiB in memory "
                                        f"(the job stored {len(bomb) >> 10} KiB, gzip-encoded)")
    assert problem is not None and "compressed" in problem, problem


@contextlib.contextmanager
def harness_on_the_local_storage_server():
    """The harness with its bucket on the local storage server, read and written through GcsBlobs
    (google-cloud-storage): the storage path of the functions on Google Cloud and in local mode.
    Yields (harness, bucket); `job_api(bucket, job, run)` speaks for a job with its attempt's token."""
    import dataclasses

    from spotcron.local.bucket import LocalBucket
    from spotcron.runtime import entrypoints
    from spotcron.testing.harness import Harness

    with LocalBucket(None, "proj-results") as bucket:
        h = Harness()
        blobs = bucket.blobs()
        blobs.peek = blobs.read  # the harness's look that counts no call; GcsBlobs counts none anyway
        h.blobs = blobs
        h.deps = dataclasses.replace(h.deps, blobs=blobs)
        entrypoints.use(h.deps)
        try:
            yield h, bucket
        finally:
            entrypoints.use(None)


def job_api(bucket, job: str, run_id: str, attempt: int = 1):
    """The local storage server as the job's container reaches it: with its attempt's own token."""
    from spotcron.engine.broker import boundary_rules
    from tests.contracts.storage_servers import StorageApi

    token = bucket.downscoped_token(boundary_rules(bucket.bucket, job, run_id, attempt))
    return StorageApi("local-server", bucket.url, bucket.bucket, token)


def test_a_manifest_stored_as_broken_gzip_leaves_its_run_running_forever_and_skips_every_later_tick():
    """A container with its attempt's token rewrites its manifest.json with `contentEncoding: gzip`
    over bytes that are not gzip. google-cloud-storage asks for gzip and fails to inflate:
    requests' ContentDecodingError, which neither engine/results.py (JobDataProblem only) nor
    gcp/error_map.translate knows. The VM is gone, so every sweep pass tries `manifest_document`, gets
    the same exception (caught by the per-run guard, logged, nothing recorded) and the run stays
    `running` for ever: under `concurrency: forbid` every later tick of the job is skipped. The
    promise "whatever is wrong becomes a message on the run" does not hold for this encoding."""
    from tests.contracts.test_storage_cloud_behaviour_contract import _multipart

    with harness_on_the_local_storage_server() as (h, bucket):
        spec = make_spec(concurrency="forbid")
        h.start(spec)
        h.upload("bot", RUN)
        reply = _multipart(job_api(bucket, "bot", RUN), {"name": layout.manifest("bot", RUN, 1),
                                                        "contentEncoding": "gzip"}, b"not gzip at all")
        assert reply.status == 200, reply.body
        attempt = h.record("bot", RUN).current_attempt
        h.compute.preempt(attempt.zone, attempt.vm_name)  # the VM is gone without a callback
        for _ in range(3):
            h.clock.advance(5 * 60)
            assert h.sweep().status_code == 200
        stuck = h.record("bot", RUN)
        h.clock.set(datetime(2026, 11, 22, 16, 0, 5, tzinfo=UTC))
        h.start(spec)  # the next tick
        nxt = h.record("bot", "20261122-1600")
        assert stuck.state != "running" and nxt.state != "skipped", (
            f"three sweeps later the run is still {stuck.state}; the 16:00 tick was {nxt.state}: {nxt.reason}")


def test_a_metrics_file_stored_as_broken_gzip_makes_job_done_answer_500_after_deleting_the_vm():
    """The same trick on results/metrics.json, reported through job_done: the VM is deleted first,
    then `metrics_changes` raises ContentDecodingError and job_done answers 500 with nothing
    recorded (the run is `running` with no VM); the runner's retries meet the same error."""
    from tests.contracts.test_storage_cloud_behaviour_contract import _multipart

    with harness_on_the_local_storage_server() as (h, bucket):
        h.start(make_spec())
        h.upload("bot", RUN)
        name = layout.results_prefix("bot", RUN, 1) + METRICS_FILE
        reply = _multipart(job_api(bucket, "bot", RUN), {"name": name, "contentEncoding": "gzip"}, b"{not gzip}")
        assert reply.status == 200, reply.body
        answer = h.callback("bot", RUN)
        record = h.record("bot", RUN)
        assert answer.status_code < 500 and record.state == "succeeded", (
            f"job_done answered {answer.status_code}; the run is {record.state} and its VM was deleted "
            f"(live VMs: {h.live_vms()})")


def test_a_log_stored_as_broken_gzip_breaks_the_local_results_page_for_every_job(tmp_path):
    """`spotcron page` in local mode copies every shown run's logs.txt next to index.html, through
    GcsBlobs. A run whose container stored its logs.txt with `contentEncoding: gzip` over bytes
    that are not gzip makes that copy raise ContentDecodingError: no page for any job."""
    from tests.contracts.test_storage_cloud_behaviour_contract import _multipart

    with harness_on_the_local_storage_server() as (h, bucket):
        a_quiet_neighbour(h)
        h.start(make_spec())
        h.upload("bot", RUN)
        reply = _multipart(job_api(bucket, "bot", RUN), {"name": layout.logs("bot", RUN, 1), "contentEncoding": "gzip"},
                           b"not gzip at all")
        assert reply.status == 200, reply.body
        assert h.callback("bot", RUN).status_code == 200
        result = spotcron(h.blobs, "page", "--out", str(tmp_path / "page"))
    assert crashed(result) is None, f"`spotcron page` crashed: {crashed(result)}"
    # An error message instead of a traceback is no better: the page of every job must be written.
    assert result.exit_code == 0 and (tmp_path / "page" / "index.html").is_file(), result.output


def test_a_deeply_nested_callback_body_makes_job_done_answer_500_before_any_token_check(h):
    """functions/main.py parses job_done's body with `request.get_json(silent=True)` before the
    identity token is looked at; `silent` covers ValueError only, so 100,000 `[` raise
    RecursionError and job_done answers 500 with a traceback in the functions' log, for any caller
    that can reach the URL (a job VM holds run.invoker on it), with no token at all. Everything a
    job sends must go through the bounded parser; this body does not."""
    h.start(make_spec())
    answer = h.functions.post("job_done", data=b"[" * 100_000, content_type="application/json")
    assert answer.status_code < 500, f"job_done answered {answer.status_code} to a body with no token"


def test_a_manifest_naming_a_file_and_a_folder_alike_crashes_spotcron_results_download(h, tmp_path):
    """The manifest a job may rewrite lists `results/a` and `results/a/b`: both pass
    `safe_relative`, `--download` writes the file `a`, then `mkdir a/` raises FileExistsError (or
    NotADirectoryError) and the user gets a traceback instead of an error naming the manifest."""
    h.start(make_spec())
    h.upload("bot", RUN)
    prefix = layout.results_prefix("bot", RUN, 1)
    h.blobs.write(prefix + "a", b"1")
    h.blobs.write(prefix + "a/b", b"2")
    h.blobs.write(layout.manifest("bot", RUN, 1), json.dumps(
        {"exit_code": 0, "files": [{"name": "results/a"}, {"name": "results/a/b"}]}).encode())
    assert h.callback("bot", RUN).status_code == 200
    result = spotcron(h.blobs, "results", f"bot/{RUN}", "--download", str(tmp_path / "out"))
    assert crashed(result) is None, f"`spotcron results --download` crashed: {crashed(result)}"


def test_spotcron_results_download_holds_each_result_file_whole_in_memory(h, tmp_path):
    """`spotcron logs` and the local page read a job's objects in 8 MiB pieces; `results --download`
    reads each result file whole (`blobs.read`) and hashes and writes it from memory. A job that
    writes one 20 GB file (or a manifest that names one) makes the download need 20 GB of RAM.
    Shown with a 24 MiB file: the most bytes one read returned."""
    h.start(make_spec())
    h.upload("bot", RUN)
    prefix = layout.results_prefix("bot", RUN, 1)
    big = b"x" * (24 << 20)
    h.blobs.write(prefix + "big.bin", big)
    h.blobs.write(layout.manifest("bot", RUN, 1), json.dumps({"exit_code": 0, "files": [
        {"name": "results/big.bin", "size": len(big)}]}).encode())
    assert h.callback("bot", RUN).status_code == 200
    held = []
    read, read_range = h.blobs.read, h.blobs.read_range

    def whole(name):
        blob = read(name)
        held.append(len(blob.data) if blob else 0)
        return blob

    def piece(name, start, size):
        data = read_range(name, start, size)
        held.append(len(data or b""))
        return data

    h.blobs.read, h.blobs.read_range = whole, piece
    result = spotcron(h.blobs, "results", f"bot/{RUN}", "--download", str(tmp_path / "out"))
    assert crashed(result) is None, crashed(result)
    assert max(held) <= 8 << 20, f"one read held {max(held) >> 20} MiB of a job's file"


def test_a_huge_metric_name_is_copied_whole_into_the_run_record(h):
    """`parse_metrics` names a bad metric with `{name!r}`, unbounded (values are cut to 40
    characters by `_shown`, names are not). A metrics.json whose one metric name is 900,000
    characters long puts a 900 kB `metrics_problem` into the run record: every later read of the
    record (runs, page, report, the sweep) carries it, and the "user-readable problem" is not."""
    h.start(make_spec())
    h.upload("bot", RUN)
    name = "x" * 900_000
    h.blobs.write(layout.results_prefix("bot", RUN, 1) + METRICS_FILE,
                  json.dumps({"metrics": {name: {"value": 1, "unit": "s"}}}).encode())
    assert h.callback("bot", RUN).status_code == 200
    record = h.record("bot", RUN)
    size = len(h.blobs.peek(layout.run_record("bot", RUN)).data)
    assert len(record.metrics_problem or "") <= 1000, (
        f"metrics_problem is {len(record.metrics_problem)} characters; the record is {size >> 10} KiB")


def test_line_breaks_in_a_metric_name_or_unit_rewrite_the_markdown_report(h, tmp_path, monkeypatch):
    """Metric names must match `^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`, but `$` also matches before a
    final newline, so `"acc\\n"` passes; units are any 32 characters, line breaks included (only
    the ends are stripped). `spotcron report --format md`, meant for pasting into a PR or an issue,
    then carries lines the job wrote: here a heading and a fake table row of its own."""
    monkeypatch.chdir(tmp_path)
    # The contract refuses both: the run keeps the problem.
    metrics_run(h, {"work": {"value": 100, "unit": "x\n\n# all green |"},
                    "metrics": {"acc\n": {"value": 0.9, "unit": "1"}}}, accepted=False)
    result = spotcron(h.blobs, "report", "bot", "--jobs", str(tmp_path), "--format", "md")
    assert crashed(result) is None, crashed(result)
    injected = [line for line in result.output.splitlines() if line.startswith("# ")]
    record = h.record("bot", RUN)
    assert not injected and (record.metrics is None or "acc\n" not in record.metrics.metrics), (
        f"lines the job wrote in the Markdown report: {injected}")
    assert record.metrics_problem and "work.unit" in record.metrics_problem, record.metrics_problem
    for name in ("acc\n", "acc\r", "acc\u2028"):  # the name alone is refused too
        with pytest.raises(MetricsProblem, match="metrics name"):
            parse_metrics(json.dumps({"metrics": {name: {"value": 1, "unit": "1"}}}).encode())


def test_times_stored_before_job_done_refused_them_break_no_command(h, tmp_path):
    """Records written before job_done refused naive and out-of-calendar times may hold them: the
    record reads a naive time as UTC and one that is no UTC time as unknown, so `spotcron runs` and
    `spotcron page` show every job."""
    a_quiet_neighbour(h)
    for variant, started in (("a", "2026-11-22T12:00:10"), ("b", "0001-01-01T00:00:00+01:00")):
        job = f"bot{variant}"
        h.start(make_spec(name=job))
        h.finish_ok(job, RUN)
        name = layout.run_record(job, RUN)
        stored = json.loads(h.blobs.peek(name).data)
        stored["attempts"][0]["started_at"] = started
        h.blobs.write(name, json.dumps(stored).encode())
    runs = spotcron(h.blobs, "runs")
    assert crashed(runs) is None and runs.exit_code == 0, crashed(runs) or runs.output
    assert "neighbour" in runs.output and "bota" in runs.output
    page = spotcron(h.blobs, "page", "--out", str(tmp_path / "page"))
    assert crashed(page) is None and (tmp_path / "page" / "index.html").is_file(), crashed(page) or page.output


def test_formatting_never_raises_on_what_a_record_may_hold():
    """The last line of defence under runs, page and report: times and durations of any value."""
    from datetime import timedelta, timezone

    from spotcron.core.durations import format_duration
    from spotcron.present.exports import format_seconds
    from spotcron.present.views import format_time

    assert format_time(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1)))) == "0001-01-01T00:00:00+01:00"
    assert format_time(datetime(2026, 11, 22, 12, 0)) == "2026-11-22 12:00"  # naive: taken as UTC
    for value in (float("inf"), float("-inf"), float("nan")):
        assert format_duration(value) == "?" and format_seconds(value)
    assert format_duration(1e300)  # finite, however large
