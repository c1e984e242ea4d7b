"""Commands about runs: runs (the list), status (what runs now), run (run a job now).

They read the results bucket, either a deployed one (`--bucket gs://NAME`) or the local one that
`spotcron up` keeps under `--state-dir`, through the same Blobs port and RunStore, so the output is
the same in both worlds. `logs` and `results` live in spotcron.cli.outputs; COMMANDS lists all five.
"""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from spotcron.cli._bucket import (
    PROJECT_ENV,
    RunsContext,
    all_run_ids,
    bucket_options,
    describe,
    matrix_entries,
    open_store,
    print_runs_table,
    runs_context,
    stdout,
    unknown_job,
    unknown_variant,
)
from spotcron.cli._common import (
    console,
    find_job_file,
    given,
    goes_with,
    jobs_option,
    load_stack,
    repository_root,
    stack_option,
)
from spotcron.cli.outputs import logs, results

if TYPE_CHECKING:
    from spotcron.core.runs import RunRecord
    from spotcron.present.follow import Streams

__all__ = ["COMMANDS", "RunsContext", "logs", "results", "run", "runs", "status"]

DEFAULT_LIMIT = 20
FOLLOW_POLL_S = 1.0  # `spotcron run` handed to `up`: seconds between looks at the bucket


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
    from spotcron.present.views import newest_first, newest_ids, records_json

    context = runs_context()
    where = describe(bucket, state_dir)
    job_name, _, variant = (job or "").strip("/").partition("/")
    with open_store(bucket, state_dir) as store:
        if job_name:
            pairs = [(job_name, run_id) for run_id in store.run_ids(job_name)]
            if not pairs:
                raise unknown_job(job_name, store, where)
        else:
            pairs = all_run_ids(store)
        if variant:  # a matrix entry's run ids end in -VARIANT or -VARIANT-rN; the records say it exactly
            from spotcron.core.runs import of_variant

            pairs = [(j, r) for j, r in pairs if of_variant(r, variant)]
            if not pairs:
                raise unknown_variant(job_name, variant, matrix_entries(store, job_name), where)
        # A read per record: read only the newest `limit` of them.
        chosen = newest_ids(pairs, limit)
        records = [r for r in (store.read(j, run_id) for j, run_id in chosen) if r is not None]
    records = newest_first(r for r in records if not variant or r.variant == variant)
    if as_json:
        click.echo(records_json(records))
        return
    out = stdout()
    if not records:
        what = f"job {job}" if job else where
        out.print(f"No runs yet in {what}. Start one with `spotcron run JOB`, or `spotcron up` for the schedule.")
        return
    print_runs_table(out, records, context.now())
    total = len(pairs)
    if limit and total > len(records):
        console(stderr=True).print(f"[dim]showing the newest {len(records)} of {total} runs; --limit 0 shows all[/dim]")


# --- spotcron status ---------------------------------------------------------------------------


@click.command("status")
@click.argument("jobs", nargs=-1)
@click.option("--project", envvar=PROJECT_ENV, show_envvar=True,
              help="With --bucket: also list the project's spotcron VMs in Compute Engine.")
@click.option("--json", "as_json", is_flag=True, help="Print the schedule health of each job as JSON and nothing else.")
@jobs_option
@stack_option
@bucket_options
def status(jobs: tuple[str, ...], project: str | None, as_json: bool, jobs_dir: Path, stack_path: Path,
           bucket: str | None, state_dir: Path) -> None:
    """Show each deployed job's schedule health, then the runs in progress.

    Schedule health, per job (or the JOBS named): its last success, how many runs in a row have
    failed, ticks missed and ticks started late (more than a minute after the tick) over the last
    7 days, when it is next due, and where its notifications go. A manual run with --env/--args
    overrides counts for none of these. Locally, a job whose file says `paused: true` (`spotcron
    pause`) shows paused at once: `spotcron up` reads the file before each tick.

    Then the runs in progress with their VM, age and deadline. With --bucket and --project, also
    lists every VM labelled spotcron=1 in the project, live or leftover, and marks those whose run
    is no longer in progress (the sweep deletes them once they are stopped or past their deadline).

    \b
    Examples:
      spotcron status
      spotcron status hello-bot --json
      spotcron status --bucket gs://my-project-spotcron --project my-project
    """
    from spotcron.present.tables import Columns, print_table
    from spotcron.present.views import (
        LIVE_COLUMNS,
        LIVE_DROP_ORDER,
        STATE_STYLES,
        VM_COLUMNS,
        VM_DROP_ORDER,
        live_row,
        newest_first,
        vm_rows,
    )

    if project and not bucket and given("project"):
        raise goes_with("--project", "--bucket gs://NAME", "local mode has no Compute Engine VMs to list")
    context = runs_context()
    now = context.now()
    where = describe(bucket, state_dir)
    with open_store(bucket, state_dir) as store:
        settings = load_stack(stack_path)
        files = None if bucket else (jobs_dir, settings.grace)  # locally, the job files say what up fires
        health = _health(store, jobs, now, settings.notify, where, files)
        if as_json:
            import json

            click.echo(json.dumps([h.to_json() for h in health], indent=2))
            return
        live = store.live_runs()
        records = newest_first(r for r in (store.read(j, run_id) for j, run_id in live) if r and not r.terminal)
    out = stdout()
    if health:
        from spotcron.present.health import HEALTH_COLUMNS, HEALTH_DROP_ORDER

        print_table(out, Columns(HEALTH_COLUMNS, HEALTH_DROP_ORDER), [h.cells(now) for h in health],
                    styles=[{"failing": "red" if h.consecutive_failures else "",
                             "missed 7d": "red" if h.missed_7d else ""} for h in health],
                    title=f"schedule health in {where}")
    else:
        out.print(f"No deployed jobs in {where} (`spotcron up` or `spotcron deploy` deploys them).")
    if records:
        print_table(out, Columns(LIVE_COLUMNS, LIVE_DROP_ORDER), [live_row(r, now).cells() for r in records],
                    styles=[{"status": STATE_STYLES.get(r.state, "")} for r in records],
                    title=f"runs in progress in {where}")
    else:
        out.print(f"No runs in progress in {where}.")
    if not project or not bucket:
        return
    vms = vm_rows(context.compute(project).list_managed(), {(r.job, r.run_id) for r in records}, now)
    if not vms:
        out.print(f"No spotcron VMs in project {project}.")
        return
    print_table(out, Columns(VM_COLUMNS, VM_DROP_ORDER), [vm.cells for vm in vms], styles=[vm.styles for vm in vms],
                title=f"spotcron VMs in project {project}")


def _health(store: Any, jobs: tuple[str, ...], now: Any, default: Any, where: str,
            files: tuple[Path, int] | None = None) -> list:
    """Each deployed job's health (the JOBS named, when any), from its spec and records.

    `files` (the jobs folder and the stack's grace), in local mode: a job's `paused` is its file's,
    since `spotcron up` reads the files before each tick (and fires nothing while it is not running).
    """
    from spotcron.core.errors import SpotcronError
    from spotcron.engine.dispatch_specs import BucketSpecs
    from spotcron.present.health import job_health

    specs = {spec.name: spec for spec in BucketSpecs(store.blobs).current()}
    if files is not None:
        specs = {name: _paused_as_in_file(spec, *files) for name, spec in specs.items()}
    unknown = [job for job in jobs if job not in specs]
    if unknown:
        raise SpotcronError(f"no deployed job {unknown[0]!r} in {where}; deployed: {', '.join(sorted(specs)) or 'none'}")
    return [job_health(specs[name], store.records(name), now, default) for name in (jobs or sorted(specs))]


def _paused_as_in_file(spec: Any, jobs_dir: Path, grace: int) -> Any:
    """`spec` with its job file's `paused:` (a file that is gone or does not load leaves it as deployed)."""
    from spotcron.core.errors import SpotcronError
    from spotcron.core.loader import load_job_file

    for suffix in (".yaml", ".yml"):
        path = jobs_dir / f"{spec.name}{suffix}"
        if path.is_file():
            try:
                paused = load_job_file(path, grace=grace).paused
            except (SpotcronError, OSError):
                return spec
            return spec if paused == spec.paused else spec.model_copy(update={"paused": paused})
    return spec


# --- spotcron run ------------------------------------------------------------------------------


@click.command("run")
@click.argument("job_or_file")
@click.option("--cloud", is_flag=True, help="Publish to the deployed stack's start topic instead of running locally.")
@click.option("--project", envvar=PROJECT_ENV, show_envvar=True,
              help="With --cloud: the Google Cloud project (default: the stack's).")
@click.option("--topic", help="With --cloud: the start topic (default: the stack's start_topic, spotcron-start).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1),
              help="Locally: seconds to wait for the run to end (default: the job's timeout + grace).")
@click.option("-f", "--follow", is_flag=True,
              help="Print the job's output as it comes (stdout), then exit with the job's exit code (--cloud too).")
@click.option("-t", "--timestamps", is_flag=True, help="With --follow: begin each line with when it was shipped.")
@click.option("--env", "env_pairs", multiple=True, metavar="NAME=VALUE",
              help="Set a variable for this run only (repeatable); the job file and schedule stay as they are.")
@click.option("--args", "args_text", metavar="'ARGS'",
              help="Replace the job's args for this run only, split like a shell would, e.g. --args '--steps 5'.")
@jobs_option
@stack_option
@bucket_options
def run(job_or_file: str, cloud: bool, project: str | None, topic: str | None, timeout_s: float | None,
        follow: bool, timestamps: bool, env_pairs: tuple[str, ...], args_text: str | None, jobs_dir: Path,
        stack_path: Path, bucket: str | None, state_dir: Path) -> None:
    """Run a job now, outside its schedule (every matrix entry).

    Locally (default) the run goes through the local stack and this command waits for it and
    exits 0 only if every run succeeded. With --follow (locally, or with --cloud from the stack's
    bucket or --bucket) it prints the job's output as the runner
    ships it (every few seconds; each line labelled with its run when a matrix runs several),
    ends with each run's outcome on stderr, and exits with the job's exit code (1 for a run that
    ended without one, such as a timeout). With --cloud it publishes the job's spec to the deployed
    start topic, marked manual, and returns: the run ids start with `m` and end in the nonce's
    first four characters (before any matrix suffix). A manual run never takes the place of a
    scheduled one.

    --env NAME=VALUE and --args change this run only (every matrix entry of it): the run records
    them, the deployed spec and the schedule stay as they are, and the run counts for nothing in
    the job's schedule health (`spotcron status`) or its notifications. --env may not set a
    variable the job declares in `secrets:` (change a secret with `spotcron secrets set NAME`).

    \b
    Examples:
      spotcron run hello-bot
      spotcron run hello-bot --follow
      spotcron run hello-bot --env LOG_LEVEL=debug --args '--dry-run'
      spotcron run dl-benchmark --cloud --project my-project
    """
    from spotcron.core.errors import SpotcronError
    from spotcron.core.loader import load_job_file

    if not cloud:
        for name, why in (("project", "a local run needs no project"), ("topic", "a local run publishes to no topic")):
            if given(name):
                raise goes_with(f"--{name}", "--cloud", why)
    elif given("timeout_s") and not follow:
        raise SpotcronError("--timeout goes without --cloud: a cloud run is not waited for (add --follow to wait); "
                            "watch it with `spotcron runs JOB --bucket ...`")
    if timestamps and not follow:
        raise goes_with("--timestamps", "--follow", "without it the output is not printed")
    overrides = _overrides(env_pairs, args_text)
    settings = load_stack(stack_path)
    job_file = find_job_file(job_or_file, jobs_dir)
    spec = load_job_file(job_file, grace=settings.grace)
    if overrides is not None:
        # Before anything is built, written or published: an --env value for a secret's variable
        # would land in the bucket, the run record and the VM's metadata.
        problem = overrides.problem(spec)
        if problem:
            raise SpotcronError(f"{job_file}: {problem} (nothing was written or started)")
    if cloud:
        spec = _pinned_as_deployed(spec, settings, repository_root(Path(job_file).resolve().parent))
        nonce = _publish_start(spec, project or settings.project, topic or settings.start_topic, bucket,
                               quiet=follow, overrides=overrides, state_dir=state_dir,
                               default_bucket=f"gs://{settings.bucket}")
        if follow:
            streams = _streams(timestamps)
            records = _follow_cloud(spec, nonce, bucket or f"gs://{settings.bucket}", state_dir, streams, timeout_s)
            raise click.exceptions.Exit(streams.outcome(records))
        return
    streams = _streams(timestamps) if follow else None
    spec = _local_image(spec, repository_root(Path(job_file).resolve().parent))
    records = _run_locally(spec, state_dir, timeout_s or float(spec.timeout + settings.grace), settings.limits,
                           streams, overrides)
    if streams is not None:
        raise click.exceptions.Exit(streams.outcome(records))
    out = stdout()
    print_runs_table(out, records, runs_context().now())
    for record in records:
        out.print(f"logs: spotcron logs {record.job}/{record.run_id}")
    from spotcron.core.runs import RunState

    if any(r.state != RunState.SUCCEEDED for r in records):
        raise click.exceptions.Exit(1)


def _overrides(env_pairs: tuple[str, ...], args_text: str | None) -> Any:
    """--env and --args as core/overrides.Overrides, or None; SpotcronError naming what is wrong."""
    from pydantic import ValidationError

    from spotcron.core.errors import SpotcronError
    from spotcron.core.overrides import Overrides, parse_env_pairs

    if not env_pairs and args_text is None:
        return None
    try:
        return Overrides.model_validate({"env": parse_env_pairs(env_pairs),
                                         **({"args": args_text} if args_text is not None else {})})
    except ValueError as exc:
        errors = exc.errors() if isinstance(exc, ValidationError) else None
        detail = "; ".join(e["msg"].removeprefix("Value error, ") for e in errors) if errors else str(exc)
        raise SpotcronError(f"--env/--args: {detail}") from None


def _streams(timestamps: bool) -> Streams:
    """`run --follow`'s output: the jobs' output on stdout, notices and outcomes on stderr."""
    from spotcron.present.follow import Streams

    err = console(stderr=True)
    return Streams(timestamps, write=lambda text: click.echo(text, nl=False),
                   notice=lambda text: err.print(f"[dim]{text}[/dim]"),
                   report=lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True))


def _local_image(spec: Any, root: Path) -> Any:
    """The job with its build: built by podman or docker when one works here; a line on stderr says
    whether its container or its local.command runs."""
    from spotcron.local.image_builder import LocalImages

    err = console(stderr=True)
    return LocalImages(root, lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True))([spec])[0]


def _run_locally(spec: Any, state_dir: Path, timeout_s: float, limits: Any = None,
                 streams: Streams | None = None, overrides: Any = None) -> list[RunRecord]:
    """Run every matrix entry now and wait for them all to end: on the `spotcron up` that owns
    `state_dir` when one runs (a second stack cannot share it), else on a local stack of its own."""
    from spotcron.present.progress import StartLines

    err = console(stderr=True)
    payload = spec.to_payload() if overrides is None else {"spec": spec.to_payload(),
                                                            "overrides": overrides.model_dump(mode="json")}
    started = runs_context().hand_off(state_dir, payload)
    if started is not None:
        return _follow_runs(started, state_dir, timeout_s, err, streams)
    # Following, the job's output is the screen: no spinner redrawn over it.
    waiting = err.status(f"starting the local stack in {state_dir}…") if streams is None else contextlib.nullcontext()
    with waiting as spinner, runs_context().local_stack(state_dir, limits) as stack:
        started = stack.run_now(spec, overrides)
        said = StartLines()  # `started` or `queued`, once the record says which
        if streams is not None:
            streams.start(started)

        def progress(records: list[RunRecord]) -> None:
            for line in said.lines(records):
                err.print(line, markup=False, highlight=False, soft_wrap=True)
            if streams is not None:
                streams.poll(stack.deps.blobs, records)
                return
            states = ", ".join(f"{r.run_id} {r.state}" for r in records)
            spinner.update(f"waiting for {spec.name}: {states}")

        records = list(stack.wait(started, timeout=timeout_s, progress=progress))
        for line in said.rest(started):
            err.print(line, markup=False, highlight=False, soft_wrap=True)
        if streams is not None:
            streams.poll(stack.deps.blobs, records)  # what the last upload added
    unfinished = [r for r in records if not r.terminal]
    if unfinished or len(records) < len(started):
        err.print(f"[yellow]gave up waiting after {timeout_s:.0f}s[/yellow]: the local stack stopped with the run "
                  f"unfinished; raise --timeout")
    return records


def _follow_runs(started: list[tuple[str, str]], state_dir: Path, timeout_s: float, err: Any,
                 streams: Streams | None = None) -> list[RunRecord]:
    """Ask the running `up` for the runs' records until every run has ended (or `timeout_s`);
    with `streams`, print their output from the bucket meanwhile (`up` serves it on disk)."""
    from spotcron.present.follow import wait_for_runs
    from spotcron.present.progress import StartLines

    said = StartLines(" on the running `spotcron up`")

    def announce(records: list[RunRecord]) -> None:
        for line in said.lines(records):
            err.print(line, markup=False, highlight=False, soft_wrap=True)

    context = runs_context()
    if streams is not None:
        streams.start(started)
    bucket = context.open_blobs(None, state_dir) if streams is not None else contextlib.nullcontext(None)
    waiting = err.status(f"waiting for {', '.join(r for _, r in started)}…") if streams is None \
        else contextlib.nullcontext()
    with waiting as spinner, bucket as blobs:
        followed = wait_for_runs(
            lambda: [r for r in context.handed_records(state_dir, started) if r is not None], len(started),
            sleep=context.sleep, every_s=FOLLOW_POLL_S, limit_s=timeout_s,
            poll=(lambda records: (announce(records), streams.poll(blobs, records)))
            if streams is not None else announce,
            waiting=(lambda records: spinner.update(", ".join(f"{r.run_id} {r.state}" for r in records)))
            if spinner is not None else lambda records: None)
    for line in said.rest(started):
        err.print(line, markup=False, highlight=False, soft_wrap=True)
    if not followed.ended:
        err.print(f"[yellow]gave up waiting after {timeout_s:.0f}s[/yellow]: the runs go on in the running "
                  "`spotcron up`; `spotcron runs` shows them")
    return followed.records


def _pinned_as_deployed(spec: Any, settings: Any, root: Path) -> Any:
    """`spec` with each image it builds pinned by digest, as `spotcron deploy` pinned the deployed
    spec: the start message names the deployed spec's digest, so an unpinned one is refused."""
    from spotcron.core.errors import SpotcronError
    from spotcron.core.images import plan_builds
    from spotcron.deploy.builds import look_up, pin, registries

    builds = plan_builds([spec], root)
    if not builds:
        return spec
    statuses = look_up(builds, runs_context().builder(settings), registries(settings, [spec]))
    unbuilt = [status for status in statuses if status.digest is None]
    if unbuilt:
        raise SpotcronError(f"job {spec.name}: no image is built from {unbuilt[0].build.relative}/ as it is now, so "
                            "what runs on Google Cloud is not this folder; run `spotcron deploy` (it builds the image "
                            "and deploys the job pinned to it), then run it again")
    return pin([spec], statuses)[0]


def _publish_start(spec: Any, project: str, topic: str, bucket: str | None, *, quiet: bool = False,
                   overrides: Any = None, state_dir: Path | None = None, default_bucket: str | None = None) -> str:
    """Publish a manual start of `spec`; its nonce (the run ids end in its first four characters).
    `overrides` are written to the stack's bucket first, and the message names their digest."""
    import os

    from spotcron.core.errors import SpotcronError
    from spotcron.core.settings import Settings
    from spotcron.engine.deployed import start_message
    from spotcron.gcp.error_map import translated
    from spotcron.gcp.pubsub import topic_path

    if not project or project == Settings.model_fields["project"].default:
        raise SpotcronError(f"--cloud needs the Google Cloud project: pass --project, set {PROJECT_ENV}, or set "
                            f"project in the stack file (got {project!r})")
    try:
        path = topic_path(project, topic)
    except ValueError as exc:
        raise SpotcronError(f"--topic: {exc}") from None
    nonce = secrets.token_hex(8)
    with translated(f"publish to {path}"):
        # The entry point reads the environment; the emulator host decides plain gRPC vs Google.
        publisher = runs_context().publisher(os.environ.get("PUBSUB_EMULATOR_HOST") or None)
        # The body names the job and its spec's digest, exactly what the scheduler entry publishes:
        # start_job runs the deployed spec only, so a job file changed since deploy is refused.
        body = start_message(spec)
        if overrides is not None:
            from spotcron.engine.run_overrides import start_message_with, write_overrides

            with runs_context().open_blobs(bucket or default_bucket, state_dir or Path(".spotcron")) as blobs:
                body = start_message_with(body, write_overrides(blobs, overrides.for_run(spec.name, nonce)))
        message_id = publisher.publish(path, body, trigger="manual", nonce=nonce).result(timeout=60)
    out = console(stderr=True) if quiet else stdout()  # following: stdout is the job's output
    out.print(f"published {spec.name} to {path}: message {message_id}")
    watch = f" --bucket {bucket}" if bucket else " --bucket gs://BUCKET"
    out.print(f"its run ids look like m<UTC time>-{nonce[:4]}; watch with: spotcron runs {spec.name}{watch}")
    out.print(f"start_job runs only the deployed spec: if jobs/{spec.name}.yaml changed since `spotcron deploy`, "
              f"the run is refused (see the start_job logs); deploy first")
    return nonce


CLOUD_POLL_S = 5.0  # the runner ships output every 5 s: looking more often finds nothing new
CLOUD_START_S = 300.0  # how long start_job may take to create the runs before `run -f` gives up


def _follow_cloud(spec: Any, nonce: str, bucket: str, state_dir: Path, streams: Streams,
                  timeout_s: float | None = None) -> list[RunRecord]:
    """Find the runs start_job creates for this request (ids ending in the nonce's first four
    characters, before any matrix suffix) in the bucket, then print their output to their end."""
    from spotcron.core.errors import SpotcronError
    from spotcron.core.runs import tick_of
    from spotcron.engine.store import RunStore
    from spotcron.present.follow import wait_for_runs

    context = runs_context()
    expected = len(spec.variants())
    waited, started = 0.0, []
    limit = timeout_s or CLOUD_START_S + spec.timeout + 600  # default: the runs' own deadline, with boot and upload
    with context.open_blobs(bucket, state_dir) as blobs:
        store = RunStore(blobs)
        while len(started) < expected:
            started = [(spec.name, r) for r in store.run_ids(spec.name)
                       if r.startswith("m") and tick_of(r).endswith(f"-{nonce[:4]}")]
            if len(started) >= expected:
                break
            if waited >= CLOUD_START_S:
                raise SpotcronError(f"start_job created {len(started)} of {expected} runs in {CLOUD_START_S:.0f}s: "
                                    f"see its logs (a job file changed since deploy is refused); "
                                    f"`spotcron runs {spec.name} --bucket {bucket}` lists what started")
            context.sleep(CLOUD_POLL_S)
            waited += CLOUD_POLL_S
        streams.start(started)
        followed = wait_for_runs(
            lambda: [r for r in (store.read(j, r) for j, r in started) if r is not None], len(started),
            sleep=context.sleep, every_s=CLOUD_POLL_S, limit_s=limit, waited_s=waited,
            poll=lambda records: streams.poll(blobs, records))
    if not followed.ended:
        console(stderr=True).print(f"[yellow]gave up waiting after {followed.waited_s:.0f}s[/yellow]: the runs go on; "
                                   f"`spotcron runs {spec.name} --bucket {bucket}` shows them")
    return followed.records


COMMANDS = [runs, logs, results, status, run]
