"""spotcron logs and spotcron results: a run's container output and the files it wrote."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from spotcron.cli._bucket import bucket_options, describe, open_store, resolve, runs_context, stdout
from spotcron.cli._common import console, given, goes_with

DOWNLOAD_PIECE = 8 << 20  # bytes per ranged read of a result file with --download or --cat
# Objects listed at most for a run without a manifest: the attempt's token writes any number of
# names in its results folder, and the command lists ten pages, not all of them.
RESULTS_LISTED = 10_000

if TYPE_CHECKING:
    from spotcron.core.runs import RunRecord
    from spotcron.engine.ports import Blobs
    from spotcron.present.views import ResultFile




def run_ref(words: tuple[str, ...]) -> str:
    """RUN as typed: one word (JOB/RUN, a bare id), or the runs table's job and run columns pasted."""
    from spotcron.core.errors import SpotcronError

    if len(words) > 2:
        raise SpotcronError(f"{' '.join(words)!r} is not a run; write JOB/RUN, or paste the job and run columns "
                            "of `spotcron runs`")
    return " ".join(words)


# --- spotcron logs -----------------------------------------------------------------------------


@click.command("logs")
@click.argument("run", nargs=-1, required=True)
@click.option("--job", help="The job of a bare run id, when several jobs have one of that name.")
@click.option("--attempt", type=click.IntRange(min=1), help="Show this attempt (default: the latest).")
@click.option("-f", "--follow", is_flag=True, help="Keep printing new output until the run has ended.")
@click.option("--interval", default=2.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between polls with --follow.")
@click.option("-t", "--timestamps", is_flag=True,
              help="Begin each line with when it reached the bucket (UTC; the runner ships every 5 s, 1 s locally).")
@click.option("--raw", is_flag=True,
              help="Print the output exactly as the job wrote it, terminal escape sequences (colours, "
                   "links, cursor moves) included; by default every control character but newline and "
                   "tab is shown as its escape (\\x1b).")
@bucket_options
def logs(run: tuple[str, ...], job: str | None, attempt: int | None, follow: bool, interval: float,
         timestamps: bool, raw: bool, bucket: str | None, state_dir: Path) -> None:
    """Print a run's container output (logs.txt of its latest attempt).

    RUN is JOB/RUN or a bare run id, as `spotcron runs` lists them; the table's job and run
    columns copied together (`dl-benchmark/t4 20261122-1000-t4`) name a run too, a job's name
    alone names its latest run, and JOB/ENTRY its matrix entry's latest run. While the job runs, the
    runner ships its new output every few seconds; with --follow, output is printed as it
    reaches the bucket, attempt after attempt, until the run ends.

    The output is the job's own, so it is shown as text: every control character but newline and
    tab (ESC, and with it colours, links, screen clears and clipboard writes) prints as its escape,
    `\\x1b`, on a terminal and in a pipe alike. --raw prints the output as the job wrote it.

    \b
    Examples:
      spotcron logs hello-bot/20261122-1000
      spotcron logs hello-bot                       # its latest run
      spotcron logs dl-benchmark/t4                 # matrix entry t4's latest run
      spotcron logs 20261122-1000 --attempt 1
      spotcron logs hello-bot/20261122-1000 --follow
      spotcron logs hello-bot/20261122-1000 --timestamps
      spotcron logs hello-bot --raw                 # with the job's own colours and escapes
    """
    from spotcron.core import layout
    from spotcron.core.errors import SpotcronError
    from spotcron.present.logs import RunOutput
    from spotcron.present.neutral import line_text
    from spotcron.present.views import pick_attempt

    if not follow and given("interval"):
        raise goes_with("--interval", "--follow", "without it the logs are read once")
    run = run_ref(run)
    where = describe(bucket, state_dir)
    if follow:
        _follow(run, job, attempt, interval, bucket, state_dir, timestamps, raw)
        return
    with open_store(bucket, state_dir) as store:
        record = resolve(store, run, job, where)
        number = pick_attempt(record, attempt)
        name = layout.logs(record.job, record.run_id, number)
        output = RunOutput(record.job, record.run_id, attempt=number, timestamps=timestamps, raw=raw)
        # --raw: click would strip some escapes in a pipe (CSI only); raw means none stripped.
        click.echo(output.poll(store.blobs, record), nl=False, color=raw or None)
        if output.printed_any:
            click.echo(output.finish(), nl=False, color=raw or None)
            return
        if store.blobs.read_range(name, 0, 1) is not None:
            return  # an empty log
    if record.terminal:
        ended = record.state + (f": {line_text(record.reason)}" if record.reason else "")
        raise SpotcronError(f"no logs for {record.job}/{record.run_id} attempt {number} ({name} does not "
                            f"exist); the run ended {ended}")
    raise SpotcronError(f"no logs yet for {record.job}/{record.run_id} attempt {number}: the run is "
                        f"{record.state} and none of its output has reached the bucket; add --follow "
                        f"to wait")


def _follow(ref: str, job: str | None, attempt: int | None, interval: float, bucket: str | None,
            state_dir: Path, timestamps: bool, raw: bool) -> None:
    from spotcron.engine.store import RunStore
    from spotcron.present.follow import ended_line, follow_run
    from spotcron.present.logs import RunOutput

    context = runs_context()
    where = describe(bucket, state_dir)
    err = console(stderr=True)
    # One bucket for every poll: each read goes to the bucket (or the local storage server's
    # files), so what the runner writes later is seen.
    with err.status(f"following {ref} in {where}…") as spinner, context.open_blobs(bucket, state_dir) as blobs:
        store = RunStore(blobs)
        found = resolve(store, ref, job, where)
        output = RunOutput(found.job, found.run_id, attempt=attempt, timestamps=timestamps, raw=raw,
                           notice=lambda text: err.print(f"[dim]{text}[/dim]"))
        record = follow_run(store.read, blobs, output, where=where,
                            write=lambda text: click.echo(text, nl=False, color=raw or None),
                            sleep=lambda: context.sleep(interval), waiting=spinner.update)
    err.print(ended_line(output, record), markup=False)  # a reason may quote a job


# --- spotcron results --------------------------------------------------------------------------


@click.command("results")
@click.argument("run", nargs=-1, required=True)
@click.option("--job", help="The job of a bare run id, when several jobs have one of that name.")
@click.option("--attempt", type=click.IntRange(min=1),
              help="Use this attempt (default: the one that succeeded, else the latest).")
@click.option("--download", "download_dir", type=click.Path(path_type=Path, file_okay=False),
              help="Write the files into DIR, keeping their relative paths (checked against the manifest).")
@click.option("--force", is_flag=True,
              help="With --download: write into a folder that holds other files, without asking.")
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
@click.option("--cat", "cat_name", metavar="FILE",
              help="Print one file's bytes to stdout (a name the listing shows), checked against the manifest.")
@bucket_options
def results(run: tuple[str, ...], job: str | None, attempt: int | None, download_dir: Path | None, force: bool,
            as_json: bool, cat_name: str | None, bucket: str | None, state_dir: Path) -> None:
    """List (and download) the files a run wrote to /results.

    The list comes from the attempt's manifest.json (name, size, sha256), which the runner writes
    last; without one, the upload did not complete and the objects found are listed instead. A
    skipped run never ran its job: it says so and why, and lists nothing (no upload is expected).
    --download into a folder that holds files the run did not write asks first (or needs --force).
    RUN is named as for `spotcron logs`: JOB/RUN, a bare run id, JOB (its latest run) or
    JOB/ENTRY (that matrix entry's latest run).

    \b
    Examples:
      spotcron results hello-bot/20261122-1000
      spotcron results hello-bot                    # its latest run
      spotcron results dl-benchmark/t4              # matrix entry t4's latest run
      spotcron results 20261122-1000-t4 --download ./out
      spotcron results hello-bot/20261122-1000 --cat answer.json | jq .
    """
    from spotcron.core import layout
    from spotcron.present.views import RESULT_COLUMNS, ResultFile, manifest_files, pick_attempt, results_json

    if force and download_dir is None:
        raise goes_with("--force", "--download DIR", "nothing is written without it")
    if cat_name is not None and (download_dir is not None or as_json):
        from spotcron.core.errors import SpotcronError

        raise SpotcronError("--cat prints one file: leave out --download and --json")
    run = run_ref(run)
    where = describe(bucket, state_dir)
    with open_store(bucket, state_dir) as store:
        record = resolve(store, run, job, where)
        if attempt is None and (never := _never_ran(record)):
            # A skipped run never ran its job (this host lacks its GPU, its tick came too late, a
            # concurrency policy): no upload is expected, and "did not complete" would read as a fault.
            if cat_name is not None:
                from spotcron.core.errors import SpotcronError

                raise SpotcronError(f"{never}; it has no {cat_name}")
            if as_json:
                click.echo(results_json([], record.state, layout.run_prefix(record.job, record.run_id)))
            else:
                stdout().print(never, markup=False, highlight=False, soft_wrap=True)
            return
        number = attempt or _results_attempt(record) or pick_attempt(record, None)
        if attempt:
            pick_attempt(record, attempt)
        prefix = layout.results_prefix(record.job, record.run_id, number)
        manifest_name = layout.manifest(record.job, record.run_id, number)
        from spotcron.core.errors import SpotcronError
        from spotcron.core.jobdata import MANIFEST_MAX_BYTES, JobDataProblem
        from spotcron.engine.results import read_capped

        try:  # never a whole hostile file, never inflated
            manifest = read_capped(store.blobs, manifest_name, MANIFEST_MAX_BYTES, manifest_name)
        except JobDataProblem as problem:
            raise SpotcronError(f"{problem}; the upload may be corrupt or rewritten by the job") from None
        if manifest is not None:
            files, source = manifest_files(manifest, manifest_name), "manifest"
        else:
            names = store.blobs.list_some(prefix, RESULTS_LISTED + 1)
            files = [ResultFile(name[len(prefix):]) for name in names[:RESULTS_LISTED]]
            source = "listing"
            if len(names) > RESULTS_LISTED:
                console(stderr=True).print(
                    f"only the first {RESULTS_LISTED:,} objects under {prefix} are listed (and downloaded with "
                    f"--download): the folder holds more, and without a manifest nothing says which are results",
                    markup=False, highlight=False, soft_wrap=True)
        if cat_name is not None:
            _cat(store.blobs, prefix, files, cat_name, f"{record.job}/{record.run_id}", number)
            return
        if download_dir is not None and not force:
            _check_destination(download_dir, files)
        written = _download(store.blobs, prefix, files, download_dir) if download_dir is not None else None
    if as_json:
        click.echo(results_json(files, source, prefix))
        return
    out = stdout()
    label = f"{record.job}/{record.run_id} attempt {number} ({record.state})"
    if source == "listing":
        from rich.markup import escape

        from spotcron.present.neutral import line_text

        cut = (f"it was cancelled before its upload completed ({line_text(record.reason)})"
               if record.state == "cancelled" and record.reason else "the upload did not complete")
        out.print(f"[yellow]no manifest[/yellow] for {escape(label)}: {escape(cut)}; objects under {prefix}:", soft_wrap=True)
    else:
        out.print(f"results of {label}, from {manifest_name}:")
    if not files:
        out.print("no files")
    else:
        from spotcron.present.tables import Columns, print_table

        print_table(out, Columns(RESULT_COLUMNS, ("sha256", "size"), frozenset({"size"})),
                    [file.cells() for file in files])
    if written is not None:
        from spotcron.present.views import format_size

        out.print(f"downloaded {len(files)} file{'s' if len(files) != 1 else ''} ({format_size(written)}) "
                  f"to {download_dir}")


def _never_ran(record: RunRecord) -> str | None:
    """What to say for a run that ended without running its job (so without results), else None."""
    from spotcron.core.runs import RunState

    if record.state not in (RunState.SKIPPED, RunState.MISSED):
        return None  # a skipped run never ran its job, with or without a VM (transitions.verdict)
    from spotcron.present.neutral import line_text

    why = f": {line_text(record.reason)}" if record.reason else ""
    return (f"no results for {record.job}/{record.run_id}: it was {record.state}{why}. Its job never ran, "
            "so no upload is expected.")


def _results_attempt(record: RunRecord) -> int | None:
    """The attempt named by the record's results_prefix (`runs/JOB/RUN/attempt-N/`)."""
    prefix = (record.results_prefix or "").rstrip("/")
    tail = prefix.rsplit("/", 1)[-1]
    return int(tail.removeprefix("attempt-")) if tail.startswith("attempt-") and tail[8:].isdigit() else None


def _check_destination(dest: Path, files: list[ResultFile]) -> None:
    """A folder holding anything the run would not write is someone's: ask before writing there."""
    from spotcron.core.errors import SpotcronError

    if not dest.is_dir():
        if dest.exists():
            raise SpotcronError(f"--download {dest}: not a folder; give a folder to write the files into")
        return
    ours = {name.split("/", 1)[0] for name in (f.name for f in files)}
    others = sorted(entry.name for entry in dest.iterdir() if entry.name not in ours)
    if not others:
        return
    listed = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
    if runs_context().interactive():
        count = f"{len(files)} file{'s' if len(files) != 1 else ''}"
        if click.confirm(f"Write {count} into {dest}, beside {listed}?", default=False, err=True):
            return
        raise SpotcronError(f"--download {dest}: nothing written")
    raise SpotcronError(f"--download {dest}: the folder already holds files this run did not write ({listed}); "
                        "download into a new or empty folder, or pass --force to write beside them")


def _cat(blobs: Blobs, prefix: str, files: list[ResultFile], name: str, run: str, number: int) -> None:
    """Stream results file `name` to stdout in pieces; a sha256 that differs from the manifest's
    is an error (after the bytes, which are already out)."""
    import hashlib

    from spotcron.core.catalog import suggest
    from spotcron.core.errors import SpotcronError

    name = name.removeprefix("results/").lstrip("/")
    listed = {file.name: file for file in files}
    if name not in listed:
        hint = suggest(name, list(listed))
        known = f"did you mean {hint!r}? " if hint else ""
        raise SpotcronError(f"{run} attempt {number} wrote no results/{name}; {known}(`spotcron results {run}` "
                            "lists its files)")
    sys.stdout.flush()  # text already written goes first
    out = sys.stdout.buffer
    digest, offset = hashlib.sha256(), 0
    while piece := blobs.read_range(prefix + name, offset, DOWNLOAD_PIECE):
        out.write(piece)
        digest.update(piece)
        offset += len(piece)
    out.flush()
    expected = listed[name].sha256
    if expected and digest.hexdigest() != expected:
        raise SpotcronError(f"{prefix}{name}: sha256 is {digest.hexdigest()}, the manifest says {expected}")


def _download(blobs: Blobs, prefix: str, files: list[ResultFile], dest: Path) -> int:
    """Write every file under `dest`; nothing is written unless every name stays inside `dest` and no
    name is both a file and a folder. Each file is read, hashed and written in pieces of
    DOWNLOAD_PIECE bytes: memory stays one piece whatever size a job's file has."""
    import hashlib

    from spotcron.core.errors import EncodedObject, SpotcronError
    from spotcron.present.views import safe_relative

    root = dest.resolve()
    targets = []
    names = {safe_relative(file.name).as_posix(): file.name for file in files}
    for file in files:
        relative = safe_relative(file.name)
        for parent in relative.parents:
            if parent.as_posix() in names and parent.as_posix() != ".":
                raise SpotcronError(f"refusing to download: the manifest names {names[parent.as_posix()]!r} as a "
                                    f"file and as the folder of {file.name!r}; nothing written")
        target = (root / relative).resolve()
        if not target.is_relative_to(root):  # a symlink inside dest pointing elsewhere
            raise SpotcronError(f"refusing to download {file.name!r}: {target} is outside {root}")
        if target.is_dir():
            raise SpotcronError(f"refusing to download {file.name!r}: {target} is a folder; nothing written")
        targets.append(target)
    total = 0
    for file, target in zip(files, targets, strict=True):
        object_name = prefix + file.name
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        digest, offset = hashlib.sha256(), 0
        try:
            with open(partial, "wb") as handle:
                while piece := blobs.read_range(object_name, offset, DOWNLOAD_PIECE):
                    digest.update(piece)
                    handle.write(piece)
                    offset += len(piece)
                if offset == 0 and blobs.read_range(object_name, 0, 1) is None:
                    raise SpotcronError(f"the manifest lists {file.name!r} but {object_name} does not exist")
            if file.sha256 and digest.hexdigest() != file.sha256:
                raise SpotcronError(f"{object_name}: sha256 is {digest.hexdigest()}, the manifest says "
                                    f"{file.sha256}; not written")
            partial.replace(target)
        except EncodedObject as problem:
            raise SpotcronError(f"{problem}; not written") from None
        finally:
            partial.unlink(missing_ok=True)
        total += offset
    return total
