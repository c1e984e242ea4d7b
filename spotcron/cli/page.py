"""`spotcron page`: where the results page is, built fresh for the local bucket; --open opens it.

A deployed stack's page lives in its bucket (index.html at the root; its links are object names
next to it): the command draws it there from the bucket's records, then prints its Cloud Storage
URL. Nothing draws it when a run ends: presentation stays off the functions' path. The local bucket is served by a process
that needs a token, which a browser does not have, so the page is built from the local records
into a folder of plain files: index.html plus a copy of every object its rows link to (records,
logs, manifests), streamed piece by piece. A copy of an ended run is kept and not fetched again.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from spotcron.cli._bucket import bucket_options, describe, open_store, runs_context
from spotcron.cli._common import given
from spotcron.core.errors import SpotcronError

if TYPE_CHECKING:
    from spotcron.engine.ports import Blobs

CONSOLE_URL = "https://storage.cloud.google.com/{bucket}/{name}"  # opens with the browser's Google login
COPY_PIECE = 8 << 20


@click.command("page")
@click.option("--open", "open_page", is_flag=True, help="Open the page in the default browser too.")
@click.option("-n", "--limit", default=20, show_default=True, type=click.IntRange(min=1),
              help="Runs listed per job (the summary counts them all).")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Locally: the folder to build the page in (default: STATE_DIR/page).")
@bucket_options
def page(open_page: bool, limit: int, out_dir: Path | None, bucket: str | None, state_dir: Path) -> None:
    """Print where the results page is (a path, or a URL for --bucket); --open opens it.

    The page starts with a summary (jobs, success rate over 7 and 30 days, spend this month,
    projected monthly cost), then each job's recent runs with exit code, failure reason and links
    to their record, logs and results, then the benchmark charts.

    \b
    Examples:
      spotcron page --open
      spotcron page --bucket gs://my-project-spotcron
    """
    context = runs_context()
    if bucket:
        if given("out_dir"):
            raise SpotcronError("--out goes without --bucket: the deployed page is drawn into its bucket; leave "
                                "--out out, or build a local page without --bucket")
        target = _deployed_page(bucket, state_dir, limit)
    else:
        target = _local_page(state_dir, out_dir or Path(state_dir) / "page", limit)
    click.echo(target)
    if open_page and not context.has_display():
        click.echo(f"no display to open a browser on here; open {target} where you have one", err=True)
    elif open_page:
        context.launch(target if "://" in target else Path(target).resolve().as_uri())


def _deployed_page(bucket: str, state_dir: Path, limit: int) -> str:
    from spotcron.core import layout
    from spotcron.local.stack import local_settings
    from spotcron.present.page import build_page

    where = describe(bucket, state_dir)
    # Records carry their own cost; the region only prices a record that has none.
    region = local_settings("http://127.0.0.1/").region
    with open_store(bucket, state_dir) as store:
        html, _ = build_page(store, runs_context().now(), region, limit=limit)
        store.blobs.write(layout.INDEX_PAGE, html.encode("utf-8"), content_type="text/html; charset=utf-8")
    return CONSOLE_URL.format(bucket=where.removeprefix("gs://"), name=layout.INDEX_PAGE)


def _local_page(state_dir: Path, out: Path, limit: int) -> str:
    from spotcron.core import layout
    from spotcron.local.stack import local_settings
    from spotcron.present.page import build_page, run_links

    now = runs_context().now()
    region = local_settings("http://127.0.0.1/").region
    with open_store(None, state_dir) as store:
        html, shown = build_page(store, now, region, limit=limit)
        out.mkdir(parents=True, exist_ok=True)
        for records in shown.values():
            for record in records:
                for name, _ in run_links(record):
                    _copy(store.blobs, name, out, keep=record.terminal)  # an ended run's objects are final
    index = out / layout.INDEX_PAGE
    index.write_text(html, encoding="utf-8")
    return str(index)


def _copy(blobs: Blobs, name: str, out: Path, *, keep: bool) -> None:
    """Copy object `name` to out/NAME in pieces; with `keep`, a copy already there is final.

    An object not written (yet) is left out: its link will not resolve until it is.
    """
    from spotcron.core.errors import EncodedObject
    from spotcron.present.views import safe_relative

    target = out / safe_relative(name)
    if keep and target.is_file():
        return
    partial = target.with_name(target.name + ".partial")
    partial.parent.mkdir(parents=True, exist_ok=True)
    offset, exists = 0, True
    with open(partial, "wb") as handle:
        while True:
            try:
                piece = blobs.read_range(name, offset, COPY_PIECE)
            except EncodedObject as problem:
                # A job uploaded it compressed: the link shows why instead, and the page is written.
                handle.seek(0)
                handle.truncate()
                handle.write(f"spotcron: not copied: {problem}\n".encode())
                break
            if piece is None:
                exists = offset > 0
                break
            if not piece:
                break
            handle.write(piece)
            offset += len(piece)
    if exists:
        partial.replace(target)
    else:
        partial.unlink()


COMMANDS = [page]
