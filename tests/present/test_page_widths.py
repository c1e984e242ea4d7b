"""The results page fits its screen: at 1280 px and on a 390 px phone nothing makes the page
scroll sideways and no table cell's content spills out of its cell.

The page measured is the widest spotcron writes (tests/present/worst_case.py: every section and
table, from records the functions wrote, with run ids, names and job-written text at their
longest), rendered by `build_page` as `spotcron page` and the run-end hook render it, and laid
out in headless Chromium inside a frame of each width: a script in the frame's parent measures
it (the page's own policy forbids scripts, and stays). Screenshots stay in pytest's tmp folder.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from html import escape, unescape

import pytest

from spotcron.core.runs import Attempt, RunRecord
from spotcron.present.page import build_page, render_index
from tests.present.worst_case import BENCH, BOT, HOSTILE, LONG_METRIC, WORK_UNIT, worst_case

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome",
                                                "google-chrome-stable")) if p), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
         "--disable-component-update", "--disable-sync"]
T0 = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
SCREENS = {"desktop": (1280, 900), "phone": (390, 844)}
# Run in the frame's parent once the frame has loaded: every element past the frame's right edge,
# every table or cell whose content is wider than its box (cut off or spilling over the next), and
# what wraps badly: a figure broken (or, on a wide screen, apart from its spread), a configuration
# name on more than one line, a run id on more than two.
MEASURE = """<script>
window.addEventListener('load', () => {
  const frame = document.querySelector('iframe'), doc = frame.contentDocument, limit = doc.documentElement.clientWidth;
  const name = e => e.tagName.toLowerCase() + (e.className ? '.' + String(e.className).split(' ').join('.') : '')
    + ' ' + JSON.stringify(e.textContent.trim().slice(0, 60));
  const out = [];
  for (const e of doc.body.querySelectorAll('*')) {
    const box = e.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    if (box.right > limit + 0.5) out.push('past the screen (' + Math.round(box.right) + ' px): ' + name(e));
    if (['TABLE', 'TD', 'TH'].includes(e.tagName) && e.scrollWidth > e.clientWidth + 1)
      out.push('wider than its box (' + e.scrollWidth + ' > ' + e.clientWidth + ' px): ' + name(e));
  }
  const lines = e => {
    const range = doc.createRange();
    range.selectNodeContents(e);
    const tops = [...range.getClientRects()].map(r => r.top).sort((a, b) => a - b);
    return tops.filter((top, i) => i === 0 || top - tops[i - 1] > 4).length;
  };
  // A figure is never broken; on a wide screen a figure and its spread share one line.
  const broken = e => {
    const text = e.firstChild;
    if (!text || text.nodeType !== Node.TEXT_NODE) return false;
    let at = 0;
    return text.data.split(' ').some(token => {
      const range = doc.createRange();
      range.setStart(text, at);
      range.setEnd(text, at + token.length);
      at += token.length + 1;
      return token && range.getClientRects().length > 1;
    });
  };
  for (const e of doc.querySelectorAll('td.num')) if (e.getClientRects().length && broken(e)) out.push('broken: ' + name(e));
  const most = [['td.conf', 1], ['table.runs td:first-child', 2], ['th:not(.long)', 3]];
  if (limit > 1200) most.push(['td.num', 1]);
  for (const [selector, allowed] of most)
    for (const e of doc.querySelectorAll(selector))
      if (e.getClientRects().length && lines(e) > allowed) out.push(lines(e) + ' lines: ' + name(e));
  document.title = JSON.stringify({viewport: frame.contentWindow.innerWidth, page: doc.documentElement.scrollWidth,
                                   tables: doc.querySelectorAll('table').length, over: out});
});
</script>"""


@pytest.fixture(scope="module")
def page() -> str:
    h = worst_case()
    try:
        html, _ = build_page(h.deps.store, h.clock.now(), h.settings.region)
    finally:
        h.close()
    return html


def test_the_page_measured_holds_every_section_at_its_widest(page):
    """What the widths are measured on: if the fixture loses a table, this says so first."""
    for section in ('id="summary"', 'id="health"', f'id="job-{BENCH}"', f'id="job-{BOT}"', 'id="charts"',
                    f'id="bench-{BENCH}"', '<table class="runs matrix">', '<table class="runs">'):
        assert section in page, section
    assert page.count('<table class="bench">') >= 4  # comparison, hardware, phases, each compared metric
    unit = WORK_UNIT  # the work's unit, as long as a job may name it
    for header in (f"{unit}s/s", f"time/{unit}", f"cost/1M {unit}s", "rel. cost", "rel. work cost", "hardware (measured by the runner)", "notifications",
                   "missed 7d"):
        assert re.search(f"<th[^>]*>{re.escape(header)}</th>", page), header
    assert "m20261124-200005-ab12-highcpu-16ab-r3" in page  # a manual run's id, the longest there is
    assert "logs 1" in page and "logs 2" in page  # a preempted attempt and its retry
    assert "the job exited with code 137" in page and "missed" in page and "running" in page
    assert HOSTILE[:128] in page  # a CPU model with no place to break
    assert re.search(r'class="warn">[^<]*' + HOSTILE[:64], page)  # metrics.json's problems beside succeeded
    assert '<ul class="warnings">' in page and "rounds: the latest round" in page  # rounds that disagree
    assert f"<td data-label=\"metric\">{LONG_METRIC}</td>" in page and "overall (geomean)" in page
    assert "partial logs: " in page and ">50</a>" in page  # a run cut off: its live log parts, linked
    assert "<figure><img" in page


def measured(tmp_path, page: str, width: int, height: int) -> dict:
    outer = ('<!DOCTYPE html><html><head><meta charset="utf-8"><title>-</title>'
             "<style>body { margin: 0 } iframe { border: 0; display: block }</style></head><body>"
             f'<iframe width="{width}" height="{height}" srcdoc="{escape(page, quote=True)}"></iframe>'
             f"{MEASURE}</body></html>")
    index = tmp_path / f"page-{width}.html"
    index.write_text(outer)
    # Headless Chromium makes no window narrower than 500 px: the frame is the phone's screen.
    # One run lays it out, writes the DOM with the measures and a picture to look at when it fails
    # (pytest's tmp folder only).
    done = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / f'profile-{width}'}",
                           f"--window-size={max(width, 500)},{height}", f"--screenshot={tmp_path / f'page-{width}.png'}",
                           "--dump-dom", index.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    title = re.search(r"<title>([^<]*)</title>", done.stdout)
    assert title is not None and title[1] != "-", done.stdout[-2000:]
    return json.loads(unescape(title[1]))


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH; `make tools` installs it")
@pytest.mark.parametrize("screen", list(SCREENS))
def test_nothing_scrolls_sideways_and_no_cell_spills(tmp_path, page, screen):
    width, height = SCREENS[screen]
    widths = measured(tmp_path, page, width, height)
    assert widths["viewport"] == width and widths["tables"] >= 7, widths
    assert widths["page"] <= width, widths
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
