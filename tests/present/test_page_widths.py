"""The results page fits its screen: at 1280 px and on a phone no table makes the page scroll
sideways (the runs of a matrix job with their reasons, costs and links, and a benchmark's tables),
measured in headless Chromium by a script in a copy of the page that writes the widths into it."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest

from spotcron.core.hardware import Hardware
from spotcron.core.runs import Attempt, RunRecord
from spotcron.present.page import benchmark_table, render_index
from spotcron.present.report import benchmark_report

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome",
                                                "google-chrome-stable")) if p), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
         "--disable-component-update", "--disable-sync"]
T0 = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
HOST = Hardware(local=True, host="build-runner-0042.example.internal", cpu_model="AMD EPYC 9454 48-Core Processor",
                cpus=2, memory_mib=24105)
REASON = ("not run on this host: the configuration names 1 x nvidia-tesla-t4 and this host has no NVIDIA GPU "
          "(nvidia-smi not found); run it on Google Cloud with spotcron deploy, or on a host with the GPU")
MEASURE = """<script>
const over = [...document.querySelectorAll('table')].filter(t => t.getBoundingClientRect().right > window.innerWidth)
  .map(t => t.className || t.querySelector('th').textContent);
document.title = JSON.stringify({viewport: window.innerWidth, page: document.documentElement.scrollWidth, over});
</script>"""


def bench_records() -> list[RunRecord]:
    """A week of a three-entry matrix job on a local host, three repeats each: long run ids, long
    reasons for the GPU entry, a cost of `-` for an unpriced one, metrics for the report."""
    records = []
    for entry, machine, seconds in (("highcpu-16", "n1-highcpu-16", 500), ("e2-standard-4", "e2-standard-4", 900),
                                    ("t4", "n1-standard-8", None)):
        for repeat in (1, 2, 3):
            run_id = f"m20261123-030000-ab12-{entry}-r{repeat}"
            start = T0 + timedelta(minutes=repeat)
            attempt = Attempt(number=1, vm_name=f"sc-dl-benchmark-{run_id}-a1", zone="local-zone1-a",
                              machine_type=machine, created_at=start, started_at=start + timedelta(seconds=5),
                              finished_at=start + timedelta(seconds=5 + (seconds or 1) + repeat),
                              deleted_at=start + timedelta(seconds=9 + (seconds or 1) + repeat),
                              outcome="exited" if seconds else "unavailable", exit_code=0 if seconds else None)
            records.append(RunRecord(
                job="dl-benchmark", run_id=run_id, variant=entry, repeat=repeat, tick=T0, created_at=start,
                updated_at=start + timedelta(seconds=10 + (seconds or 1)), attempts=(attempt,),
                state="succeeded" if seconds else "skipped", reason=None if seconds else REASON,
                exit_code=0 if seconds else None, cost_usd=0.000123 if entry == "highcpu-16" else None,
                results_prefix=f"runs/dl-benchmark/{run_id}/attempt-1/" if seconds else None, hardware=HOST))
    return records


def page() -> str:
    records = bench_records()
    report = benchmark_report("dl-benchmark", records, None, "us-central1")
    return render_index({"dl-benchmark": records}, {}, generated_at=T0 + timedelta(hours=1),
                        tables={"dl-benchmark": benchmark_table(report)})


def measured(tmp_path, width: int, height: int = 900) -> dict:
    # A copy for measuring only: the page's policy forbids scripts, which is right for the page.
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page()).replace("</body>",
                                                                                        MEASURE + "</body>")
    index = tmp_path / f"page-{width}.html"
    index.write_text(html)
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / f'profile-{width}'}",
                           f"--window-size={width},{height}", "--dump-dom", index.as_uri()],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(unescape(re.search(r"<title>([^<]*)</title>", done.stdout).group(1)))


def test_the_page_holds_what_is_measured():
    html = page()
    assert "class=\"runs matrix\"" in html and "hardware (measured by the runner)" in html
    assert REASON in html and "build-runner-0042.example.internal" in html


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH; `make tools` installs it")
@pytest.mark.parametrize("width", [1280, 390])
def test_no_table_makes_the_page_scroll_sideways(tmp_path, width):
    """(Headless Chromium lays a page out no narrower than 500 px: the phone's layout all the same.)"""
    widths = measured(tmp_path, width)
    assert widths["page"] <= widths["viewport"], widths
    assert widths["over"] == [], widths


def test_a_cancelled_run_links_the_output_it_shipped_not_no_logs():
    from spotcron.core import layout
    from spotcron.present.page import absent_logs
    from spotcron.testing.memory import MemoryBlobs

    start = T0
    attempt = Attempt(number=1, vm_name="sc-bot-r1-a1", zone="local-zone1-a", machine_type="e2-small",
                      created_at=start, started_at=start + timedelta(seconds=2))
    cancelled = RunRecord(job="bot", run_id="20261123-0300", state="cancelled", created_at=start,
                          updated_at=start + timedelta(seconds=30), attempts=(attempt,),
                          reason="spotcron up was stopped")
    quiet = cancelled.model_copy(update={"run_id": "20261123-0400"})
    blobs = MemoryBlobs("spotcron-local")
    for offset, text in ((0, b"step 1\n"), (7, b"step 2\n")):
        blobs.write(layout.log_part("bot", cancelled.run_id, 1, offset), text)
    missing = absent_logs(blobs, [cancelled, quiet])
    assert missing == {layout.logs("bot", cancelled.run_id, 1): [layout.log_part("bot", cancelled.run_id, 1, 0),
                                                                 layout.log_part("bot", cancelled.run_id, 1, 7)],
                       layout.logs("bot", quiet.run_id, 1): []}
    html = render_index({"bot": [cancelled, quiet]}, {}, generated_at=T0 + timedelta(hours=2), missing=missing)
    row = next(line for line in html.splitlines() if cancelled.run_id in line and "<tr>" in line)
    assert "no logs" not in row and "partial logs" in row
    assert f'href="{layout.log_part("bot", cancelled.run_id, 1, 7)}"' in row
    quiet_row = next(line for line in html.splitlines() if quiet.run_id in line and "<tr>" in line)
    assert "no logs" in quiet_row  # it printed nothing: said so
