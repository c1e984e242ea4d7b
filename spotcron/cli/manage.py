"""Commands that change a job: pause, resume, delete.

The job file is the one description of a job: pause and resume set its `paused:` field (comments
and layout kept), which a running `spotcron up` picks up before its next tick and `spotcron
deploy` carries to Google Cloud. delete removes the job from the local stack: its file (a copy
is kept under the state dir) and its deployed spec, and with --delete-results its runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from spotcron.cli._bucket import runs_context
from spotcron.cli._common import console, find_job_file, jobs_option, load_stack, stack_option

DELETED = "deleted"  # under the state dir: the job files `spotcron delete` removed, kept


def _state_dir_option(function: Any) -> Any:
    return click.option(
        "--state-dir", type=click.Path(path_type=Path, file_okay=False), default=".spotcron",
        envvar="SPOTCRON_STATE_DIR", show_default=True, show_envvar=True,
        help="The local stack's state (its bucket; where a removed job file is kept).")(function)


def _set_paused(job: str, jobs_dir: Path, stack_path: Path, paused: bool) -> None:
    from spotcron.core.errors import SpotcronError
    from spotcron.core.jobedit import CannotEdit, with_paused
    from spotcron.core.loader import load_job_file

    path = find_job_file(job, jobs_dir)
    settings = load_stack(stack_path)
    spec = load_job_file(path, grace=settings.grace)  # a broken file is reported, never edited
    out = console()
    word = "paused" if paused else "resumed"
    if spec.paused == paused:
        out.print(f"{spec.name} is already {'paused' if paused else 'running on its schedule'} ({path}); "
                  "nothing changed", markup=False)
        return
    text = path.read_text(encoding="utf-8")
    try:
        edited = with_paused(text, paused)
    except CannotEdit as exc:
        raise SpotcronError(f"{path}: cannot set paused: {str(paused).lower()} in it: {exc}; set it by hand") \
            from None
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(edited, encoding="utf-8")
    partial.chmod(path.stat().st_mode & 0o777)
    partial.replace(path)
    when = ("fires it no more from its next tick; `spotcron run " + spec.name + "` still runs it by hand"
            if paused else "fires it again from its next tick")
    out.print(f"{word} {spec.name} ({path}: paused: {str(paused).lower()}). A running `spotcron up` {when}. "
              f"On Google Cloud, `spotcron deploy` {'pauses' if paused else 'resumes'} its scheduler entry.",
              markup=False)


@click.command("pause")
@click.argument("job")
@jobs_option
@stack_option
def pause(job: str, jobs_dir: Path, stack_path: Path) -> None:
    """Stop a job's scheduled runs: sets `paused: true` in its job file.

    A running `spotcron up` stops firing it before its next tick; `spotcron run JOB` still runs
    it by hand. `spotcron deploy` then pauses its Cloud Scheduler entry.

    \b
    Examples:
      spotcron pause hello-bot
      spotcron resume hello-bot
    """
    _set_paused(job, jobs_dir, stack_path, True)


@click.command("resume")
@click.argument("job")
@jobs_option
@stack_option
def resume(job: str, jobs_dir: Path, stack_path: Path) -> None:
    """Run a paused job on its schedule again: sets `paused: false` in its job file.

    A running `spotcron up` fires it again from its next tick (runs missed while paused are not
    made up). `spotcron deploy` then resumes its Cloud Scheduler entry.
    """
    _set_paused(job, jobs_dir, stack_path, False)


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
    the job at its next reload (seconds). On Google Cloud, `spotcron deploy` then deletes its
    scheduler entry.

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
    out = console()
    local = (state_dir / "bucket").is_dir()
    kept = state_dir / DELETED / path.name
    with context.open_blobs(None, state_dir) if local else _no_bucket() as blobs:
        runs = RunStore(blobs).run_ids(name) if blobs is not None else []
        flying = [run_id for job_name, run_id in RunStore(blobs).live_runs() if job_name == name] \
            if blobs is not None else []
        if delete_results and flying:
            raise SpotcronError(f"{name} has runs in flight ({', '.join(flying)}): deleting their results now "
                                f"would race their uploads; wait for them to end (`spotcron status`), then "
                                "delete again")
        out.print(f"[bold]spotcron delete[/] {name}:", highlight=False)
        out.print(f"  - delete its job file {path} (a copy is kept at {kept})", markup=False, highlight=False)
        if blobs is not None:
            out.print("  - delete its deployed spec in the local bucket: no tick or start message runs it any more",
                      markup=False)
            what = f"{len(runs)} run{'s' if len(runs) != 1 else ''} with their logs and results"
            out.print(f"  - delete its {what}" if delete_results else
                      f"  keep its {what} (--delete-results removes them)", markup=False)
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
        said += f"; {len(runs)} runs and their {removed} objects are gone"
    elif runs:
        said += f"; its {len(runs)} runs stay (`spotcron runs {name}`)"
    out.print(f"{said}. A running `spotcron up` drops it at its next reload; on Google Cloud, "
              "`spotcron deploy` deletes its scheduler entry.", markup=False, highlight=False)


def _no_bucket() -> Any:
    import contextlib

    return contextlib.nullcontext(None)


COMMANDS = [pause, resume, delete]
