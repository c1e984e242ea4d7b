"""The results page: self-contained HTML, recent runs with links, charts inlined; opened in Chromium."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from spotcron.core.runs import Attempt, RunRecord
from spotcron.cost.prices import load_prices
from spotcron.present.charts import chart_pngs
from spotcron.present.page import render_index, update_index
from spotcron.present.report import benchmark_report

T0 = datetime(2026, 11, 22, 8, 0, tzinfo=UTC)
BAR_COLOURS = {(0x2B, 0x8A, 0x3E), (0xC9, 0x2A, 0x2A), (0x55, 0x55, 0x55)}  # charts.py's bar colours


def run(job: str, hour: int, state: str = "succeeded", *, attempts: int = 1, variant: str | None = None,
        cost: float | None = 0.000231, reason: str | None = None) -> RunRecord:
    start = T0 + timedelta(hours=hour)
    run_id = f"{start:%Y%m%d-%H%M}" + (f"-{variant}" if variant else "")
    tries = tuple(
        Attempt(number=n, vm_name=f"sc-{job}-a{n}", machine_type="n1-standard-1", created_at=start,
                started_at=start + timedelta(seconds=30), finished_at=start + timedelta(seconds=95),
                deleted_at=start + timedelta(seconds=100))
        for n in range(1, attempts + 1)
    )
    prefix = f"runs/{job}/{run_id}/attempt-{attempts}/" if state == "succeeded" else None
    return RunRecord(job=job, run_id=run_id, variant=variant, state=state, reason=reason, created_at=start,
                     updated_at=start, attempts=tries, cost_usd=cost, results_prefix=prefix)


def bench_records() -> list[RunRecord]:
    """Three configurations, three repeats a week for six weeks; cpu's last week is a regression."""
    seconds = {"cpu": 600, "gpu": 200, "e2": 600}
    records = []
    for week in range(6):
        for variant, base in seconds.items():
            for repeat in (1, 2, 3):
                work = base * (1.4 if variant == "cpu" and week == 5 else 1) + 7 * repeat + 5 * (week % 3)
                record = run("bench", week * 168, variant=variant, cost=None)
                attempt = record.attempts[0]
                records.append(record.model_copy(update={
                    "run_id": f"{record.run_id}-r{repeat}", "repeat": repeat, "tick": record.created_at,
                    "attempts": (attempt.model_copy(update={
                        "machine_type": {"cpu": "n1-highcpu-16", "gpu": "n1-standard-8", "e2": "e2-standard-4"}[variant],
                        "gpu": "nvidia-tesla-t4 x1" if variant == "gpu" else None,
                        "finished_at": attempt.started_at + timedelta(seconds=work),
                        "deleted_at": attempt.started_at + timedelta(seconds=work + 20)}),)}))
    return records


@pytest.fixture(scope="module")
def charts():
    from spotcron.present.history import benchmark_history

    records = bench_records()
    report = benchmark_report("bench", records, load_prices(), "us-central1", pool_rounds=True)
    return chart_pngs(report, benchmark_history(report, records))


@pytest.fixture(scope="module")
def records_by_job():
    bot = [run("hello-bot", h) for h in range(25)]
    bot.append(run("hello-bot", 30, "preempted", attempts=2, reason="<script>alert(1)</script>"))
    bot.append(run("hello-bot", 31, "running", cost=None))
    return {"hello-bot": bot, "bench": [run("bench", 0, variant="cpu"), run("bench", 1, "failed", variant="gpu")]}


def test_page_lists_recent_runs_newest_first_with_links(records_by_job, charts):
    html = render_index(records_by_job, charts, generated_at=T0 + timedelta(days=2))
    assert html.startswith("<!DOCTYPE html>")
    assert "Updated 2026-11-24 08:00 UTC." in html
    bot = html[html.index('id="job-hello-bot"'):]
    run_ids = re.findall(r"<tr><td>(\d{8}-\d{4}[^<]*)</td>", bot)
    assert run_ids[:3] == ["20261123-1500", "20261123-1400", "20261123-0800"]
    assert len(run_ids) == 20  # the default limit
    assert "Showing the 20 most recent of 27 runs; of these, 18 of 19 runs that ran succeeded" in html
    assert '<a href="runs/hello-bot/20261123-0800/attempt-1/logs.txt">logs</a>' in html
    assert '<a href="runs/hello-bot/20261123-0800/attempt-1/manifest.json">results</a>' in html
    assert '<a href="runs/hello-bot/20261123-0800/run.json">record</a>' in html
    # Two attempts: a log link each; a preempted run has no results link.
    assert 'attempt-1/logs.txt">logs 1</a> <a href="runs/hello-bot/20261123-1400/attempt-2/logs.txt">logs 2</a>' in html
    assert "runs/hello-bot/20261123-1400/attempt-2/manifest.json" not in html
    assert '<span class="state succeeded">succeeded</span>' in html
    assert '<td class="num">1m05s</td>' in html  # container time
    assert '<td class="num">$0.00023</td>' in html
    assert '<td class="conf">gpu</td>' in html  # matrix entries show their configuration
    assert '<th class="conf">configuration</th>' in html[:html.index('id="job-hello-bot"')]
    assert '<th class="conf">configuration</th>' not in bot  # a plain job has none


def test_page_is_self_contained_and_escapes_what_runs_report(records_by_job, charts):
    html = render_index(records_by_job, charts)
    assert "<script" not in html and "http://" not in html and "https://" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "default-src 'none'; img-src data:" in html
    images = re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([^"]+)">', html)
    assert sorted(name for name, _ in images) == sorted(charts)
    for name, data in images:
        assert base64.b64decode(data) == charts[name]


def test_page_without_runs_or_charts():
    html = render_index({}, {})
    assert "No runs yet." in html and "Benchmarks" not in html and "Updated" not in html


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="no chromium binary on PATH (CI installs it)")
def test_page_renders_in_headless_chromium(records_by_job, charts, tmp_path):
    import numpy as np
    from matplotlib.image import imread

    page = tmp_path / "index.html"
    page.write_text(render_index(records_by_job, charts, generated_at=T0))
    url = page.as_uri()

    def chromium(*args: str) -> subprocess.CompletedProcess:
        profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
        return subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args, url],
                              capture_output=True, text=True, timeout=120, check=False)

    dom = chromium("--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert dom.stdout.count('<span class="state ') == 22  # 20 hello-bot rows + 2 bench rows
    assert "20261123-1500" in dom.stdout and "logs.txt" in dom.stdout
    # Relative time and cost with error bars, cost against time with the frontier, the history.
    assert dom.stdout.count("data:image/png;base64,") == len(charts) == 5
    assert list(charts) == ["bench-relative-time.png", "bench-relative-cost.png", "bench-cost-vs-time.png",
                            "bench-phases.png", "bench-history.png"]

    shot = tmp_path / "shot.png"
    result = chromium("--hide-scrollbars", "--window-size=1280,3200", f"--screenshot={shot}")
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    assert shot.stat().st_size > 20_000
    pixels = (imread(shot)[:, :, :3] * 255).round().astype(int)
    assert pixels.std() > 10  # not a blank page

    def count(colour: tuple[int, int, int]) -> int:
        return int(np.all(np.abs(pixels - np.array(colour)) <= 3, axis=-1).sum())

    # The charts' solid bars are there: thousands of pixels in their exact colours (the base in
    # grey, gpu faster in green, e2 no different from cpu within the spread in light grey).
    assert sum(count(colour) for colour in BAR_COLOURS) > 3000
    assert count((0xAD, 0xB5, 0xBD)) > 500
    # The frontier's points and line, and the red ring on cpu's regressed last week.
    assert count((0x18, 0x64, 0xAB)) > 100
    assert count((0xC9, 0x2A, 0x2A)) > 50


class _Deps:
    """What update_index uses of the engine's Deps: store, blobs, clock, settings."""

    def __init__(self):
        from spotcron.core.settings import Settings
        from spotcron.engine.store import RunStore
        from spotcron.testing.memory import FakeClock, MemoryBlobs

        self.clock = FakeClock(T0 + timedelta(days=1))
        self.blobs = MemoryBlobs(clock=self.clock)
        self.store = RunStore(self.blobs)
        self.settings = Settings()


def test_update_index_writes_the_page_with_charts_for_matrix_jobs():
    from spotcron.core import layout

    deps = _Deps()
    cpu = run("bench", 0, variant="cpu", cost=0.01)
    gpu = run("bench", 0, variant="gpu", cost=0.004)
    for rec in [run("hello-bot", h) for h in range(3)] + [cpu, gpu]:
        deps.store.create(rec)
    html = update_index(deps, gpu, limit=2)
    blob = deps.blobs.read(layout.INDEX_PAGE)
    assert blob.data.decode() == html and blob.content_type == "text/html; charset=utf-8"
    assert "Updated 2026-11-23 08:00 UTC." in html
    assert "20261122-1000" in html and "20261122-0900" in html and "20261122-0800</td>" not in html
    # Charts from the costs the records stored: gpu costs 0.4x of cpu.
    assert "bench: cost per run relative to cpu (1.00x): cpu 1.00x, gpu 0.40x</figcaption>" in html
    assert "bench: time per run relative to cpu (1.00x)" in html
    assert render_index({}, {}) != html


def test_engine_cost_function_bills_until_the_run_ended_and_never_raises():
    from spotcron.cost.billing import cost_function

    cost = cost_function("recipe-2018", "us-central1")
    live = run("hello-bot", 0)
    live = live.model_copy(update={
        "attempts": (live.attempts[0].model_copy(update={"deleted_at": None}),),
        "updated_at": live.attempts[0].created_at + timedelta(seconds=120)})
    total, items, unpriced = cost(live)
    assert unpriced is None
    assert items["compute"] == pytest.approx(0.01 * 120 / 3600)
    assert total == pytest.approx(sum(items.values()))
    odd = live.model_copy(update={"attempts": (live.attempts[0].model_copy(update={"machine_type": "z9-mega"}),)})
    assert cost(odd) == (None, {}, "price table recipe-2018 has no price for machine type 'z9-mega' (add it under "
                                   "machines: in a --prices file, see docs/cost.md)")


def test_a_price_file_that_does_not_load_costs_nothing_and_fails_no_run(tmp_path):
    from spotcron.cost.billing import cost_function

    broken = tmp_path / "prices.yaml"
    broken.write_text("machines: [not, a, mapping\n")
    cost = cost_function(str(broken), "us-central1")  # nothing is read until a run ends
    total, items, why = cost(run("hello-bot", 0))
    assert (total, items) == (None, {}) and why.startswith(f"{broken}:")


def _bench_records(spec, seconds: dict[str, int]) -> list[RunRecord]:
    """One run per matrix entry, carrying its resolved spec the way launch stores it."""
    records = []
    for variant in spec.variants():
        record = run("dl-benchmark", 0, variant=variant.variant, cost=None)
        attempt = record.attempts[0].model_copy(update={
            "machine_type": variant.machine.type,
            "finished_at": record.attempts[0].started_at + timedelta(seconds=seconds[variant.variant]),
            "deleted_at": record.attempts[0].started_at + timedelta(seconds=seconds[variant.variant] + 20)})
        records.append(record.model_copy(update={"attempts": (attempt,), "spec": variant.to_payload()}))
    return records


@pytest.mark.parametrize("base_line, base", [("", "highcpu-16"), ("benchmark: {base: t4}\n", "t4")])
def test_page_charts_compare_with_the_same_base_as_the_report(tmp_path, base_line, base):
    """The page has only run records, the report has the job file: both must use the job's base."""
    from spotcron.core.loader import load_job_file
    from spotcron.present.charts import chart_caption

    path = tmp_path / "dl-benchmark.yaml"
    path.write_text("schedule: '0 3 * * 1'\nimage: bench:1\n" + base_line +
                    "matrix:\n  - {name: highcpu-16, machine: {type: n1-highcpu-16}}\n"
                    "  - {name: e2-std-4, machine: {type: e2-standard-4}}\n"
                    "  - {name: t4, machine: {type: n1-standard-8}}\n")
    spec = load_job_file(path)
    records = _bench_records(spec, {"highcpu-16": 500, "e2-std-4": 1300, "t4": 190})
    deps = _Deps()
    for record in records:
        deps.store.create(record)
    html = update_index(deps)

    report = benchmark_report("dl-benchmark", records, load_prices(), "us-central1", spec=spec)
    assert report.base == base
    caption = chart_caption(report, "time")
    assert f"time per run relative to {base} (1.00x)" in caption
    # The page's chart shows the report's figures, not those of another base.
    figures = caption.split(": ", 2)[2].split(", ")
    shown = re.search(r"<figcaption>dl-benchmark: time per run relative to (\S+) \(1.00x\): ([^<]*)</figcaption>",
                      html)
    assert shown is not None and shown[1] == base
    assert sorted(shown[2].split(", ")) == sorted(figures)


def test_the_page_shows_the_numbers_and_what_ran_beside_the_charts(tmp_path):
    from spotcron.core.hardware import Hardware
    from spotcron.core.loader import load_job_file

    path = tmp_path / "dl-benchmark.yaml"
    path.write_text("schedule: '0 3 * * 1'\nimage: bench:1\n"
                    "matrix:\n  - {name: highcpu-16, machine: {type: n1-highcpu-16}}\n"
                    "  - {name: t4, machine: {type: n1-standard-8}}\n")
    spec = load_job_file(path)
    laptop = Hardware(local=True, host="laptop", cpu_model="AMD EPYC 9454", cpus=2, memory_mib=7900)
    records = [r.model_copy(update={"hardware": laptop})
               for r in _bench_records(spec, {"highcpu-16": 500, "t4": 190})]
    deps = _Deps()
    for record in records:
        deps.store.create(record)
    html = update_index(deps)
    section = html[html.index('<h2 id="charts">'):]
    assert ("<h3 id=\"bench-dl-benchmark\">dl-benchmark: per configuration, relative to highcpu-16 (local runs "
            "on the host &quot;laptop&quot;: machine types were priced, not measured)</h3>") in section
    assert "<th>hardware (measured by the runner)</th>" in section
    assert '<td data-label="hardware (measured by the runner)">local laptop: 2 CPU AMD EPYC 9454, 8 GiB, no GPU</td>' \
        in section  # each cell labelled with its column: a phone shows the rows as cards
    # Local runs: the verdict is the entries' runs on this host, never a machine type faster.
    assert ('<td data-label="verdict">measured on local host laptop, not on the machine types: the t4 entry&#x27;s runs '
            'took 0.38x the time of the highcpu-16 entry&#x27;s (under 2 runs a side: no interval)') in section
    assert "faster" not in section and "slower" not in section
    assert section.index('<table class="bench">') < section.index("<figure>")  # the numbers, then the charts


# --- summary, counts, reasons: the page states the whole history and shows every failure ------------


def _at(job: str, when: datetime, state: str = "succeeded", *, cost: float | None = 0.01, exit_code: int | None = 0,
        reason: str | None = None) -> RunRecord:
    record = run(job, 0, state, cost=cost, reason=reason)
    shift = when - record.created_at
    attempts = tuple(a.model_copy(update={k: getattr(a, k) + shift for k in
                                          ("created_at", "started_at", "finished_at", "deleted_at")})
                     for a in record.attempts)
    return record.model_copy(update={"created_at": when, "updated_at": when, "run_id": f"{when:%Y%m%d-%H%M}",
                                     "attempts": attempts, "exit_code": exit_code,
                                     "results_prefix": None if state != "succeeded" else
                                     f"runs/{job}/{when:%Y%m%d-%H%M}/attempt-1/"})


def test_summary_success_rates_spend_and_projection():
    from spotcron.present.summary import summarize

    now = datetime(2026, 11, 24, 8, 0, tzinfo=UTC)
    day = timedelta(days=1)
    records = [_at("a", now - d * day) for d in (1, 2, 3)]  # this week: 3 ok
    records += [_at("a", now - 4 * day, "failed", exit_code=2)]  # this week: 1 failed
    records += [_at("b", now - d * day) for d in range(10, 20)]  # within 30 days: 10 ok
    records += [_at("b", now - d * day, "lost", exit_code=None) for d in (21, 22)]  # within 30 days
    records += [_at("b", now - 40 * day)]  # outside both windows
    records += [_at("b", now - timedelta(minutes=5), "running", cost=None, exit_code=None)]  # no verdict yet
    summary = summarize({"a": [r for r in records if r.job == "a"], "b": [r for r in records if r.job == "b"]}, now,
                        totals={"a": 4, "b": 60})
    assert summary.jobs == 2 and summary.runs == 64
    assert (summary.rate(7).succeeded, summary.rate(7).ran) == (3, 4) and summary.rate(7).text() == "75% (3 of 4 that ran)"
    assert (summary.rate(30).succeeded, summary.rate(30).ran) == (13, 16)
    # November: everything created since 1 Nov 00:00 UTC (the runs 1 to 22 days back, not 40).
    assert summary.month == "November 2026"
    assert summary.spent_this_month == pytest.approx(0.01 * 16)
    # Last 30 days: 16 priced runs over 22 days since the first, times November's 30 days.
    first = (now - 22 * day)
    assert summary.projected_month == pytest.approx(0.16 / ((now - first).total_seconds() / 86400) * 30)
    assert summary.projection_basis == "the run rate of the last 22 days, over 30 days"


def test_update_index_counts_every_run_of_a_job():
    from spotcron.core import layout

    deps = _Deps()  # now = T0 + 1 day
    for hour in range(44):
        when = T0 - timedelta(hours=hour)
        deps.store.create(_at("hello-bot", when, "failed" if hour == 3 else "succeeded",
                              exit_code=127 if hour == 3 else 0,
                              reason="the job exited with code 127: /app/bot.py: not found" if hour == 3
                              else None))
    html = update_index(deps)
    assert "Showing the 20 most recent of 44 runs" in html
    assert "<dd>1 (44 runs on record)</dd>" in html
    assert "<dt>succeeded, last 7 days</dt><dd>98% (43 of 44 that ran)</dd>" in html
    assert "<dt>spent in November 2026</dt><dd>$0.4400</dd>" in html
    row = next(line for line in html.splitlines() if f"<td>{T0 - timedelta(hours=3):%Y%m%d-%H%M}</td>" in line)
    assert '<td class="num">127</td>' in row
    assert '<td class="reason">the job exited with code 127: /app/bot.py: not found</td>' in row
    # A failed run keeps its results: the link is there.
    failed_id = f"{T0 - timedelta(hours=3):%Y%m%d-%H%M}"
    assert f'href="{layout.manifest("hello-bot", failed_id, 1)}">results</a>' in row
    assert deps.blobs.read(layout.INDEX_PAGE).data.decode() == html
    assert "Rates and spend come from" not in html


def test_the_run_end_hook_reads_a_bounded_number_of_records_and_says_so(monkeypatch):
    from spotcron.present import page

    deps = _Deps()
    for hour in range(44):
        deps.store.create(_at("hello-bot", T0 - timedelta(hours=hour)))
    monkeypatch.setattr(page, "HOOK_SUMMARY_READS", 30)
    before = deps.blobs.calls["read"]
    html = update_index(deps, charts=False)
    assert deps.blobs.calls["read"] - before == 30
    assert "Showing the 20 most recent of 44 runs" in html and "<dd>1 (44 runs on record)</dd>" in html
    assert "Rates and spend come from the newest 30 runs of each job" in html


def test_page_shows_each_runs_zone_and_why_it_went_there():
    from spotcron.core.runs import Placement

    placed = run("bot", 1)
    placed = placed.model_copy(update={
        "attempts": (placed.attempts[0].model_copy(update={"zone": "us-west4-b"}),),
        "placement": Placement(zones=("us-west4-b", "us-central1-a"), why="us-west4-b: expected $0.000350 <cheapest>")})
    html = render_index({"bot": [placed]}, {})
    assert "<th>zone</th>" in html
    assert '<td class="zone" title="us-west4-b: expected $0.000350 &lt;cheapest&gt;">us-west4-b</td>' in html
