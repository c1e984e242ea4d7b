"""`spotcron page`: where the results page is; locally a folder of plain files whose links resolve.

The Chromium test renders what the command built and checks each part of the page on the real
render, then saves a screenshot (its path is printed; SPOTCRON_SCREENSHOT_DIR keeps it).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from spotcron.cli import SpotcronGroup
from spotcron.cli.page import COMMANDS
from spotcron.core import layout
from tests.cli.conftest import NOW, make_attempt, make_record

HOUR = timedelta(hours=1)


@pytest.fixture
def page_cli(context, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPOTCRON_BUCKET", raising=False)
    monkeypatch.delenv("SPOTCRON_STATE_DIR", raising=False)
    group = SpotcronGroup("spotcron")
    for command in COMMANDS:
        group.add_command(command)
    opened: list[str] = []
    ctx = dataclasses.replace(context, launch=opened.append, has_display=lambda: True)

    def run(*args: str):
        return CliRunner().invoke(group, ["page", *args], obj=ctx, catch_exceptions=False)

    run.opened = opened  # type: ignore[attr-defined]
    return run


def fill(bucket, runs: int = 44) -> None:
    for n in range(runs):
        created = NOW - n * HOUR
        run_id = f"{created:%Y%m%d-%H%M}"
        if n == 2:
            bucket.add(make_record("hello-bot", run_id, "failed", created=created, cost=0.0004, exit_code=127,
                                   reason="the job exited with code 127: python3: can't open file 'bot.py'"))
            bucket.logs("hello-bot", run_id, 1, "python3: can't open file 'bot.py'\n")
            bucket.results("hello-bot", run_id, 1, {})
            continue
        bucket.add(make_record("hello-bot", run_id, created=created, cost=0.0012, exit_code=0))
        bucket.logs("hello-bot", run_id, 1, f"hello from run {n}\n")
        bucket.results("hello-bot", run_id, 1, {"answer.json": b'{"answer": 42}'})
    for variant, machine, gpu, seconds in (("cpu", "n1-highcpu-16", None, 600), ("t4", "n1-standard-8",
                                                                                "nvidia-tesla-t4 x1", 200)):
        run_id = f"{NOW - 5 * HOUR:%Y%m%d-%H%M}-{variant}"
        attempt = make_attempt("bench", run_id, start=NOW - 5 * HOUR, seconds=seconds, machine_type=machine, gpu=gpu)
        bucket.add(make_record("bench", run_id, created=NOW - 5 * HOUR, variant=variant, attempts=(attempt,),
                               cost=0.02 if variant == "cpu" else 0.01, exit_code=0))
        bucket.logs("bench", run_id, 1, "training\n")
        bucket.results("bench", run_id, 1, {"metrics.json": b'{"train_seconds": 100}'})


def test_local_page_is_a_folder_whose_links_resolve(page_cli, bucket, tmp_path):
    fill(bucket)
    (tmp_path / ".spotcron").mkdir()
    result = page_cli("--open")
    assert result.exit_code == 0, result.output
    index = Path(result.output.strip())
    assert index == Path(".spotcron/page/index.html") and index.is_file()
    assert page_cli.opened == [index.resolve().as_uri()]
    html = index.read_text()
    hrefs = re.findall(r'href="([^"]+)"', html)
    assert len(hrefs) >= 3 * 20 + 3 * 2
    for href in hrefs:
        assert (index.parent / href).is_file(), href
    failed = f"{NOW - 2 * HOUR:%Y%m%d-%H%M}"
    assert (index.parent / layout.logs("hello-bot", failed, 1)).read_text() == "python3: can't open file 'bot.py'\n"
    assert "Showing the 20 most recent of 44 runs" in html
    # Built again: an ended run's copies are final and not fetched again.
    reads = bucket.blobs.calls["read_range"]
    assert page_cli().exit_code == 0
    assert bucket.blobs.calls["read_range"] == reads


def test_an_attempt_that_wrote_no_logs_is_marked_not_linked(page_cli, bucket, tmp_path):
    # `up` stopped mid-run: the run is cancelled and its runner never wrote logs.txt
    run_id = f"{NOW - HOUR:%Y%m%d-%H%M}"
    bucket.add(make_record("hello-bot", run_id, "cancelled", created=NOW - HOUR, reason="spotcron up was stopped"))
    (tmp_path / ".spotcron").mkdir()
    index = Path(page_cli().output.strip())
    html = index.read_text()
    assert "logs.txt\"" not in html  # no link to it
    assert 'shows what was shipped">no logs</span>' in html and f"spotcron logs hello-bot/{run_id}" in html
    for href in re.findall(r'href="([^"]+)"', html):
        assert (index.parent / href).is_file(), href


def test_a_cancelled_run_has_one_duration_in_the_cli_and_on_the_page(page_cli, invoke, bucket, tmp_path):
    # the container started, `up` was stopped 15s later: no container end, a VM deletion, so the
    # work took at most those 15s, and both say so
    run_id = f"{NOW - HOUR:%Y%m%d-%H%M}"
    start = NOW - HOUR + timedelta(seconds=40)
    attempt = make_attempt("hello-bot", run_id, start=start, seconds=None).model_copy(
        update={"deleted_at": start + timedelta(seconds=15)})
    bucket.add(make_record("hello-bot", run_id, "cancelled", created=NOW - HOUR, attempts=(attempt,),
                           reason="spotcron up was stopped"))
    row = next(line for line in invoke("runs").stdout.splitlines() if run_id in line)
    assert "cancelled" in row and " ≤15s " in row
    (tmp_path / ".spotcron").mkdir()
    html = Path(page_cli().output.strip()).read_text()
    assert re.search(rf"{run_id}</td>.*?<td class=\"num\">≤15s</td>", html, flags=re.DOTALL)


def test_open_on_a_box_without_a_display_says_so_in_one_line(context, bucket, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPOTCRON_STATE_DIR", raising=False)
    fill(bucket, runs=2)
    (tmp_path / ".spotcron").mkdir()
    group = SpotcronGroup("spotcron")
    for command in COMMANDS:
        group.add_command(command)
    opened: list[str] = []
    ctx = dataclasses.replace(context, launch=opened.append, has_display=lambda: False)
    result = CliRunner().invoke(group, ["page", "--open"], obj=ctx, catch_exceptions=False)
    assert result.exit_code == 0 and opened == []
    assert result.stdout == ".spotcron/page/index.html\n"
    assert result.stderr.splitlines() == [
        "no display to open a browser on here; open .spotcron/page/index.html where you have one"]


def test_a_display_is_looked_for_the_way_browsers_are_opened():
    from spotcron.cli._bucket import has_display

    assert has_display({}, "linux") is False
    assert has_display({"DISPLAY": ":0"}, "linux") and has_display({"WAYLAND_DISPLAY": "wayland-0"}, "linux")
    assert has_display({}, "darwin") and has_display({}, "win32")


def test_a_job_no_longer_deployed_is_marked_and_its_runs_stay(page_cli, bucket, tmp_path):
    from spotcron.engine.deployed import SpecStore
    from spotcron.testing.harness import make_spec

    fill(bucket, runs=2)
    SpecStore(bucket.blobs).write(make_spec(name="hello-bot"))  # bench's job file was removed, then deployed
    (tmp_path / ".spotcron").mkdir()
    html = Path(page_cli().output.strip()).read_text()
    bench = html[html.index('id="job-bench"'):html.index('id="job-hello-bot"')]
    assert "removed: no longer deployed; its runs and results stay" in bench
    assert "no longer deployed" not in html[html.index('id="job-hello-bot"'):]
    assert "20260302-0700-cpu" in bench


def test_the_pages_projection_and_spotcron_cost_point_to_one_explanation(page_cli, bucket, tmp_path):
    """They measure different things (recent run rate vs the schedules), and one place says how."""
    from tests.cli.conftest import ROOT

    heading = "## The results page's month and `spotcron cost`"
    assert heading in (ROOT / "docs" / "cost.md").read_text()
    fill(bucket, runs=2)
    (tmp_path / ".spotcron").mkdir()
    html = Path(page_cli().output.strip()).read_text()
    note = re.sub(r"<[^>]+>", "", html[html.index('id="summary"'):html.index('id="job-')])
    assert ("The projection extrapolates the recent runs (manual ones too) and prices only their VMs and "
            "disks; spotcron cost projects the schedules and adds the rest. docs/cost.md, \"The results page's "
            "month and spotcron cost\", says why the two differ.") in " ".join(note.split())


def test_local_page_without_a_local_bucket(tmp_path, monkeypatch):
    from spotcron.cli._bucket import RunsContext

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SPOTCRON_STATE_DIR", raising=False)
    group = SpotcronGroup("spotcron")
    for command in COMMANDS:
        group.add_command(command)
    result = CliRunner().invoke(group, ["page"], obj=RunsContext())  # the real local bucket opener
    assert result.exit_code == 2
    assert "error: no local runs yet (.spotcron/bucket does not exist)" in result.output


def test_a_deployed_page_is_drawn_into_its_bucket_then_given_as_its_storage_url(page_cli, bucket):
    """The functions never draw the page (nothing on a run's end): the command draws it on demand."""
    result = page_cli("--bucket", "gs://acme-spotcron")
    assert result.exit_code == 0
    assert "No runs yet." in bucket.blobs.read(layout.INDEX_PAGE).data.decode()
    fill(bucket, runs=3)

    result = page_cli("--bucket", "gs://acme-spotcron", "--open")

    assert result.exit_code == 0
    assert result.output.strip() == "https://storage.cloud.google.com/acme-spotcron/index.html"
    assert page_cli.opened == ["https://storage.cloud.google.com/acme-spotcron/index.html"]
    page = bucket.blobs.read(layout.INDEX_PAGE)
    assert page.content_type == "text/html; charset=utf-8"
    assert 'id="job-hello-bot"' in page.data.decode()


# --- on a real render ------------------------------------------------------------------------------------

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome",
                                                "google-chrome-stable")) if p), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--allow-file-access-from-files"]


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH; `make tools` installs it")
def test_the_page_in_headless_chromium(page_cli, bucket, tmp_path):
    import numpy as np
    from matplotlib.image import imread

    fill(bucket)
    (tmp_path / ".spotcron").mkdir()
    index = Path(page_cli().output.strip()).resolve()

    def chromium(*args: str) -> subprocess.CompletedProcess:
        profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
        return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, index.as_uri()],
                              capture_output=True, text=True, timeout=120, check=False)

    dom = chromium("--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", dom.stdout))
    # The summary.
    for part in ("Summary", "jobs 2 (46 runs on record)", "succeeded, last 7 days 98% (45 of 46 that ran)",
                 "succeeded, last 30 days 98% (45 of 46 that ran)", f"spent in {NOW:%B %Y}", "projected for the month"):
        assert part in text, part
    # Each run: failure reason and exit code.
    assert "the job exited with code 127: python3: can't open file 'bot.py'" in text
    assert re.search(r'<td class="num">127</td>', dom.stdout)
    # Right counts.
    assert "Showing the 20 most recent of 44 runs" in text and "Showing all 2 runs" in text
    assert dom.stdout.count('<span class="state ') == 22
    # Links to each run's logs and results, which resolve to files.
    logs = re.findall(r'href="([^"]+/logs\.txt)"', dom.stdout)
    results = re.findall(r'href="([^"]+/manifest\.json)">results<', dom.stdout)
    assert len(logs) == 22 and len(results) == 22
    assert all((index.parent / link).is_file() for link in logs + results)
    # The benchmark charts, on the job's base.
    assert dom.stdout.count("data:image/png;base64,") >= 2

    keep = os.environ.get("SPOTCRON_SCREENSHOT_DIR")
    shot = (Path(keep) if keep else tmp_path) / "results-page.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    result = chromium("--hide-scrollbars", "--window-size=1280,2400", f"--screenshot={shot}")
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    pixels = (imread(shot)[:, :, :3] * 255).round().astype(int)
    assert pixels.std() > 10  # not a blank page
    red = np.all(np.abs(pixels - np.array((0xC9, 0x2A, 0x2A))) <= 3, axis=-1).sum()
    assert red > 50  # the failed run's state is drawn in red
    print(f"screenshot: {shot}")


MEASURE = """<script>
const reasons = [...document.querySelectorAll('td.reason')].map(e => e.getBoundingClientRect().height);
const line = parseFloat(getComputedStyle(document.body).lineHeight);
document.title = JSON.stringify({viewport: window.innerWidth, page: document.documentElement.scrollWidth,
                                 reason_lines: Math.max(...reasons) / line});
</script>"""


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH; `make tools` installs it")
def test_the_page_on_a_phone_has_no_sideways_scroll_and_reasons_wrap_across_the_screen(tmp_path):
    """On a 390 px phone each run is a card: nothing is wider than the screen. (Headless Chromium lays
    out no narrower than 500 px, still a phone's layout here: the cards start below 44em.)"""
    import json
    from html import unescape

    from spotcron.present.page import render_index

    reason = "the job exited with code 127: python3: can't open file '/app/bot.py': [Errno 2] No such file"
    runs = {"hello-bot": [make_record("hello-bot", f"20260302-{h:02d}00", "failed", created=NOW - h * HOUR, cost=0.0004,
                                      exit_code=127, reason=reason) for h in range(1, 4)],
            "bench": [make_record("bench", "20260302-1000-t4", variant="t4", created=NOW, cost=0.01, exit_code=0)]}
    html = render_index(runs, generated_at=NOW)
    # A copy for measuring only: the page's policy forbids scripts, which is right for the page.
    html = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", html).replace("</body>", MEASURE + "</body>")
    index = tmp_path / "phone.html"
    index.write_text(html)
    dom = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--window-size=390,844",
                          "--dump-dom", index.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert dom.returncode == 0, dom.stderr[-2000:]
    measured = json.loads(unescape(re.search(r"<title>([^<]*)</title>", dom.stdout).group(1)))
    assert measured["viewport"] < 44 * 16  # the phone layout
    assert measured["page"] <= measured["viewport"], measured
    assert measured["reason_lines"] <= 4, measured


def test_local_options_with_a_bucket_are_errors(page_cli, bucket):
    result = page_cli("--bucket", "gs://acme-spotcron", "--out", "somewhere")
    assert result.exit_code == 2
    assert result.output.strip() == ("error: --out goes without --bucket: the deployed page is drawn into its "
                                     "bucket; leave --out out, or build a local page without --bucket")
