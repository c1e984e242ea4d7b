"""The results page (index.html at the bucket root): a summary, recent runs per job, benchmark charts.

The summary (jobs, success rate over 7 and 30 days, spend this month, projected monthly cost)
comes from spotcron.present.summary. Each run shows its state, exit code and failure reason, and
links to its record, each attempt's logs and its results (the attempt's manifest.json).

One self-contained HTML document: inline CSS, charts inlined as data: URIs, no scripts, fonts or
other requests, and a Content-Security-Policy that forbids them, so it renders the same from
the bucket, from a download or from a file. Links are relative object paths
(runs/JOB/RUN/attempt-N/logs.txt), which resolve next to index.html in the bucket.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Any

from spotcron.core import layout
from spotcron.core.runs import RunRecord, RunState
from spotcron.cost.local_wait import work_cost_usd
from spotcron.present.notes import metrics_note
from spotcron.present.success import Tally
from spotcron.present.summary import PageSummary, ids_since, summarize, window_start
from spotcron.present.views import duration_text, format_usd, run_cost_text

log = logging.getLogger("spotcron.present")

DEFAULT_LIMIT = 20
SUMMARY_READS = 2000  # per job: the newest runs of the summary's window that `spotcron page` reads
# The run-end hook reads far fewer: it runs inside job_done after every run, where a read costs
# time the function is billed for. A summary from fewer runs says so on the page.
HOOK_SUMMARY_READS = 100

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 88em;
       padding: 0 1em; color: #1d1d1f; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
/* No table is wider than the screen and nothing in a cell spills out of it. Headers break at
   spaces; run ids and the names spotcron bounds (entries, machines, zones) at their hyphens, in
   a column wide enough for two lines; a figure never breaks; what a job wrote (reasons, metric
   names, hardware) breaks anywhere it must, so a token of 200 characters takes no more room. */
h1, h2, h3, h4, p, li, dd, figcaption { overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: .3em .4em; border-bottom: 1px solid #e3e3e3;
         overflow-wrap: anywhere; }
th { overflow-wrap: normal; } th.long { overflow-wrap: anywhere; }
td.num, th.num { text-align: right; }
td.num, td.when, td.zone, td.conf, .state, td.links a, .nowrap { white-space: nowrap; }
td:first-child { min-width: 8em; }
.state { font-weight: 600; }
.succeeded { color: #2b8a3e; } .failed, .timed_out, .lost { color: #c92a2a; }
.preempted, .skipped { color: #b8860b; } .scheduled, .starting, .running { color: #1864ab; } .queued { color: #862e9c; }
.meta { color: #666; } td.reason { min-width: 12em; } .warn { color: #b8860b; }
dl.summary { display: grid; grid-template-columns: max-content auto; gap: .2em 1.2em; }
dl.summary dt { color: #666; } dl.summary dd { margin: 0; font-weight: 600; }
figure { display: inline-block; margin: 1em 1em 0 0; max-width: 100%; }
figure img { max-width: 100%; height: auto; border: 1px solid #e3e3e3; }
/* Below 75em the columns said elsewhere go: a matrix job's configuration (its run ids end in it)
   and the count of attempts (the links name each attempt's logs); times and reasons take less
   room, and a benchmark's figure wraps at the space before its spread. */
@media (max-width: 75em) { table.runs.matrix .conf, table.runs .attempts { display: none; }
                           td.when { white-space: normal; }
                           td.reason { min-width: 8em; } table.bench td.num { white-space: normal; } }
/* A phone (390 px) or a tablet upright shows every table's rows as cards: a line per cell,
   labelled with its column, nothing wider than the screen, long text wrapped across the card. */
@media (max-width: 60em) {
  body { margin: 1em auto; }
  table.runs, table.bench, table.health { display: block; width: auto; }
  table.runs tbody, table.bench tbody, table.health tbody,
  table.runs tr, table.bench tr, table.health tr { display: block; }
  table.runs td, table.bench td, table.health td { display: block; width: auto; border: 0; padding: .05em 0;
                                                   text-align: left; }
  table.runs thead, table.bench thead, table.health thead { display: none; }
  table.runs tr, table.bench tr, table.health tr { border-bottom: 1px solid #e3e3e3; padding: .5em 0; }
  table.runs td::before, table.bench td::before, table.health td::before { color: #666; }
  table.bench td::before, table.health td::before { content: attr(data-label) ": "; }
  table.runs td:empty { display: none; }
  table.runs.matrix .conf, table.runs .attempts { display: block; }
  figure { display: block; margin: 1em 0 0; }
}
"""
RUN_HEADERS = ("run", "configuration", "state", "started (UTC)", "duration", "zone", "attempts", "cost", "exit",
               "reason", "links")


def _card_labels() -> str:
    """Each cell's header before it on a phone, by position (a matrix job's table has one column more)."""
    rules = []
    for matrix in (False, True):
        headers = [h for h in RUN_HEADERS if matrix or h != "configuration"]
        table = "table.runs.matrix" if matrix else "table.runs:not(.matrix)"
        rules += [f'{table} td:nth-child({n})::before {{ content: "{h}: "; }}' for n, h in enumerate(headers, 1)]
    return "@media (max-width: 60em) {\n" + "\n".join(rules) + "\n}\n"


_CSS += _card_labels()
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def render_index(records_by_job: Mapping[str, Sequence[RunRecord]], charts: Mapping[str, bytes] | None = None,
                 *, generated_at: datetime | None = None, limit: int = DEFAULT_LIMIT,
                 title: str = "spotcron runs", captions: Mapping[str, str] | None = None,
                 summary: PageSummary | None = None, totals: Mapping[str, int] | None = None,
                 sampled: int | None = None, tables: Mapping[str, str] | None = None,
                 missing: Collection[str] = frozenset(), removed: Collection[str] = frozenset(),
                 health: Sequence[Any] = ()) -> str:
    """The page: the `limit` most recent runs of each job, newest first, then the charts.

    `health`: each deployed job's schedule health (present/health.py), shown after the summary.

    `missing` names the logs objects not in the bucket (an attempt cancelled or lost before its
    runner wrote logs.txt): their rows say so instead of linking to nothing. `removed` names the
    jobs no longer deployed (their file was removed): their section says so; their runs stay.

    `captions` describes a chart in words (its alt text too); the file name stands in without one.
    `totals` counts each job's runs on record (the records given may be only the newest ones);
    `summary` defaults to one computed from the records given, as of `generated_at`. `tables`:
    each benchmark job's numeric table (HTML, from `benchmark_table`), shown beside its charts.
    """
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
    ]
    if generated_at is not None:
        stamp = generated_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        parts.append(f'<p class="meta">Updated {stamp}.</p>')
    if not records_by_job:
        parts.append("<p>No runs yet.</p>")
    else:
        if summary is None and generated_at is not None:
            summary = summarize(records_by_job, generated_at, totals=totals, sampled=sampled)
        if summary is not None:
            parts.append(_summary_section(summary))
    if health and generated_at is not None:
        parts.append(_health_section(health, generated_at))
    for job in sorted(records_by_job):
        parts.append(_job_section(job, records_by_job[job], limit, (totals or {}).get(job), missing, generated_at,
                                  removed=job in removed))
    if charts or tables:
        parts.append('<h2 id="charts">Benchmarks</h2>')
        parts.extend((tables or {}).values())
        for name in charts or {}:  # in the order they were drawn: relative time, cost, scatter, history
            data = base64.b64encode(charts[name]).decode("ascii")
            caption = (captions or {}).get(name, name)
            parts.append(f'<figure><img alt="{escape(caption)}" src="data:image/png;base64,{data}">'
                         f"<figcaption>{escape(caption)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def update_index(deps: Any, record: RunRecord | None = None, *, limit: int = DEFAULT_LIMIT,
                 charts: bool = True) -> str:
    """The engine's run-end hook: rewrite index.html from the bucket's newest records.

    `deps` is the engine's Deps (its store, blobs and clock are used). Matrix jobs get their
    relative time and cost charts, priced as their records say, when matplotlib is installed.
    Returns the page it wrote.
    """
    html, _ = build_page(deps.store, deps.clock.now(), deps.settings.region, limit=limit, charts=charts,
                         summary_reads=HOOK_SUMMARY_READS)
    deps.blobs.write(layout.INDEX_PAGE, html.encode("utf-8"), content_type="text/html; charset=utf-8")
    return html


def build_page(store: Any, now: datetime, region: str, *, limit: int = DEFAULT_LIMIT, charts: bool = True,
               summary_reads: int = SUMMARY_READS) -> tuple[str, dict[str, list[RunRecord]]]:
    """The page from the bucket's records as of `now`, and the records it shows per job."""
    records_by_job, totals, capped = page_records(store, now, limit, summary_reads)
    pngs: dict[str, bytes] = {}
    captions: dict[str, str] = {}
    if charts:
        pngs, captions, tables = _benchmark_charts(_benchmark_records(store, records_by_job, summary_reads), region)
    else:
        tables = {}
    shown = {job: shown_runs(records, limit) for job, records in records_by_job.items()}
    missing = absent_logs(store.blobs, [r for records in shown.values() for r in records])
    html = render_index(records_by_job, pngs, generated_at=now, limit=limit, captions=captions, totals=totals,
                        sampled=summary_reads if capped else None, tables=tables, missing=missing,
                        removed=removed_jobs(store.blobs, records_by_job),
                        health=schedule_health(store, records_by_job, now))
    return html, shown


def schedule_health(store: Any, records_by_job: Mapping[str, Sequence[RunRecord]], now: datetime) -> list[Any]:
    """Each deployed job's schedule health, from the records the page read."""
    from spotcron.engine.dispatch_specs import BucketSpecs
    from spotcron.present.health import job_health

    specs = BucketSpecs(store.blobs).current()
    return [job_health(spec, records_by_job.get(spec.name, ()), now) for spec in sorted(specs, key=lambda s: s.name)]


def _health_section(health: Sequence[Any], now: datetime) -> str:
    from spotcron.present.health import HEALTH_COLUMNS

    numeric = {"failing", "missed 7d", "late 7d"}
    kind = {c: ' class="num"' if c in numeric else "" for c in HEALTH_COLUMNS}
    head = "".join(f"<th{kind[c]}>{escape(c)}</th>" for c in HEALTH_COLUMNS)
    # Each cell carries its column's name: a phone shows the rows as cards, a labelled line a cell.
    rows = "".join("<tr>" + "".join(
        f'<td{kind[column]} data-label="{escape(column)}">{escape(cell)}</td>'
        for column, cell in zip(HEALTH_COLUMNS, h.cells(now), strict=True)) + "</tr>" for h in health)
    return ('<h2 id="health">Schedule health</h2>'
            f'<table class="health"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
            '<p class="meta">Missed: ticks due that never started within their starting_deadline; late: started '
            "more than a minute after the tick; both over the last 7 days. <code>spotcron status</code> shows the "
            "same.</p>")


def removed_jobs(blobs: Any, jobs: Collection[str]) -> set[str]:
    """The jobs with runs on record but no deployed spec: their file was removed and the stack
    deployed (or `up` reloaded) since. A bucket with no deployed specs at all marks none."""
    from spotcron.engine.deployed import SpecStore

    deployed = set(SpecStore(blobs).jobs())
    return {job for job in jobs if job not in deployed} if deployed else set()


def _benchmark_records(store: Any, records_by_job: Mapping[str, Sequence[RunRecord]],
                       reads: int) -> dict[str, list[RunRecord]]:
    """Matrix jobs' newest `reads` runs, whatever their age: benchmark history spans weeks,
    the summary's window does not. Records the page already read are not read again."""
    benchmarks = {}
    for job, known in records_by_job.items():
        if not any(r.variant for r in known):
            continue
        have = {r.run_id: r for r in known}
        wanted = store.run_ids(job)[-reads:]
        read = {run_id: have.get(run_id) or store.read(job, run_id) for run_id in wanted}
        benchmarks[job] = [r for r in read.values() if r is not None]
    return benchmarks


def page_records(store: Any, now: datetime, limit: int = DEFAULT_LIMIT, summary_reads: int = SUMMARY_READS
                 ) -> tuple[dict[str, list[RunRecord]], dict[str, int], bool]:
    """Per job: the records the page needs (its newest `limit`, and up to `summary_reads` of the
    summary's window), how many runs it has in all, and whether a window was cut to fit.
    One listing per job; a read per record needed."""
    records_by_job: dict[str, list[RunRecord]] = {}
    totals: dict[str, int] = {}
    capped = False
    since = window_start(now)
    for job in store.jobs():
        ids = store.run_ids(job)
        totals[job] = len(ids)
        window = ids_since(ids, since)
        capped = capped or len(window) > summary_reads
        wanted = dict.fromkeys(window[-summary_reads:] + ids[-limit:])
        records_by_job[job] = [r for r in (store.read(job, run_id) for run_id in wanted) if r is not None]
    return records_by_job, totals, capped


def _summary_section(summary: PageSummary) -> str:
    rows = [("jobs", f"{summary.jobs} ({summary.runs} runs on record)")]
    rows += [(f"succeeded, last {rate.days} days", rate.text()) for rate in summary.rates]
    rows.append((f"spent in {summary.month}", format_usd(summary.spent_this_month)))
    projected = format_usd(summary.projected_month)
    rows.append(("projected for the month", f"{projected} ({summary.projection_basis})"))
    items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in rows)
    sampled = (f"Rates and spend come from the newest {summary.sampled} runs of each job; "
               "<code>spotcron page</code> counts more. " if summary.sampled else "")
    return ('<h2 id="summary">Summary</h2>'
            f'<dl class="summary">{items}</dl>'
            f'<p class="meta">{sampled}Spend is what the run records priced: every attempt\'s VM and disk. '
            "The projection extrapolates the recent runs (manual ones too) and prices only their VMs and disks; "
            "<code>spotcron cost</code> projects the schedules and adds the rest. docs/cost.md, \"The results "
            "page's month and spotcron cost\", says why the two differ.</p>")


LONG_WORD = 14  # letters a header word may have before it may break anywhere


def benchmark_table(report: Any) -> str:
    """A benchmark report's numbers as the page shows them beside its charts: the comparison (the
    same cells as `spotcron report --format md`), then what each row ran on and its verdict."""
    from spotcron.present import exports

    per_unit = any(row.work_unit for row in report.rows)

    def header(text: str, numeric: bool) -> str:
        # A header naming a unit the job chose may hold a word too long for its column: it breaks.
        kinds = ["num"] * numeric + ["long"] * any(len(word) > LONG_WORD for word in text.split())
        return f'<th class="{" ".join(kinds)}">{escape(text)}</th>' if kinds else f"<th>{escape(text)}</th>"

    def table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric_from: int) -> str:
        head = "".join(header(h, i >= numeric_from) for i, h in enumerate(headers))
        # Each cell carries its column's name: a phone shows the rows as cards, a labelled line a cell.
        body = "\n".join("<tr>" + "".join(
            f'<td class="num" data-label="{escape(headers[i])}">{escape(c)}</td>' if i >= numeric_from
            else f'<td data-label="{escape(headers[i])}">{escape(c)}</td>' for i, c in enumerate(cells)) + "</tr>"
            for cells in rows)
        return f'<table class="bench"><thead><tr>{head}</tr></thead><tbody>\n{body}\n</tbody></table>'


    return (f'<h3 id="bench-{escape(report.job)}">{escape(exports.report_title(report))}</h3>'
            + table(exports.report_headers(report, per_unit=per_unit),
                    exports.report_cells(report, per_unit=per_unit), 2)
            + f'<p class="meta">{escape(exports.report_caption(report))}</p>'
            + table(exports.HARDWARE_HEADERS, exports.hardware_cells(report), 99)
            + f"<h4>{escape(exports.phase_title(report))}</h4>"
            + table(exports.PHASE_HEADERS, exports.phase_cells(report), 1)
            + f'<p class="meta">{escape(exports.phase_caption(report))}</p>'
            + (f"<h4>{escape(exports.comparison_title(report))}</h4>"
               + table(exports.comparison_headers(report), exports.comparison_cells(report), 2)
               + f'<p class="meta">{escape(exports.comparison_caption(report))}</p>'
               + "<ul>" + "".join(f"<li>{escape(line)}</li>" for line in exports.verdict_lines(report)) + "</ul>"
               if report.comparisons else "")
            + ('<ul class="warnings">' + "".join(f"<li>warning: {escape(line)}</li>" for line in report.warnings)
               + "</ul>" if report.warnings else ""))


def _benchmark_charts(records_by_job: Mapping[str, Sequence[RunRecord]],
                      region: str) -> tuple[dict[str, bytes], dict[str, str], dict[str, str]]:
    """Each matrix job's charts, their captions and its numeric table; the base is the one its
    run records carry. One job's figures (its jobs wrote them) never cost another job its page."""
    from spotcron.present.history import benchmark_history
    from spotcron.present.report import benchmark_report

    pngs: dict[str, bytes] = {}
    captions: dict[str, str] = {}
    tables: dict[str, str] = {}
    try:
        from spotcron.present.charts import chart_captions, chart_pngs
    except ImportError:  # matplotlib is optional where the page is written: the numbers still show
        chart_captions = chart_pngs = None
    for job, records in records_by_job.items():
        if not any(r.variant for r in records):
            continue
        try:
            report = benchmark_report(job, records, None, region)
            tables[job] = benchmark_table(report)
            if chart_pngs is None or chart_captions is None:
                continue
            # The history is every round's, even where the comparison keeps only the latest.
            pooled = report if report.rounds == "every round" else benchmark_report(job, records, None, region,
                                                                                     pool_rounds=True)
            history = benchmark_history(pooled, records)
            drawn = chart_pngs(report, history)
            named = chart_captions(report, history)
        except ImportError:
            chart_pngs = None
            continue
        except Exception:  # noqa: BLE001 - one job's figures must not cost every job its page
            log.warning("page: the figures of %s could not be drawn; the page goes on without them", job,
                        exc_info=True)
            continue
        pngs.update(drawn)
        captions.update(named)
    return pngs, captions, tables


def _job_section(job: str, records: Sequence[RunRecord], limit: int, total: int | None = None,
                 missing: Collection[str] = frozenset(), now: datetime | None = None, removed: bool = False) -> str:
    recent = shown_runs(records, limit)
    total = max(total if total is not None else 0, len(records))
    tally = Tally.of(recent)
    aside = f" ({tally.aside()}, not counted)" if tally.aside() else ""
    shown_cost = sum(work_cost_usd(r) or 0.0 for r in recent)
    matrix = any(r.variant for r in recent)  # a configuration column only for matrix jobs
    rows = "\n".join(_run_row(r, matrix, missing, now) for r in recent)
    configuration = '<th class="conf">configuration</th>' if matrix else ""
    table_class = "runs matrix" if matrix else "runs"
    gone = ' <span class="meta">(removed: no longer deployed; its runs and results stay)</span>' if removed else ""
    shown = f"all {total} runs" if len(recent) == total else f"the {len(recent)} most recent of {total} runs"
    return (
        f'<h2 id="job-{escape(job)}">{escape(job)}{gone}</h2>'
        f'<p class="meta">Showing {shown}; of these, {tally.succeeded} of {tally.ran} runs that ran succeeded{aside}; '
        f"they cost {format_usd(shown_cost)}.</p>"
        f'<table class="{table_class}"><thead><tr><th>run</th>{configuration}<th>state</th><th>started (UTC)</th>'
        '<th class="num">duration</th><th>zone</th><th class="num attempts">attempts</th><th class="num">cost</th>'
        '<th class="num">exit</th><th>reason</th><th>links</th>'
        f"</tr></thead><tbody>\n{rows}\n</tbody></table>"
    )


def _run_row(record: RunRecord, matrix: bool, missing: Collection[str] = frozenset(),
             now: datetime | None = None) -> str:
    cells = [
        _run_id_cell(record.run_id),
        escape(record.variant or ""),
        f'<span class="state {escape(record.state)}">{escape(record.state.replace("_", " "))}</span>',
        escape(record.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")),
        escape(duration_text(record, now)),  # the CLI's figure
        _zone_cell(record),
        str(len(record.attempts)),
        run_cost_text(record),
        str(record.exit_code) if record.exit_code is not None else "-",
        _reason_cell(record),
        " ".join(_links(record, missing)),
    ]
    classes = ["", "conf", "", "when", "num", "", "num attempts", "num", "num", "reason", "links"]
    if not matrix:
        del cells[1], classes[1]
    return "<tr>" + "".join(v if v.startswith("<td") else f'<td class="{c}">{v}</td>' if c else f"<td>{v}</td>"
                            for c, v in zip(classes, cells, strict=True)) + "</tr>"


def _run_id_cell(run_id: str) -> str:
    """The run id in two unbreakable halves, its tick and its matrix entry: it wraps on two lines
    at most, between them, never inside a date or a name."""
    from spotcron.core.runs import tick_of

    tick = tick_of(run_id)
    rest = run_id[len(tick):]
    if not rest:
        return escape(run_id)  # a tick alone: nothing to break it at
    return f'<span class="nowrap">{escape(tick)}-</span><wbr><span class="nowrap">{escape(rest[1:])}</span>'


def _reason_cell(record: RunRecord) -> str:
    """Why a run ended as it did; for one that succeeded, every problem of its metrics.json."""
    if record.state != RunState.SUCCEEDED:
        return escape(record.reason or "")
    problems = metrics_note(record)
    return f'<span class="warn">{escape(problems)}</span>' if problems else ""


def _zone_cell(record: RunRecord) -> str:
    """The zone of the run's latest attempt; hovering it shows why placement chose it."""
    attempt = record.current_attempt
    zone = escape(attempt.zone) if attempt is not None and attempt.zone else "-"
    if record.placement is None:
        return f'<td class="zone">{zone}</td>'
    return f'<td class="zone" title="{escape(record.placement.why, quote=True)}">{zone}</td>'


def run_links(record: RunRecord) -> list[tuple[str, str]]:
    """(object name, label) of what a run's row links to: its record, each attempt's logs, its results."""
    links = [(layout.run_record(record.job, record.run_id), "record")]
    for attempt in record.attempts:
        if attempt.created_at is None:
            continue  # no VM, no logs
        label = "logs" if len(record.attempts) == 1 else f"logs {attempt.number}"
        links.append((layout.logs(record.job, record.run_id, attempt.number), label))
    # A failed or timed-out run keeps its results too; a run whose container never ran has none.
    if record.state in (RunState.SUCCEEDED, RunState.FAILED, RunState.TIMED_OUT) and any(a.started_at for a in record.attempts):
        number = _result_attempt(record)
        if number is not None:
            links.append((layout.manifest(record.job, record.run_id, number), "results"))
    return links


def shown_runs(records: Sequence[RunRecord], limit: int = DEFAULT_LIMIT) -> list[RunRecord]:
    """The rows of a job's table: its `limit` newest runs, newest first."""
    return sorted(records, key=lambda r: r.created_at, reverse=True)[:limit]


def _links(record: RunRecord, missing: Collection[str] = frozenset()) -> list[str]:
    return [_link(name, label) if name not in missing else _no_logs(record, label, _parts(missing, name))
            for name, label in run_links(record)]


def _parts(missing: Collection[str], name: str) -> list[str]:
    """The live log parts shipped in place of `name` (absent_logs maps each missing logs.txt to them)."""
    return list(missing.get(name) or ()) if isinstance(missing, Mapping) else []


def _no_logs(record: RunRecord, label: str, parts: Sequence[str] = ()) -> str:
    """In place of a logs link whose object was never written: the live parts the attempt shipped
    while it ran (a run cancelled or lost part way keeps what it printed), else a note."""
    command = f"spotcron logs {escape(record.job)}/{escape(record.run_id)}"
    if parts:
        links = " ".join(f'<a href="{escape(part, quote=True)}">{number}</a>' for number, part in enumerate(parts, 1))
        return (f'<span title="logs.txt was never written; the output shipped while it ran is in these parts, '
                f'in order; {command} prints them as one">{escape(label.replace("logs", "partial logs"))}: '
                f"{links}</span>")
    text = label.replace("logs", "no logs" if record.terminal else "no logs yet")
    why = ("the attempt ended before its runner wrote logs.txt" if record.terminal
           else "logs.txt is written when the attempt ends")
    return f'<span class="meta" title="{why}; {command} shows what was shipped">{escape(text)}</span>'


def absent_logs(blobs: Any, records: Sequence[RunRecord]) -> dict[str, list[str]]:
    """The logs objects the rows of `records` would link to that are not in the bucket, each with
    the live log parts its attempt shipped instead (in order; none when it printed nothing).

    A succeeded run's logs are in its manifest, so only other runs are looked at, each attempt with
    bounded listings (the attempt's token may write any number of names in its folder): one name
    for logs.txt, one page of its logs/ folder when logs.txt is not there (log_parts).
    """
    from spotcron.engine.log_parts import first_parts

    missing: dict[str, list[str]] = {}
    for record in records:
        if record.state == RunState.SUCCEEDED:
            continue
        for name, label in run_links(record):
            if not label.startswith("logs"):
                continue
            if blobs.list_some(name, 1) == [name]:
                continue
            missing[name] = first_parts(blobs, name.removesuffix(".txt") + "/", MAX_PART_LINKS)
    return missing


MAX_PART_LINKS = 50  # a long run cut off ships a part per 5 s: the page links the first ones


def _result_attempt(record: RunRecord) -> int | None:
    """The attempt whose folder holds the results: named by results_prefix, else the last one."""
    if record.results_prefix:
        for attempt in record.attempts:
            if record.results_prefix.startswith(layout.attempt_prefix(record.job, record.run_id, attempt.number)):
                return attempt.number
    return record.attempts[-1].number if record.attempts else None


def _link(path: str, label: str) -> str:
    return f'<a href="{escape(path, quote=True)}">{escape(label)}</a>'


