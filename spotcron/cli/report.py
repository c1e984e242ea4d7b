"""`spotcron report JOB`: time and cost per matrix configuration, relative to a base, with charts."""

from __future__ import annotations

import json
from pathlib import Path

import click

from spotcron.cli._bucket import bucket_options, open_store
from spotcron.cli._common import console, find_job_file, jobs_option, load_stack, stack_option
from spotcron.cli.cost import (
    blobs_reader,
    folder_reader,
    history_option,
    load_table,
    prices_option,
    read_metrics,
    read_records,
    region_option,
)


@click.command("report")
@click.argument("job")
@click.option("--charts", "charts_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Write relative time and cost bar charts (PNG) into this folder.")
@bucket_options
@history_option
@prices_option
@region_option
@jobs_option
@stack_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def report(job: str, charts_dir: Path | None, bucket: str | None,
           state_dir: Path, history_dir: Path | None, prices: str | None, region: str | None, jobs_dir: Path,
           stack_path: Path, as_json: bool) -> None:
    """Compare the configurations of a matrix job: runs, median time and cost per run, and both
    relative to the base configuration (1.00x; the job file's benchmark.base, else its first matrix
    entry), from the job's run records: in the local bucket, in --bucket gs://NAME, or in a
    --history folder laid out like the bucket."""
    from spotcron.core.errors import SpotcronError
    from spotcron.core.loader import load_job_file
    from spotcron.present.report import benchmark_report, rich_tables

    settings = load_stack(stack_path)
    if history_dir is not None:
        records = [r for r in read_records(history_dir) if r.job == job]
        metrics = read_metrics(folder_reader(history_dir), records)
    else:
        with open_store(bucket, state_dir) as store:
            records = store.records(job)
            metrics = read_metrics(blobs_reader(store.blobs), records)
    job_file = None
    try:
        job_file = find_job_file(job, jobs_dir)
        spec = load_job_file(job_file, grace=settings.grace)
    except SpotcronError:
        if not records:
            raise
        spec = None  # the job file is gone, its records are not: report from them alone
    if spec is not None and spec.benchmark.time_metric is not None:
        _check_time_metric(f"{job_file}: benchmark.time_metric", job, spec.benchmark.time_metric, metrics)
    result = benchmark_report(job, records, load_table(prices), region or settings.region, spec=spec,
                              metrics=metrics)
    written = []
    if charts_dir is not None:
        from spotcron.present.charts import write_charts

        written = write_charts(result, charts_dir)
    if as_json:
        click.echo(json.dumps({**result.to_json(), "charts": [str(p) for p in written]}, indent=2))
        return
    out = console()
    for table in rich_tables(result):
        out.print(table)
    for path in written:
        out.print(f"chart: {path}")


def _check_time_metric(setting: str, job: str, name: str, metrics: dict[str, list[dict]]) -> None:
    """The time metric must name a number some run wrote; otherwise every time would be a dash."""
    from spotcron.core.catalog import suggest
    from spotcron.core.errors import SpotcronError

    docs = [doc for docs in metrics.values() for doc in docs]
    numbers = sorted({key for doc in docs for key, value in doc.items()
                      if isinstance(value, int | float) and not isinstance(value, bool)})
    if name in numbers:
        return
    where = f"{setting} {name!r}"
    if not docs:
        raise SpotcronError(f"{where}: no run of {job} wrote a metrics.json; remove the setting to use the "
                            "container time")
    hint = suggest(name, numbers)
    known = f"did you mean {hint!r}?" if hint else f"numbers there: {', '.join(numbers) or 'none'}"
    raise SpotcronError(f"{where}: no run of {job} has that number in its metrics.json; {known}")


COMMANDS = [report]
