"""What the results commands share: where the bucket comes from, run lookup and the outside world.

The outside world (bucket opener, clock, sleep, Compute Engine, Pub/Sub, the local stack) comes
from a `RunsContext` in click's `ctx.obj`; tests pass their own, `spotcron` itself the defaults.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from spotcron.cli._common import console

if TYPE_CHECKING:
    from spotcron.core.runs import RunRecord
    from spotcron.engine.ports import Blobs, Compute
    from spotcron.engine.store import RunStore

BUCKET_ENV = "SPOTCRON_BUCKET"
STATE_DIR_ENV = "SPOTCRON_STATE_DIR"
PROJECT_ENV = "SPOTCRON_PROJECT"
DEFAULT_STATE_DIR = ".spotcron"
PIPE_WIDTH = 200


@contextlib.contextmanager
def open_bucket(bucket: str | None, state_dir: Path) -> Iterator[Blobs]:
    """The results bucket: `gs://NAME` on Google Cloud, else the local one under `state_dir`.

    The one place that tells the two apart; every command opens its bucket through
    RunsContext.open_blobs, which defaults to this."""
    if bucket:
        from spotcron.gcp.storage import GcsBlobs

        yield GcsBlobs(bucket_name(bucket))
        return
    from spotcron.local.blobs import open_local_bucket

    with open_local_bucket(state_dir) as blobs:
        yield blobs


def bucket_name(bucket: str) -> str:
    """NAME of `--bucket gs://NAME` (or NAME); SpotcronError for anything that names no bucket."""
    from spotcron.core.errors import SpotcronError

    name = bucket.removeprefix("gs://").strip("/")
    if not name or "/" in name:
        raise SpotcronError(f"--bucket {bucket!r} is not a bucket; write gs://NAME")
    return name


def _google_compute(project: str) -> Compute:
    from spotcron.gcp.compute import GoogleCompute

    return GoogleCompute(project)


def _publisher(emulator_host: str | None) -> Any:
    from spotcron.gcp.pubsub import default_publisher, emulator_publisher

    return emulator_publisher(emulator_host) if emulator_host else default_publisher()


def _hand_off(state_dir: Path, payload: dict[str, Any]) -> list[tuple[str, str]] | None:
    from spotcron.local.handoff import hand_off

    return hand_off(state_dir, payload)


def _handed_records(state_dir: Path, runs: list[tuple[str, str]]) -> list[Any]:
    from spotcron.local.handoff import read_records

    return read_records(state_dir, runs)


def _local_stack(state_dir: Path, limits: Any = None) -> Any:
    import os

    from spotcron.cli._common import console
    from spotcron.local.stack import LocalStack

    err = console(stderr=True)
    return LocalStack(state_dir, environ=os.environ, limits=limits,
                      notify=lambda line: err.print(line, markup=False, highlight=False, soft_wrap=True))


def has_display(environ: Any = None, platform: str | None = None) -> bool:
    """Whether a browser can open here: macOS and Windows always; elsewhere an X or Wayland display."""
    import os

    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if platform == "darwin" or platform.startswith("win"):
        return True
    return bool(environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"))


def _launch(url: str) -> None:
    """Open `url` in the user's browser; the opener's own complaints stay off the terminal."""
    import os
    import subprocess

    if sys.platform.startswith("linux"):
        try:
            with open(os.devnull, "wb") as null:
                subprocess.Popen(["xdg-open", url], stdout=null, stderr=null, start_new_session=True)
        except OSError as exc:
            click.echo(f"could not start a browser ({exc.strerror}); open {url} yourself", err=True)
        return
    click.launch(url)


def _builder(settings: Any) -> Any:
    from spotcron.cli.deploy import DeployContext

    deploy = DeployContext()
    return deploy.builder(settings, deploy.credentials(settings.project))


@dataclass
class RunsContext:
    """Everything these commands touch outside the process; swap any part in tests."""

    open_blobs: Callable[[str | None, Path], AbstractContextManager[Blobs]] = open_bucket
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    sleep: Callable[[float], None] = time.sleep
    compute: Callable[[str], Compute] = _google_compute
    publisher: Callable[[str | None], Any] = _publisher  # emulator host or None → PublisherClient
    local_stack: Callable[..., Any] = _local_stack  # (state_dir, limits) → an unstarted LocalStack
    hand_off: Callable[[Path, dict[str, Any]], list[tuple[str, str]] | None] = _hand_off  # to a running `up`
    handed_records: Callable[[Path, list[tuple[str, str]]], list[Any]] = _handed_records  # asked of that `up`
    interactive: Callable[[], bool] = field(default=lambda: sys.stdin.isatty())  # may we ask a question?
    launch: Callable[[str], Any] = _launch  # open a URL in the user's browser
    has_display: Callable[[], bool] = has_display  # is there a screen for that browser?
    builder: Callable[[Any], Any] = _builder  # settings → the image builder (deploy.builds.Builder)


def runs_context() -> RunsContext:
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


def stdout() -> Any:
    """stdout console; piped output is not cut to 80 columns (scripts grep whole rows)."""
    out = console()
    if not out.is_terminal:
        out.width = max(out.width, PIPE_WIDTH)
    return out


def describe(bucket: str | None, state_dir: Path) -> str:
    if bucket:
        return bucket if bucket.startswith("gs://") else f"gs://{bucket}"
    return f"the local bucket ({Path(state_dir) / 'bucket'})"


@contextlib.contextmanager
def open_store(bucket: str | None, state_dir: Path) -> Iterator[RunStore]:
    from spotcron.engine.store import RunStore

    with runs_context().open_blobs(bucket, state_dir) as blobs:
        yield RunStore(blobs)


def all_run_ids(store: RunStore) -> list[tuple[str, str]]:
    """(job, run_id) of every run, job by job: folder listings (runs/, then each job's), so no
    job's result files are listed, and one job's count costs the others nothing."""
    return [(job, run_id) for job in store.jobs() for run_id in store.run_ids(job)]


def unknown_job(job: str, store: RunStore, where: str) -> Exception:
    from spotcron.core.catalog import suggest
    from spotcron.core.errors import SpotcronError

    jobs = sorted(store.jobs())
    hint = suggest(job, jobs)
    known = (f"did you mean {hint!r}?" if hint else
             f"jobs with runs: {', '.join(jobs)}" if jobs else "it has no runs yet")
    return SpotcronError(f"no runs of job {job!r} in {where}; {known}")


def unknown_variant(job: str, variant: str, variants: list[str], where: str) -> Exception:
    from spotcron.core.catalog import suggest
    from spotcron.core.errors import SpotcronError

    what = f"no runs of {job}/{variant} in {where}"
    if not variants:
        return SpotcronError(f"{what}: job {job} has no matrix; write `spotcron runs {job}`")
    hint = suggest(variant, variants)
    known = f"did you mean {hint!r}?" if hint else f"its entries: {', '.join(variants)}"
    return SpotcronError(f"{what}: job {job} has no matrix entry {variant!r} with runs; {known}")


def resolve(store: RunStore, ref: str, job: str | None, where: str) -> RunRecord:
    """The record that `ref` (JOB/RUN or a bare run id, with an optional --job) names."""
    from spotcron.core.errors import SpotcronError
    from spotcron.present.views import parse_run_ref, pick_match

    ref_job, run_id = parse_run_ref(ref, job)
    if ref_job is None:
        matches = [j for j, r in all_run_ids(store) if r == run_id]
        if not matches and (latest := _latest_run_of(store, run_id)) is not None:
            return latest  # a job's name alone: its latest run, as `kubectl logs job/NAME` does
        ref_job = pick_match(run_id, matches, where)
    record = store.read(ref_job, run_id)
    if record is None:
        if ref_job not in store.jobs():
            raise unknown_job(ref_job, store, where)
        if (latest := _latest_run_of(store, ref_job, run_id)) is not None:
            return latest  # JOB/ENTRY: that matrix entry's latest run, as `spotcron runs JOB/ENTRY` lists it
        if not _looks_like_run_id(run_id):
            raise unknown_variant(ref_job, run_id, matrix_entries(store, ref_job), where)
        raise SpotcronError(f"no run {ref_job}/{run_id} in {where}; `spotcron runs {ref_job}` lists its runs")
    return record


def _latest_run_of(store: RunStore, job: str, variant: str | None = None) -> RunRecord | None:
    """The newest run of `job`, or of its matrix entry `variant` (None when there is none), named
    on stderr so that the output says which run it is."""
    from spotcron.core.runs import of_variant

    run_ids = store.run_ids(job) if "/" not in job else []
    if variant is not None:
        run_ids = [run_id for run_id in run_ids if of_variant(run_id, variant)]
    record = None
    for run_id in reversed(run_ids[-3:]):  # the id says the entry; the record says it exactly
        found = store.read(job, run_id)
        if found is not None and (variant is None or found.variant == variant):
            record = found
            break
    if record is not None:
        name = f"{job}/{variant}" if variant else job
        console(stderr=True).print(f"{name}: its latest run, {job}/{record.run_id} ({record.state}); "
                                   f"name a run to see another (`spotcron runs {name}` lists them)",
                                   markup=False, highlight=False, soft_wrap=True)
    return record


def _looks_like_run_id(text: str) -> bool:
    """Whether `text` has a run id's shape (YYYYMMDD-HHMM…, or m… for a manual run) rather than an entry's."""
    import re

    return re.match(r"m?\d{8}-\d{4}", text) is not None


def matrix_entries(store: RunStore, job: str) -> list[str]:
    """The matrix entries a job's runs were of, from its newest records (one read per run, 50 at most)."""
    from spotcron.present.views import newest_ids

    seen: dict[str, None] = {}
    for job_name, run_id in newest_ids([(job, r) for r in store.run_ids(job)], 50):
        record = store.read(job_name, run_id)
        if record is not None and record.variant:
            seen[record.variant] = None
    return sorted(seen)


def print_runs_table(out: Any, records: list[RunRecord], now: datetime) -> None:
    from spotcron.present.tables import Columns, print_table
    from spotcron.present.views import DROP_ORDER, RUN_COLUMNS, run_row

    rows = [run_row(record, now) for record in records]
    print_table(out, Columns(RUN_COLUMNS, DROP_ORDER, frozenset({"attempts", "cost", "exit"}),
                                  squeeze=frozenset({"reason"})),
                [row.cells() for row in rows], styles=[{"status": row.status_style} for row in rows])
