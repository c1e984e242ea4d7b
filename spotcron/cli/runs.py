"""Commands about runs and their results: runs, logs, results, status, run.

They read the results bucket, either a deployed one (`--bucket gs://NAME`) or the local one that
`spotcron up` keeps under `--state-dir`, through the same Blobs port and RunStore, so the output is
the same in both worlds. The outside world (bucket opener, clock, sleep, Compute Engine, the local
stack) comes from a `RunsContext` in click's `ctx.obj`; tests pass their own.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from spotcron.cli._common import console, find_job_file, jobs_option, load_stack, stack_option

if TYPE_CHECKING:
    from spotcron.ports import Blobs, Compute
    from spotcron.runs import RunRecord
    from spotcron.store import RunStore
    from spotcron.views import ResultFile

BUCKET_ENV = "SPOTCRON_BUCKET"
STATE_DIR_ENV = "SPOTCRON_STATE_DIR"
PROJECT_ENV = "SPOTCRON_PROJECT"
DEFAULT_STATE_DIR = ".spotcron"
DEFAULT_LIMIT = 20


def _open_bucket(bucket: str | None, state_dir: Path) -> AbstractContextManager[Blobs]:
    from spotcron.local.blobs import open_bucket

    return open_bucket(bucket, state_dir)


def _google_compute(project: str) -> Compute:
    from spotcron.gcp.compute import GoogleCompute

    return GoogleCompute(project)


def _publisher(emulator_host: str | None) -> Any:
    if emulator_host:
        from spotcron.gcp.pubsub import emulator_publisher

        return emulator_publisher(emulator_host)
    from google.cloud import pubsub_v1

    return pubsub_v1.PublisherClient()


def _local_stack(state_dir: Path, jobs_dir: Path) -> Any:
    from spotcron.local.stack import LocalStack

    return LocalStack(state_dir=state_dir, jobs_dir=jobs_dir)


@dataclass
class RunsContext:
    """Everything these commands touch outside the process; swap any part in tests."""

    open_blobs: Callable[[str | None, Path], AbstractContextManager[Blobs]] = _open_bucket
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    sleep: Callable[[float], None] = time.sleep
    compute: Callable[[str], Compute] = _google_compute
    publisher: Callable[[str | None], Any] = _publisher  # emulator host or None → PublisherClient
    local_stack: Callable[[Path, Path], Any] = _local_stack  # (state_dir, jobs_dir) → LocalStack


def _context() -> RunsContext:
    return click.get_current_context().ensure_object(RunsContext)


def bucket_options(function: Any) -> Any:
    """`--bucket gs://NAME` (env SPOTCRON_BUCKET) and `--state-dir DIR` (env SPOTCRON_STATE_DIR)."""
    function = click.option(
        "--state-dir", type=click.Path(path_type=Path, file_okay=False), default=DEFAULT_STATE_DIR,
        envvar=STATE_DIR_ENV, show_default=True, show_envvar=True,
        help="Where local mode keeps its bucket (used when --bucket is not given).")(function)
    return click.option(
        "--bucket", metavar="gs://NAME", envvar=BUCKET_ENV, show_envvar=True,
        help="Results bucket of a deployed stack (default credentials). Without it: the local bucket.")(function)


def describe(bucket: str | None, state_dir: Path) -> str:
    if bucket:
        return bucket if bucket.startswith("gs://") else f"gs://{bucket}"
    return f"the local bucket ({Path(state_dir) / 'bucket'})"


@contextlib.contextmanager
def _store(bucket: str | None, state_dir: Path) -> Iterator[RunStore]:
    from spotcron.store import RunStore

    with _context().open_blobs(bucket, state_dir) as blobs:
        yield RunStore(blobs)


def _all_run_ids(store: RunStore) -> list[tuple[str, str]]:
    """(job, run_id) of every record, from one listing of runs/."""
    from spotcron import layout

    return [parsed for parsed in map(layout.parse_record_name, store.blobs.list(layout.RUNS)) if parsed]


def _unknown_job(job: str, store: RunStore, where: str) -> Exception:
    from spotcron.catalog import suggest
    from spotcron.errors import SpotcronError

    jobs = sorted(store.jobs())
    hint = suggest(job, jobs)
    known = (f"did you mean {hint!r}?" if hint else
             f"jobs with runs: {', '.join(jobs)}" if jobs else "it has no runs yet")
    return SpotcronError(f"no runs of job {job!r} in {where}; {known}")


def _resolve(store: RunStore, ref: str, job: str | None, where: str) -> RunRecord:
    """The record that `ref` (JOB/RUN or a bare run id, with an optional --job) names."""
    from spotcron.errors import SpotcronError
    from spotcron.views import parse_run_ref, pick_match

    ref_job, run_id = parse_run_ref(ref, job)
    if ref_job is None:
        matches = [j for j, r in _all_run_ids(store) if r == run_id]
        ref_job = pick_match(run_id, matches, where)
    record = store.read(ref_job, run_id)
    if record is None:
        if ref_job not in store.jobs():
            raise _unknown_job(ref_job, store, where)
        raise SpotcronError(f"no run {ref_job}/{run_id} in {where}; `spotcron runs {ref_job}` lists its runs")
    return record


# --- spotcron runs -----------------------------------------------------------------------------


@click.command("runs")
@click.argument("job", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the run records as a JSON list, for scripts.")
@click.option("-n", "--limit", default=DEFAULT_LIMIT, show_default=True, type=click.IntRange(min=0),
              help="Show the newest N runs; 0 shows all.")
@bucket_options
def runs(job: str | None, as_json: bool, limit: int, bucket: str | None, state_dir: Path) -> None:
    """List runs, newest first: status, attempts, time, machine, cost, exit code.

    JOB limits the list to one job, or one matrix entry as JOB/VARIANT. Times are UTC; a
    duration ending in + is still growing; cost is '-' until the run has ended.

    \b
    Examples:
      spotcron runs
      spotcron runs hello-bot --limit 5
      spotcron runs --bucket gs://my-project-spotcron --json | jq '.[0].state'
    """
    from spotcron.views import newest_first, newest_ids, records_json

    context = _context()
    where = describe(bucket, state_dir)
    job_name, _, variant = (job or "").strip("/").partition("/")
    with _store(bucket, state_dir) as store:
        if job_name:
            pairs = [(job_name, run_id) for run_id in store.run_ids(job_name)]
            if not pairs:
                raise _unknown_job(job_name, store, where)
        else:
            pairs = _all_run_ids(store)
        if variant:
            pairs = [(j, r) for j, r in pairs if r.endswith(f"-{variant}")]
        # Read only the newest `limit` candidates (a read per record), then filter exactly.
        chosen = newest_ids(pairs, limit * 2 if (limit and variant) else limit)
        records = [r for r in (store.read(j, run_id) for j, run_id in chosen) if r is not None]
    if variant:
        records = [r for r in records if r.variant == variant]
    records = newest_first(records)[: limit or None]
    if as_json:
        click.echo(records_json(records))
        return
    out = console()
    if not records:
        what = f"job {job}" if job else where
        out.print(f"No runs yet in {what}. Start one with `spotcron run JOB`, or `spotcron up` for the schedule.")
        return
    _print_runs_table(out, records, context.now())
    total = len(pairs)
    if limit and total > len(records) and not variant:
        out.print(f"[dim]showing the newest {len(records)} of {total} runs; --limit 0 shows all[/dim]")


def _print_runs_table(out: Any, records: list[RunRecord], now: datetime) -> None:
    from rich.table import Table

    from spotcron.views import RUN_COLUMNS, run_row

    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in RUN_COLUMNS:
        table.add_column(column, no_wrap=column not in ("reason", "zone / machine"),
                         justify="right" if column in ("attempts", "cost", "exit") else "left")
    for record in records:
        row = run_row(record, now)
        cells = list(row.cells())
        if row.status_style:
            cells[2] = f"[{row.status_style}]{row.status}[/{row.status_style}]"
        table.add_row(*cells)
    out.print(table)


# --- spotcron logs -----------------------------------------------------------------------------


@click.command("logs")
@click.argument("run")
@click.option("--job", help="The job of a bare run id, when several jobs have one of that name.")
@click.option("--attempt", type=click.IntRange(min=1), help="Show this attempt (default: the latest).")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new output until the run has ended.")
@click.option("--interval", default=2.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between polls with --follow.")
@bucket_options
def logs(run: str, job: str | None, attempt: int | None, follow: bool, interval: float, bucket: str | None,
         state_dir: Path) -> None:
    """Print a run's container output (logs.txt of its latest attempt).

    RUN is JOB/RUN or a bare run id, as `spotcron runs` lists them. With --follow, new output is
    printed as it reaches the bucket (the runner uploads it), attempt after attempt, until the
    run ends.

    \b
    Examples:
      spotcron logs hello-bot/20261122-1000
      spotcron logs 20261122-1000 --attempt 1
      spotcron logs hello-bot/20261122-1000 --follow
    """
    from spotcron import layout
    from spotcron.errors import SpotcronError
    from spotcron.views import pick_attempt

    where = describe(bucket, state_dir)
    if follow:
        _follow(run, job, attempt, interval, bucket, state_dir)
        return
    with _store(bucket, state_dir) as store:
        record = _resolve(store, run, job, where)
        number = pick_attempt(record, attempt)
        blob = store.blobs.read(layout.logs(record.job, record.run_id, number))
    if blob is None:
        name = layout.logs(record.job, record.run_id, number)
        if record.terminal:
            ended = record.state + (f": {record.reason}" if record.reason else "")
            raise SpotcronError(f"no logs for {record.job}/{record.run_id} attempt {number} ({name} does not "
                                f"exist); the run ended {ended}")
        raise SpotcronError(f"no logs yet for {record.job}/{record.run_id} attempt {number}: the run is "
                            f"{record.state} and the runner uploads them as it goes; add --follow to wait")
    click.echo(blob.data.decode("utf-8", errors="replace"), nl=False)


def _follow(ref: str, job: str | None, attempt: int | None, interval: float, bucket: str | None,
            state_dir: Path) -> None:
    import codecs

    from spotcron import layout
    from spotcron.errors import SpotcronError
    from spotcron.views import pick_attempt

    context = _context()
    where = describe(bucket, state_dir)
    err = console(stderr=True)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    shown: dict[int, int] = {}  # attempt → bytes printed so far
    current: int | None = None

    def emit(data: bytes | None, number: int) -> None:
        if data is None:
            return
        offset = shown.get(number, 0)
        if len(data) < offset:  # the object was replaced by a shorter one: print it again
            err.print(f"[dim]-- logs of attempt {number} were rewritten; printing them again --[/dim]")
            offset = 0
        if len(data) > offset:
            click.echo(decoder.decode(data[offset:]), nl=False)
        shown[number] = len(data)

    key: tuple[str, str] | None = None
    with err.status(f"following {ref} in {where}…") as spinner, _follow_blobs(bucket, state_dir) as reopen:
        while True:
            with reopen() as blobs:
                from spotcron.store import RunStore

                store = RunStore(blobs)
                if key is None:
                    found = _resolve(store, ref, job, where)
                    key = (found.job, found.run_id)
                record = store.read(*key)
                if record is None:
                    raise SpotcronError(f"run {key[0]}/{key[1]} disappeared from {where} (pruned?)")
                target = attempt if attempt is not None else (record.current_attempt.number
                                                              if record.current_attempt else None)
                if current is not None and target != current:
                    # The previous attempt may have uploaded its last lines while being preempted.
                    emit(_read(blobs, layout.logs(*key, current)), current)
                    err.print(f"[dim]-- attempt {target} --[/dim]")
                current = target
                if current is not None:
                    emit(_read(blobs, layout.logs(*key, current)), current)
            if record.terminal:
                if attempt is not None:
                    pick_attempt(record, attempt)  # an attempt that will never come is an error
                tail = decoder.decode(b"", final=True)
                if tail:
                    click.echo(tail, nl=False)
                break
            spinner.update(f"{key[0]}/{key[1]} is {record.state}; waiting for more output…")
            context.sleep(interval)
    ended = record.state + (f": {record.reason}" if record.reason else "")
    err.print(f"{key[0]}/{key[1]} ended {ended}" + ("" if current is not None and shown.get(current) else
                                                    " (no logs)"))


@contextlib.contextmanager
def _follow_blobs(bucket: str | None, state_dir: Path) -> Iterator[Callable[[], AbstractContextManager[Blobs]]]:
    """A per-poll bucket opener for --follow.

    The local bucket is reopened on every poll: its emulator reads the object index once when it
    starts, so a long-lived one would never see what `spotcron up` writes after that. A gs://
    bucket is opened once and reused.
    """
    context = _context()
    if not bucket:
        yield lambda: context.open_blobs(bucket, state_dir)
        return
    with context.open_blobs(bucket, state_dir) as blobs:
        yield lambda: contextlib.nullcontext(blobs)


def _read(blobs: Blobs, name: str) -> bytes | None:
    blob = blobs.read(name)
    return blob.data if blob else None


# --- spotcron results --------------------------------------------------------------------------


@click.command("results")
@click.argument("run")
@click.option("--job", help="The job of a bare run id, when several jobs have one of that name.")
@click.option("--attempt", type=click.IntRange(min=1),
              help="Use this attempt (default: the one that succeeded, else the latest).")
@click.option("--download", "download_dir", type=click.Path(path_type=Path, file_okay=False),
              help="Write the files into DIR, keeping their relative paths (checked against the manifest).")
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
@bucket_options
def results(run: str, job: str | None, attempt: int | None, download_dir: Path | None, as_json: bool,
            bucket: str | None, state_dir: Path) -> None:
    """List (and download) the files a run wrote to /results.

    The list comes from the attempt's manifest.json (name, size, sha256), which the runner writes
    last; without one, the upload did not complete and the objects found are listed instead.

    \b
    Examples:
      spotcron results hello-bot/20261122-1000
      spotcron results 20261122-1000-t4 --download ./out
    """
    from spotcron import layout
    from spotcron.views import RESULT_COLUMNS, ResultFile, manifest_files, pick_attempt, results_json

    where = describe(bucket, state_dir)
    with _store(bucket, state_dir) as store:
        record = _resolve(store, run, job, where)
        number = attempt or _results_attempt(record) or pick_attempt(record, None)
        if attempt:
            pick_attempt(record, attempt)
        prefix = layout.results_prefix(record.job, record.run_id, number)
        manifest_name = layout.manifest(record.job, record.run_id, number)
        manifest = store.blobs.read(manifest_name)
        if manifest is not None:
            files, source = manifest_files(manifest.data, manifest_name), "manifest"
        else:
            files = [ResultFile(name[len(prefix):]) for name in store.blobs.list(prefix)]
            source = "listing"
        written = _download(store.blobs, prefix, files, download_dir) if download_dir is not None else None
    if as_json:
        click.echo(results_json(files, source, prefix))
        return
    out = console()
    label = f"{record.job}/{record.run_id} attempt {number} ({record.state})"
    if source == "listing":
        out.print(f"[yellow]no manifest[/yellow] for {label}: the upload did not complete; "
                  f"objects under {prefix}:")
    else:
        out.print(f"results of {label}, from {manifest_name}:")
    if not files:
        out.print("no files")
    else:
        from rich.table import Table

        table = Table(box=None, pad_edge=False, header_style="bold")
        for column in RESULT_COLUMNS:
            table.add_column(column, justify="right" if column == "size" else "left", no_wrap=True)
        for file in files:
            table.add_row(*file.cells())
        out.print(table)
    if written is not None:
        from spotcron.views import format_size

        out.print(f"downloaded {len(files)} file{'s' if len(files) != 1 else ''} ({format_size(written)}) "
                  f"to {download_dir}")


def _results_attempt(record: RunRecord) -> int | None:
    """The attempt named by the record's results_prefix (`runs/JOB/RUN/attempt-N/`)."""
    prefix = (record.results_prefix or "").rstrip("/")
    tail = prefix.rsplit("/", 1)[-1]
    return int(tail.removeprefix("attempt-")) if tail.startswith("attempt-") and tail[8:].isdigit() else None


def _download(blobs: Blobs, prefix: str, files: list[ResultFile], dest: Path) -> int:
    """Write every file under `dest`; nothing is written unless every name stays inside `dest`."""
    import hashlib

    from spotcron.errors import SpotcronError
    from spotcron.views import safe_relative

    root = dest.resolve()
    targets = []
    for file in files:
        target = (root / safe_relative(file.name)).resolve()
        if not target.is_relative_to(root):  # a symlink inside dest pointing elsewhere
            raise SpotcronError(f"refusing to download {file.name!r}: {target} is outside {root}")
        targets.append(target)
    total = 0
    for file, target in zip(files, targets, strict=True):
        blob = blobs.read(prefix + file.name)
        if blob is None:
            raise SpotcronError(f"the manifest lists {file.name!r} but {prefix}{file.name} does not exist")
        digest = hashlib.sha256(blob.data).hexdigest()
        if file.sha256 and digest != file.sha256:
            raise SpotcronError(f"{prefix}{file.name}: sha256 is {digest}, the manifest says {file.sha256}; "
                                "not written")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob.data)
        total += len(blob.data)
    return total


# --- spotcron status ---------------------------------------------------------------------------


@click.command("status")
@click.option("--project", envvar=PROJECT_ENV, show_envvar=True,
              help="With --bucket: also list the project's spotcron VMs in Compute Engine.")
@bucket_options
def status(project: str | None, bucket: str | None, state_dir: Path) -> None:
    """Show runs in progress with their VM, age and deadline.

    With --bucket and --project, also lists every VM labelled spotcron=1 in the project, live or
    leftover, and marks those whose run is no longer in progress (the sweep deletes them once
    they are stopped or past their deadline).

    \b
    Examples:
      spotcron status
      spotcron status --bucket gs://my-project-spotcron --project my-project
    """
    from rich.table import Table

    from spotcron.views import LIVE_COLUMNS, STATE_STYLES, live_row, newest_first

    context = _context()
    now = context.now()
    where = describe(bucket, state_dir)
    with _store(bucket, state_dir) as store:
        live = store.live_runs()
        records = newest_first(r for r in (store.read(j, run_id) for j, run_id in live) if r and not r.terminal)
    out = console()
    if records:
        table = Table(box=None, pad_edge=False, header_style="bold", title=f"runs in progress in {where}",
                      title_justify="left")
        for column in LIVE_COLUMNS:
            table.add_column(column, no_wrap=column != "zone / machine")
        for record in records:
            cells = list(live_row(record, now).cells())
            style = STATE_STYLES.get(record.state, "")
            cells[2] = f"[{style}]{cells[2]}[/{style}]" if style else cells[2]
            table.add_row(*cells)
        out.print(table)
    else:
        out.print(f"No runs in progress in {where}.")
    if not project:
        return
    if not bucket:
        console(stderr=True).print("[dim]--project ignored: local mode has no Compute Engine VMs[/dim]")
        return
    _print_vms(out, context.compute(project).list_managed(), {(r.job, r.run_id) for r in records}, project, now)


def _print_vms(out: Any, instances: list[Any], live: set[tuple[str, str]], project: str, now: datetime) -> None:
    from rich.table import Table

    from spotcron.views import format_age

    if not instances:
        out.print(f"No spotcron VMs in project {project}.")
        return
    table = Table(box=None, pad_edge=False, header_style="bold", title=f"spotcron VMs in project {project}",
                  title_justify="left")
    for column in ("vm", "zone", "status", "machine", "age", "run"):
        table.add_column(column, no_wrap=True)
    for vm in sorted(instances, key=lambda i: i.created_at):
        job, run_id = vm.labels.get("job", "?"), vm.labels.get("run", "?")
        tracked = (job, run_id) in live
        run_cell = f"{job}/{run_id}" + ("" if tracked else " [yellow](run not in progress)[/yellow]")
        table.add_row(vm.name, vm.zone, vm.status, f"{vm.machine_type} {vm.provisioning_model}",
                      format_age((now - vm.created_at).total_seconds()), run_cell)
    out.print(table)


# --- spotcron run ------------------------------------------------------------------------------


@click.command("run")
@click.argument("job_or_file")
@click.option("--cloud", is_flag=True, help="Publish to the deployed stack's start topic instead of running locally.")
@click.option("--project", envvar=PROJECT_ENV, show_envvar=True,
              help="With --cloud: the Google Cloud project (default: the stack's).")
@click.option("--topic", help="With --cloud: the start topic (default: the stack's start_topic, spotcron-start).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1),
              help="Locally: seconds to wait for the run to end (default: the job's timeout + grace).")
@jobs_option
@stack_option
@bucket_options
def run(job_or_file: str, cloud: bool, project: str | None, topic: str | None, timeout_s: float | None,
        jobs_dir: Path, stack_path: Path, bucket: str | None, state_dir: Path) -> None:
    """Run a job now, outside its schedule (every matrix entry).

    Locally (default) the run goes through the local stack and this command waits for it and
    exits 0 only if every run succeeded. With --cloud it publishes the job's spec to the deployed
    start topic, marked manual, and returns: the run ids start with `m` and end in the nonce's
    first four characters (before any matrix suffix). A manual run never takes the place of a
    scheduled one.

    \b
    Examples:
      spotcron run hello-bot
      spotcron run dl-benchmark --cloud --project my-project
    """
    from spotcron.spec_loader import load_job_file

    settings = load_stack(stack_path)
    spec = load_job_file(find_job_file(job_or_file, jobs_dir), grace=settings.grace)
    if cloud:
        _publish_start(spec, project or settings.project, topic or settings.start_topic, bucket)
        return
    records = _run_locally(spec, state_dir, jobs_dir, timeout_s or float(spec.timeout + settings.grace))
    out = console()
    _print_runs_table(out, records, _context().now())
    for record in records:
        out.print(f"logs: spotcron logs {record.job}/{record.run_id}")
    if any(r.state != "succeeded" for r in records):
        raise click.exceptions.Exit(1)


def _run_locally(spec: Any, state_dir: Path, jobs_dir: Path, timeout_s: float) -> list[RunRecord]:
    context = _context()
    err = console(stderr=True)
    stack = context.local_stack(state_dir, jobs_dir)
    manager = stack if hasattr(stack, "__enter__") else contextlib.nullcontext(stack)
    with manager as running:
        started = running.run_now(spec)
        for job, run_id in started:
            err.print(f"started {job}/{run_id}")
        with err.status(f"waiting for {len(started)} run{'s' if len(started) != 1 else ''}…"):
            return list(running.wait(started, timeout_s))


def _publish_start(spec: Any, project: str, topic: str, bucket: str | None) -> None:
    import os

    from spotcron.engine.messages import encode_start
    from spotcron.errors import SpotcronError
    from spotcron.gcp.errors import translated
    from spotcron.gcp.pubsub import topic_path
    from spotcron.settings import Settings

    if not project or project == Settings.model_fields["project"].default:
        raise SpotcronError(f"--cloud needs the Google Cloud project: pass --project, set {PROJECT_ENV}, or set "
                            f"project in the stack file (got {project!r})")
    try:
        path = topic_path(project, topic)
    except ValueError as exc:
        raise SpotcronError(f"--topic: {exc}") from None
    nonce = secrets.token_hex(8)
    # The entry point reads the environment; the emulator host decides plain gRPC vs Google.
    publisher = _context().publisher(os.environ.get("PUBSUB_EMULATOR_HOST") or None)
    with translated(f"publish to {path}"):
        # The body is the spec JSON itself, exactly what the scheduler entry publishes.
        message_id = publisher.publish(path, encode_start(spec), trigger="manual", nonce=nonce).result(timeout=60)
    out = console()
    out.print(f"published {spec.name} to {path}: message {message_id}")
    watch = f" --bucket {bucket}" if bucket else " --bucket gs://BUCKET"
    out.print(f"its run ids look like m<UTC time>-{nonce[:4]}; watch with: spotcron runs {spec.name}{watch}")


COMMANDS = [runs, logs, results, status, run]
