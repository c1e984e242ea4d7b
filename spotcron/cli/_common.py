"""What every command shares: the --jobs/--stack options, settings, and a rich console.

Entry-point code: this is where the environment is read (click's envvar fallbacks and
`os.environ` for settings), so the library below never has to.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # imported lazily: rich and pydantic cost start-up time
    from rich.console import Console

    from spotcron.core.settings import Settings
    from spotcron.core.spec import JobSpec

JOBS_ENV = "SPOTCRON_JOBS"
STACK_ENV = "SPOTCRON_STACK"
DEFAULT_JOBS = "jobs"
DEFAULT_STACK = "infra/stack.yaml"


def jobs_option(function: Any) -> Any:
    """`--jobs DIR` (env SPOTCRON_JOBS, default jobs): the directory of job files."""
    return click.option(
        "--jobs", "jobs_dir", type=click.Path(path_type=Path, file_okay=False), default=DEFAULT_JOBS,
        envvar=JOBS_ENV, show_default=True, show_envvar=True, help="Directory of job files (*.yaml).",
    )(function)


def stack_option(function: Any) -> Any:
    """`--stack PATH` (env SPOTCRON_STACK, default infra/stack.yaml): deployment settings."""
    return click.option(
        "--stack", "stack_path", type=click.Path(path_type=Path, dir_okay=False), default=DEFAULT_STACK,
        envvar=STACK_ENV, show_default=True, show_envvar=True,
        help="Deployment settings; every value can also come from SPOTCRON_<NAME>.",
    )(function)


def console(*, stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def line_console(*, stderr: bool = False) -> Console:
    """A console for line-by-line output (a plan, checks): in a pipe or a file each line stays one
    line, however long, so names and commands in it can be copied and grepped; a terminal wraps."""
    out = console(stderr=stderr)
    out.soft_wrap = not out.is_terminal
    return out


def load_stack(stack_path: Path) -> Settings:
    """infra/stack.yaml (defaults when missing) with SPOTCRON_* overrides from the environment."""
    from spotcron.core.settings import load_settings

    return load_settings(stack_path, os.environ)


def load_specs(paths: list[Path], stack_path: Path) -> list[JobSpec]:
    """Every job under `paths`, checked against the stack's grace and retention; ConfigError lists all problems."""
    from spotcron.core.loader import load_jobs

    settings = load_stack(stack_path)
    return load_jobs(paths, grace=settings.grace, retention_days=settings.results_retention_days)


def find_job_file(job_or_file: str, jobs_dir: Path) -> Path:
    """A job file given as a path, or as a job name looked up in `jobs_dir`."""
    from spotcron.core.catalog import suggest
    from spotcron.core.errors import SpotcronError
    from spotcron.core.loader import job_files

    path = Path(job_or_file)
    if path.is_file():
        return path
    if path.suffix in (".yaml", ".yml") or "/" in job_or_file:
        raise SpotcronError(f"{job_or_file}: no such job file")
    for suffix in (".yaml", ".yml"):
        candidate = jobs_dir / f"{job_or_file}{suffix}"
        if candidate.is_file():
            return candidate
    if not jobs_dir.is_dir():
        raise SpotcronError(f"no job named {job_or_file!r}: there is no {jobs_dir}/ folder here; `spotcron init` "
                            f"starts one, or point --jobs (SPOTCRON_JOBS) at yours")
    names = [p.stem for p in job_files([jobs_dir])[0]]
    hint = suggest(job_or_file, names)
    known = f"did you mean {hint!r}?" if hint else (f"jobs there: {', '.join(names)}" if names else "it has no jobs")
    raise SpotcronError(f"no job named {job_or_file!r} in {jobs_dir}/; {known}")


def repository_root(jobs_dir: Path) -> Path:
    """The folder that holds jobs/: where build contexts are relative to, and `local.command` runs from."""
    return jobs_dir.resolve().parent


def given(name: str) -> bool:
    """Whether the user typed option `name` (the click parameter name) on the command line;
    values from the environment or defaults do not count."""
    from click.core import ParameterSource

    return click.get_current_context().get_parameter_source(name) == ParameterSource.COMMANDLINE


def goes_with(option: str, other: str, why: str) -> Exception:
    """The error for an option that would be ignored without `other`."""
    from spotcron.core.errors import SpotcronError

    flag = other.split()[0]
    return SpotcronError(f"{option} goes with {other}: {why}; add {flag} or leave {option} out")
