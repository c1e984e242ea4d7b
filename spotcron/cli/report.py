"""`spotcron report JOB`: time and cost per matrix configuration relative to the base, with their
spread and interval; `--history` for each configuration per tick; tables, Markdown, CSV, JSON, PNG."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from spotcron.cli._bucket import bucket_options, open_store
from spotcron.cli._common import console, find_job_file, jobs_option, load_stack, stack_option
from spotcron.cli.cost import load_table, prices_option, region_option

# In a pipe or a file the report's tables are laid out for this width (split by columns beyond it).
REPORT_PAGE_WIDTH = 100

if TYPE_CHECKING:
    from spotcron.core.runs import RunRecord
    from spotcron.cost.prices import PriceTable


@click.command("report")
@click.argument("job")
@click.option("--format", "fmt", type=click.Choice(["table", "md", "csv", "csv-runs", "json"]), default="table",
              show_default=True, help="Terminal table, Markdown, CSV (a line per configuration), csv-runs (a line "
                                      "per run: time, cost, work, hardware) or JSON (both, and the verdicts).")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--history", "show_history", is_flag=True,
              help="Each configuration's median time and cost per tick, with a flag where the latest tick "
                   "left the band of the earlier ones.")
@click.option("--charts", "charts_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Write the charts (PNG) into this folder: relative time and cost, cost against time, history.")
@click.option("--tick", "tick", default=None, metavar="TICK",
              help="Report one round: 'latest', or a tick as --history prints it (e.g. '2026-11-23 03:00').")
@click.option("--since", "since", type=click.DateTime(formats=["%Y-%m-%d", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M"]),
              default=None, help="Report the rounds from this UTC day or minute on (2026-11-01, '2026-11-01 03:00').")
@click.option("--all-rounds", "all_rounds", is_flag=True,
              help="Pool every round even where rounds disagree beyond their spread (by default the report then "
                   "keeps the latest round and says which disagree).")
@click.option("--detail", "detail", is_flag=True,
              help="Also the median of every metric the runs' metrics.json reported (a table per configuration "
                   "of a matrix job) and a line per run not measured; by default the report is a summary and says "
                   "how to see these. CSV and JSON always hold every figure.")
@click.option("--records", "records_dir", type=click.Path(path_type=Path, exists=True, file_okay=False),
              default=None, help="Read run records from a folder laid out like the bucket (runs/JOB/RUN/run.json).")
@bucket_options
@prices_option
@region_option
@jobs_option
@stack_option
def report(job: str, fmt: str, as_json: bool, show_history: bool, charts_dir: Path | None, tick: str | None,
           since, all_rounds: bool, detail: bool, records_dir: Path | None, bucket: str | None, state_dir: Path, prices: str | None,
           region: str | None, jobs_dir: Path, stack_path: Path) -> None:
    """Compare the configurations of a matrix job over its runs (every repeat of every round, unless
    rounds disagree or --tick/--since choose): runs, median and spread of time, cost (the VM's
    life) and the cost of the measured work, the phases of a run, and time and cost relative to the
    base configuration (the job file's benchmark.base, else its first matrix entry) with an exact
    rank interval whose confidence is stated (3 runs a side give 90%, 4 or more 95%). Each metric
    of benchmark.compare gets its own comparison. Run records come from the local bucket,
    --bucket gs://NAME or a --records folder.

    \b
    Examples:
      spotcron report dl-benchmark
      spotcron report dl-benchmark --detail
      spotcron report dl-benchmark --tick latest --format md
      spotcron report dl-benchmark --since 2026-11-01 --charts out/"""
    from spotcron.core.errors import SpotcronError
    from spotcron.core.loader import load_job_file
    from spotcron.present.formats import render_report
    from spotcron.present.history import benchmark_history
    from spotcron.present.records import blobs_reader, folder_reader, read_records
    from spotcron.present.report import benchmark_report

    fmt = "json" if as_json else fmt
    settings = load_stack(stack_path)
    if records_dir is not None:
        records = [r for r in read_records(records_dir) if r.job == job]
        records = with_metrics(records, folder_reader(records_dir))
    else:
        with open_store(bucket, state_dir) as store:
            records = with_metrics(store.records(job), blobs_reader(store.blobs))
    job_file = None
    try:
        job_file = find_job_file(job, jobs_dir)
        spec = load_job_file(job_file, grace=settings.grace)
    except SpotcronError:
        if not records:
            raise
        spec = None  # the job file is gone, its records are not: report from them alone
    if spec is not None and spec.benchmark.time_metric is not None:
        _check_time_metric(f"{job_file}: benchmark.time_metric", job, spec.benchmark.time_metric, records)
    if since is not None:
        from datetime import UTC

        since = since.replace(tzinfo=UTC)
    table = load_table(prices)
    where = region or settings.region
    result = benchmark_report(job, records, table, where, spec=spec, tick=tick, since=since,
                              pool_rounds=all_rounds or show_history)
    unpriced = unpriced_lines(records, table)
    history = None
    if show_history or charts_dir is not None:
        # The history is every round's (within --since), even where the comparison keeps one.
        pooled = result if result.rounds == "every round" or tick is not None else \
            benchmark_report(job, records, table, where, spec=spec, since=since, pool_rounds=True)
        history = benchmark_history(pooled, records)
    written = []
    if charts_dir is not None:
        from spotcron.present.charts import write_charts

        written = write_charts(result, charts_dir, history)
    charts = [str(p) for p in written]
    rendered = render_report(result, fmt, history=history if show_history else None, charts=charts, detail=detail)
    if isinstance(rendered, str):
        click.echo(rendered, nl=False)
        for line in unpriced:
            click.echo(line, err=True)  # the text stays what its format says; the note goes beside it
    else:
        rendered.lines.extend(unpriced)
        from spotcron.present.tables import print_whole

        out = console()
        for number, renderable in enumerate(rendered.renderables):
            if number:
                out.print()  # a caption ends one table; a blank line before the next one's title
            print_whole(out, renderable, page_width=REPORT_PAGE_WIDTH)
        if rendered.lines and rendered.lines[0] and not out.is_terminal:
            out.out("")  # the lines after the tables start a paragraph of their own
        for line in rendered.lines:
            if out.is_terminal:
                out.print(line, markup=False, highlight=False)
                continue
            # A pipe or a file: the page's width, a wrapped line indented under its start.
            import textwrap

            for part in textwrap.wrap(line, REPORT_PAGE_WIDTH, subsequent_indent="  ", break_on_hyphens=False) or [""]:
                out.print(part, markup=False, highlight=False, soft_wrap=True)
    if fmt in ("table", "md"):
        for path in charts:
            click.echo(f"chart: {path}", err=fmt == "md")  # keeps the Markdown on stdout clean


def unpriced_lines(records: list[RunRecord], table: PriceTable) -> list[str]:
    """A line per configuration whose machine `table` cannot price: its cost shows `-`."""
    from spotcron.cost.billing import unpriced_reason

    reasons: dict[str, str] = {}
    for record in records:
        why = unpriced_reason(record, table)
        if why is not None:
            reasons.setdefault(record.variant or record.job, why)
    return [f"not priced: {name}: its cost is -, {why}" for name, why in sorted(reasons.items())]


def with_metrics(records: list[RunRecord], read: Callable[[str], bytes | None]) -> list[RunRecord]:
    """Records from before the run end checked metrics.json, with it checked now, the same way."""
    from spotcron.core import layout
    from spotcron.core.jobdata import JobDataProblem, problem_text
    from spotcron.core.metrics import METRICS_FILE, MetricsProblem, parse_metrics
    from spotcron.core.runs import RunState

    checked = []
    for record in records:
        if record.state == RunState.SUCCEEDED and record.metrics is None and record.metrics_problem is None \
                and record.attempts:
            number = record.attempts[-1].number
            where = f"results/{METRICS_FILE} of attempt {number}"
            try:
                data = read(layout.results_prefix(record.job, record.run_id, number) + METRICS_FILE)
                if data is not None:
                    record = record.model_copy(update={"metrics": parse_metrics(data, where)})
            except (MetricsProblem, JobDataProblem) as problem:
                record = record.model_copy(update={"metrics_problem": problem_text(problem)})
        checked.append(record)
    return checked


def _check_time_metric(setting: str, job: str, name: str, records: list[RunRecord]) -> None:
    """The time metric must name a metric some run wrote; otherwise every time would be a dash."""
    from spotcron.core.catalog import suggest
    from spotcron.core.errors import SpotcronError
    from spotcron.core.runs import RunState

    written = [r.metrics for r in records if r.metrics is not None]
    names = sorted({key for metrics in written for key in metrics.metrics})
    if name in names or not [r for r in records if r.state == RunState.SUCCEEDED]:
        return
    where = f"{setting} {name!r}"
    if not written:
        raise SpotcronError(f"{where}: no run of {job} wrote a usable metrics.json; remove the setting to use the "
                            "container time, or see the runs' metrics problems (spotcron runs --json)")
    hint = suggest(name, names)
    known = f"did you mean {hint!r}?" if hint else f"metrics there: {', '.join(names) or 'none'}"
    raise SpotcronError(f"{where}: no run of {job} has that metric in its metrics.json; {known}")


COMMANDS = [report]
