"""Commands about job files: validate, next, schema."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import click

from spotcron.cli._common import console, find_job_file, jobs_option, line_console, load_stack, stack_option


@click.command()
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@jobs_option
@stack_option
def validate(paths: tuple[Path, ...], jobs_dir: Path, stack_path: Path) -> None:
    """Check job files and report every problem at once.

    PATHS are job files or directories (default: the --jobs directory). Each problem is printed
    as FILE:LINE: FIELD: what is wrong and what is allowed; the exit code is 2 if there is any.

    \b
    Examples:
      spotcron validate
      spotcron validate jobs/hello-bot.yaml
    """
    from spotcron.core.durations import format_duration
    from spotcron.core.errors import ConfigError, Problem
    from spotcron.present.tables import Columns, print_table

    targets = list(paths) or [jobs_dir]
    specs, problems = _check_all(targets, stack_path)
    if not specs and not problems:
        where = ", ".join(str(t) for t in targets)
        raise ConfigError([Problem(where, None, "", "no job files (*.yaml, *.yml) found; see docs/jobs.md")])
    try:
        if problems:
            raise ConfigError(problems)
        _check_registries(specs, targets, stack_path)
    except ConfigError as exc:
        _errors_then_warnings(exc, specs)
    rows = []
    for spec in specs:
        machines = "\n".join(dict.fromkeys(_machine_text(v) for v in spec.variants()))
        name = spec.name + (" (paused)" if spec.paused else "")
        rows.append((name, f"{spec.schedule} ({spec.time_zone})", machines, format_duration(spec.timeout)))
    out = console()
    print_table(out, Columns(("job", "schedule", "machine", "timeout"), ("timeout", "machine")), rows,
                hint="spotcron next JOB shows one job")
    out.print(f"{len(specs)} job{'s' if len(specs) != 1 else ''} valid")
    _warnings(specs)


def _warnings(specs) -> None:
    _warn_unrunnable_here(specs)
    _warn_gpu_images(specs)
    _warn_credential_env(specs)
    _warn_network(specs)
    _warn_local_only(specs)
    _warn_unpriced(specs)


def _errors_then_warnings(error, specs) -> None:
    """The problems, then the warnings of the jobs that are valid (one broken file must not hide
    what the others would be told), then exit 2 as for any problem."""
    from spotcron.cli import EXIT_USER_ERROR, ReportedError, render_error

    ReportedError(render_error(error)).show()
    broken = {Path(p.file).stem for p in error.problems}
    _warnings([spec for spec in specs if spec.name not in broken])
    raise click.exceptions.Exit(EXIT_USER_ERROR)


def _check_all(targets: list[Path], stack_path: Path) -> tuple[list, list]:
    """The valid jobs, and every job's problems and the stack file's together: a broken stack file
    must not hide the jobs'."""
    from spotcron.core.errors import ConfigError
    from spotcron.core.loader import DEFAULT_GRACE, check_jobs

    problems = []
    try:
        settings = load_stack(stack_path)
        grace, retention_days = settings.grace, settings.results_retention_days
    except ConfigError as exc:
        problems.extend(exc.problems)
        grace, retention_days = DEFAULT_GRACE, None
    specs, job_problems = check_jobs(targets, grace=grace, retention_days=retention_days)
    problems.extend(job_problems)
    return specs, problems


def _check_registries(specs, targets: list[Path], stack_path: Path) -> None:
    """An image in a repository of the stack's project that the job's account may not read: each
    account reads only the repository of its own jobs (docs/deploy.md), so every pull would fail."""
    from spotcron.core.errors import ConfigError
    from spotcron.core.loader import job_files
    from spotcron.deploy.validate import image_problems, repository_problems

    settings = load_stack(stack_path)
    files = {path.stem: path for path in job_files(targets)[0]}
    problems = image_problems(settings, specs, files) + repository_problems(settings, specs, files)
    if problems:
        raise ConfigError(problems)


def _warn_network(specs) -> None:
    """An image its VM could not pull (deploy refuses it), or a job relying on a Cloud NAT."""
    from spotcron.core.egress import network_warnings

    err = line_console(stderr=True)
    for spec in specs:
        for warning in network_warnings(spec):
            err.print(f"warning: {spec.name}: {warning}", markup=False, highlight=False)


def _warn_local_only(specs) -> None:
    """A local command its VM would not run: the job works here and nowhere else."""
    from spotcron.core.local_parity import local_command_warnings

    err = line_console(stderr=True)
    for spec in specs:
        for warning in local_command_warnings(spec):
            err.print(f"warning: {spec.name}: {warning}", markup=False, highlight=False)


def _warn_credential_env(specs) -> None:
    """An env key named like a credential: its value would sit in the file, the bucket and the VM's metadata."""
    err = line_console(stderr=True)
    for spec in specs:
        for warning in spec.env_warnings():
            err.print(f"warning: {spec.name}: {warning}", markup=False, highlight=False)


def _warn_unrunnable_here(specs) -> None:
    """A job with no local command runs in local mode only if a container runtime has its image
    (each matrix entry may name its own image and local command)."""
    from spotcron.local.containers import find_runtime

    err = line_console(stderr=True)
    seen: set[tuple[str, str]] = set()
    for spec in (c for s in specs for c in s.configurations()):
        if spec.local is not None or (spec.name, spec.image) in seen:
            continue
        seen.add((spec.name, spec.image))
        lookup = find_runtime(spec.image)
        if lookup.binary is None:
            err.print(f"warning: {spec.name}: no local: block, and {lookup.why_not}; `spotcron up` and "
                      f"`spotcron run` can't run it on this machine. Add local: {{command: ...}} to its job "
                      f"file (see docs/jobs.md) or make the image available.", markup=False, highlight=False)


def _warn_gpu_images(specs) -> None:
    """An entry with a GPU on the image of entries without one usually leaves the GPU idle."""
    err = line_console(stderr=True)
    for spec in specs:
        for warning in spec.image_warnings():
            err.print(f"warning: {spec.name}: {warning}", markup=False, highlight=False)


def _warn_unpriced(specs) -> None:
    """A machine type the price table lacks runs, but its runs record no cost and reports show `-`."""
    import os

    from spotcron.cli.cost import PRICES_ENV
    from spotcron.core.errors import SpotcronError
    from spotcron.cost.prices import load_prices

    try:
        table = load_prices(os.environ.get(PRICES_ENV) or None)
    except SpotcronError:
        return  # `spotcron cost` says what is wrong with the file
    err = line_console(stderr=True)
    for spec in specs:
        for variant in spec.variants():
            machine = variant.machine
            gpu = f"{machine.gpu.type} x{machine.gpu.count}" if machine.gpu else None
            missing = table.missing_price(machine.type, gpu)
            if missing is not None:
                name = f"{spec.name}/{variant.variant}" if variant.variant else spec.name
                err.print(f"warning: {name}: {missing}; its runs record no cost, and `spotcron cost` and "
                          f"`spotcron report` show `-` for it.", markup=False, highlight=False)


def _machine_text(spec) -> str:
    machine = spec.machine
    text = machine.type + ("" if machine.spot else " on-demand")
    if machine.gpu:
        text += f" + {machine.gpu.count}x {machine.gpu.type}"
    return text


@click.command("next")
@click.argument("job_or_file")
@click.option("-n", "--count", default=5, show_default=True, type=click.IntRange(1, 1000),
              help="How many fire times to show.")
@click.option("--after", metavar="ISO-8601",
              help="Start after this instant instead of now, e.g. 2026-03-28T12:00:00+01:00 "
                   "(without an offset it is read in the job's time zone).")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"job", "time_zone", "next": [ISO-8601 instants]} and nothing else.')
@jobs_option
@stack_option
def next_(job_or_file: str, count: int, after: str | None, as_json: bool, jobs_dir: Path, stack_path: Path) -> None:
    """Show when a job fires next, in its time zone and in UTC.

    JOB_OR_FILE is a job name (looked up in --jobs) or a path to a job file. Also prints how
    Cloud Scheduler reads the schedule and what daylight-saving changes do to it.

    \b
    Examples:
      spotcron next hello-bot
      spotcron next jobs/dl-benchmark.yaml -n 3 --after 2026-10-24T00:00:00Z --json
    """
    from spotcron.core.cron.describe import describe, dst_notes
    from spotcron.core.cron.schedule import load_time_zone, parse_schedule
    from spotcron.core.loader import load_job_file

    spec = load_job_file(find_job_file(job_or_file, jobs_dir), grace=load_stack(stack_path).grace)
    schedule = parse_schedule(spec.schedule)
    zone = load_time_zone(spec.time_zone)
    start = _parse_after(after, zone) if after else datetime.now(UTC)
    fires = schedule.upcoming(start, zone, count)
    if as_json:
        click.echo(json.dumps({"job": spec.name, "time_zone": spec.time_zone,
                               "next": [t.astimezone(zone).isoformat() for t in fires]}))
        return

    from spotcron.present.fire_times import fire_table
    from spotcron.present.tables import print_whole

    out = line_console()
    out.print(f"[bold]{spec.name}[/bold]: {describe(schedule)}  ({spec.schedule}, {spec.time_zone})")
    if spec.paused:
        out.print("[yellow]paused[/yellow]: deployed paused, so it will not fire until resumed; "
                  "these are the times it would fire")
    if spec.matrix:
        out.print(f"each tick runs {len(spec.matrix)} matrix entries: {', '.join(e.name for e in spec.matrix)}")
    print_whole(out, fire_table(fires, zone, spec.time_zone))
    if len(fires) < count:
        out.print(f"only {len(fires)} fire time(s) found")
    for note in dst_notes(schedule, zone, start):
        out.print(f"[yellow]note[/yellow]: {note}")


def _parse_after(text: str, zone) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not an ISO-8601 time; write e.g. 2026-03-28T12:00:00Z",
                                 param_hint="--after") from None
    return moment.replace(tzinfo=zone) if moment.tzinfo is None else moment


@click.command(short_help="Print the JSON Schema of a job file.")
def schema() -> None:
    """Print the JSON Schema of a job file (what jobs/schema.json holds).

    Editors that read `# yaml-language-server: $schema=./schema.json` at the top of a job file
    use it to complete and check fields. Regenerate with: spotcron schema > jobs/schema.json
    """
    from spotcron.core.spec import job_file_schema

    click.echo(json.dumps(job_file_schema(), indent=2))


COMMANDS = [validate, next_, schema]
