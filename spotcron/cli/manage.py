"""Commands that change a job: pause, resume, delete.

The job file is the one description of a job: pause and resume set its `paused:` field (comments
and layout kept), which a running `spotcron up` picks up before its next tick and `spotcron
deploy` carries to Google Cloud; with --cloud they also apply it to the deployed stack at once
(deploy/pausing.py). delete removes the job from the local stack: its file (a copy is kept under
the state dir) and its deployed spec, and with --delete-results its runs; its deployment on
Google Cloud goes at the next `spotcron deploy`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from spotcron.cli._bucket import (
    BUCKET_ENV,
    DEFAULT_STATE_DIR,
    PROJECT_ENV,
    STATE_DIR_ENV,
    bucket_name,
    runs_context,
)
from spotcron.cli._common import (
    find_job_file,
    given,
    goes_with,
    jobs_option,
    line_console,
    load_stack,
    stack_option,
)

DELETED = "deleted"  # under the state dir: the job files `spotcron delete` removed, kept


def _state_dir_option(function: Any) -> Any:
    return click.option(
        "--state-dir", type=click.Path(path_type=Path, file_okay=False), default=DEFAULT_STATE_DIR,
        envvar=STATE_DIR_ENV, show_default=True, show_envvar=True,
        help="The local stack's state (its bucket; where a removed job file is kept).")(function)


def _cloud_options(function: Any) -> Any:
    """--cloud, and where the deployed stack is: the conventions of `spotcron run --cloud`."""
    function = click.option(
        "--bucket", metavar="gs://NAME", envvar=BUCKET_ENV, show_envvar=True,
        help="With --cloud: the stack's bucket, which holds the deployed specs (default: the stack's).")(function)
    function = click.option("--project", envvar=PROJECT_ENV, show_envvar=True,
                            help="With --cloud: the Google Cloud project (default: the stack's).")(function)
    return click.option(
        "--cloud", is_flag=True,
        help="Also apply it to the deployed stack now, without a deploy: the job's Cloud Scheduler entry "
             "(scheduling: per-job), or its deployed spec and the dispatch entry's version (shared).")(function)


def _set_paused(job: str, jobs_dir: Path, stack_path: Path, paused: bool, cloud: bool = False,
                project: str | None = None, bucket: str | None = None) -> None:
    from spotcron.core.errors import SpotcronError
    from spotcron.core.jobedit import CannotEdit, with_paused
    from spotcron.core.loader import load_job_file

    if not cloud:
        for name, why in (("project", "a local pause calls no project"), ("bucket", "a local pause reads no bucket")):
            if given(name):
                raise goes_with(f"--{name}", "--cloud", why)
    path = find_job_file(job, jobs_dir)
    settings = load_stack(stack_path)
    spec = load_job_file(path, grace=settings.grace)  # a broken file is reported, never edited
    out = line_console()
    word = "paused" if paused else "resumed"
    edited = None
    if spec.paused != paused:
        try:
            edited = with_paused(path.read_text(encoding="utf-8"), paused)
        except CannotEdit as exc:
            raise SpotcronError(f"{path}: cannot set paused: {str(paused).lower()} in it: {exc}; set it by hand") \
                from None
    # The cloud first: when it fails, nothing has changed (the file neither); the edit is known to work.
    outcome = _pause_on_cloud(settings, spec.name, paused, project, bucket, stack_path) if cloud else None
    if edited is None:
        if outcome is None:
            out.print(f"{spec.name} is already {'paused' if paused else 'running on its schedule'} ({path}); "
                      "nothing changed", markup=False)
        else:
            state = "already says paused: true" if paused else "is not paused either"
            out.print(f"{path} {state}, so the next `spotcron deploy` keeps it {word}.", markup=False, highlight=False)
        return
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(edited, encoding="utf-8")
    partial.chmod(path.stat().st_mode & 0o777)
    partial.replace(path)
    when = ("fires it no more from its next tick; `spotcron run " + spec.name + "` still runs it by hand"
            if paused else "fires it again from its next tick")
    said = "paused: true" if paused else "its paused: line removed"
    if outcome is None:
        out.print(f"{word} {spec.name} ({path}: {said}). A running `spotcron up` {when}. "
                  f"On Google Cloud, `spotcron deploy` {'pauses' if paused else 'resumes'} it "
                  "(or add --cloud to do it now, without a deploy).", markup=False, highlight=False)
        return
    out.print(f"{word} {spec.name} in {path} ({said}), so the next `spotcron deploy` keeps it "
              f"{word}. A running `spotcron up` {when}.", markup=False, highlight=False)


def _pause_on_cloud(settings: Any, job: str, paused: bool, project: str | None, bucket: str | None,
                    stack_path: Path) -> Any:
    """Apply the pause to the deployed stack (deploy/pausing.py) and print what changed there."""
    from spotcron.cli.deploy import DeployContext
    from spotcron.deploy.pausing import set_cloud_paused
    from spotcron.deploy.validate import preflight
    from spotcron.gcp.admin.calls import Caller, MissingCredentials

    changes: dict[str, str] = {}
    if project:
        changes["project"] = project
    if bucket:
        changes["bucket"] = bucket_name(bucket)
    settings = settings.model_copy(update=changes)
    preflight(settings, [], stack_path)  # a placeholder project or bucket stops here, before any call
    ctx = click.get_current_context()
    env = ctx.obj if isinstance(ctx.obj, DeployContext) else DeployContext()
    try:
        credentials = env.credentials(settings.project)
    except MissingCredentials as exc:  # deploy's text names the APIs it enables; a pause enables none
        raise MissingCredentials(exc.cause, f"{'pause' if paused else 'resume'} --cloud reads and changes the "
                                            "deployed job on Google Cloud") from None
    clients = env.clients(settings.project, credentials, 1)
    caller = env.caller(settings.project) if env.caller else Caller(settings.project)
    outcome = set_cloud_paused(settings, job, paused, clients, caller)
    out = line_console()
    where = f"project {settings.project}, region {settings.region}, scheduling: {settings.scheduling}"
    if outcome.already:
        out.print(f"{job} is already {'paused' if paused else 'running on its schedule'} on Google Cloud ({where}); "
                  "nothing changed there.", markup=False, highlight=False)
    else:
        out.print(f"{'paused' if paused else 'resumed'} {job} on Google Cloud ({where}):", markup=False,
                  highlight=False)
        for line in outcome.changes:
            out.print(f"  - {line}", markup=False, highlight=False, soft_wrap=True)
    return outcome


@click.command("pause")
@click.argument("job")
@_cloud_options
@jobs_option
@stack_option
def pause(job: str, cloud: bool, project: str | None, bucket: str | None, jobs_dir: Path, stack_path: Path) -> None:
    """Stop a job's scheduled runs: sets `paused: true` in its job file.

    A running `spotcron up` stops firing it before its next tick; `spotcron run JOB` still runs
    it by hand. `spotcron deploy` then pauses it on Google Cloud; with --cloud it is paused there
    at once, without a deploy: its Cloud Scheduler entry (scheduling: per-job), or, with
    scheduling: shared, its deployed spec as deployed (other edits of the file wait for the next
    deploy) and the dispatch entry's version, so running dispatchers skip it from their next minute.

    \b
    Examples:
      spotcron pause hello-bot
      spotcron pause hello-bot --cloud
      spotcron resume hello-bot
    """
    _set_paused(job, jobs_dir, stack_path, True, cloud, project, bucket)


@click.command("resume")
@click.argument("job")
@_cloud_options
@jobs_option
@stack_option
def resume(job: str, cloud: bool, project: str | None, bucket: str | None, jobs_dir: Path, stack_path: Path) -> None:
    """Run a paused job on its schedule again: removes `paused: true` from its job file.

    A running `spotcron up` fires it again from its next tick (runs missed while paused are not
    made up). `spotcron deploy` then resumes it on Google Cloud; with --cloud it is resumed there
    at once, without a deploy (see `spotcron pause --help`).
    """
    _set_paused(job, jobs_dir, stack_path, False, cloud, project, bucket)


@click.command("delete")
@click.argument("job")
@click.option("--delete-results", is_flag=True, help="Also delete the job's runs, with their logs and results.")
@click.option("--yes", "-y", "assume_yes", is_flag=True, help="Delete without asking (needed without a terminal).")
@jobs_option
@_state_dir_option
def delete(job: str, delete_results: bool, assume_yes: bool, jobs_dir: Path, state_dir: Path) -> None:
    """Remove a job: its file from the jobs folder and its deployment from the local stack.

    Prints what it will do, then asks. The job file is kept under STATE_DIR/deleted/; its runs,
    logs and results stay in the bucket unless --delete-results. A running `spotcron up` drops
    the job at its next reload (seconds). It changes nothing on Google Cloud: the next `spotcron
    deploy` removes the job's deployment there (its scheduler entry and deployed spec).

    \b
    Examples:
      spotcron delete hello-bot
      spotcron delete old-report --delete-results --yes
    """
    from spotcron.core import layout
    from spotcron.core.errors import SpotcronError
    from spotcron.engine.store import RunStore

    path = find_job_file(job, jobs_dir)
    name = path.stem
    context = runs_context()
    out = line_console()
    local = (state_dir / "bucket").is_dir()
    kept = state_dir / DELETED / path.name
    with context.open_blobs(None, state_dir) if local else _no_bucket() as blobs:
        store = RunStore(blobs) if blobs is not None else None
        runs = store.run_ids(name) if store is not None else []
        flying = [run_id for job_name, run_id in store.live_runs() if job_name == name] if store is not None else []
        if delete_results and flying:
            raise SpotcronError(f"{name} has runs in flight ({', '.join(flying)}): deleting their results now "
                                f"would race their uploads; wait for them to end (`spotcron status`), then "
                                "delete again")
        out.print(f"[bold]spotcron delete[/] {name}:", highlight=False)
        out.print(f"  - delete its job file {path} (a copy is kept at {kept})", markup=False, highlight=False)
        if blobs is not None:
            out.print("  - delete its deployed spec in the local bucket: no tick or start message runs it any more",
                      markup=False)
            what = f"{_count(len(runs), 'run')} with {'its' if len(runs) == 1 else 'their'} logs and results"
            out.print(f"  - delete its {what}" if delete_results else
                      f"  keep its {what} (--delete-results removes {'it' if len(runs) == 1 else 'them'})",
                      markup=False)
        out.print(f"  on Google Cloud nothing changes now: if {name} is deployed there, the next `spotcron deploy` "
                  "removes its deployment (its scheduler entry and deployed spec)", markup=False, highlight=False)
        if not assume_yes:
            if not context.interactive():
                raise SpotcronError("delete asks before removing anything, and there is no terminal to ask on: "
                                    "pass --yes to do what is listed above")
            click.confirm(f"Delete job {name}?", default=False, abort=True)
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(path.read_bytes())
        path.unlink()
        removed = 0
        if blobs is not None:
            blobs.delete(layout.deployed_spec(name))
            if delete_results:
                for object_name in blobs.list(layout.job_prefix(name)):
                    removed += blobs.delete(object_name)
    said = f"deleted {name}: its file is kept at {kept}"
    if delete_results:
        said += f"; {_count(len(runs), 'run')} and their {_count(removed, 'object')} are gone"
    elif runs:
        said += f"; its {_count(len(runs), 'run')} {'stays' if len(runs) == 1 else 'stay'} (`spotcron runs {name}`)"
    out.print(f"{said}. A running `spotcron up` drops it at its next reload. On Google Cloud it stays deployed "
              "until you run `spotcron deploy`, which removes its scheduler entry and deployed spec there.",
              markup=False, highlight=False)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _no_bucket() -> Any:
    import contextlib

    return contextlib.nullcontext(None)


COMMANDS = [pause, resume, delete]
