"""The results page and `spotcron report` show the same costs for the same runs.

One bucket, written by the functions: a matrix job's tick run on one host, where each VM waited
for its turn before its container started (the runner's hardware.json says how long). The report
reprices every run at the price table without that wait; the page, which has only what the
records priced, takes the wait out of each record's cost. Both must come to the same cells, the
billing minimum, the disk and the GPUs included, and the page's runs table, which shows what each
record priced, must say where that is more than the benchmark table counts.
"""

from __future__ import annotations

import re
from html import unescape

from click.testing import CliRunner

from spotcron.present.page import build_page
from tests.present.worst_case import LOCAL, LOCAL_ENTRIES, local_benchmark

COST_COLUMNS = ("cost", "rel. cost")


def page_cells(html: str) -> dict[str, dict[str, str]]:
    """The benchmark table's cells per configuration, from the page."""
    table = html[html.index(f'id="bench-{LOCAL}"'):]
    table = table[:table.index("</table>")]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table, flags=re.DOTALL):
        cells = dict(re.findall(r'<td[^>]*data-label="([^"]*)"[^>]*>([^<]*)</td>', row))
        if cells:
            rows[unescape(cells["configuration"])] = {unescape(k): unescape(v) for k, v in cells.items()}
    return rows


def report_cells(text: str) -> dict[str, dict[str, str]]:
    """The first table of `spotcron report --format md`, per configuration."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    headers = [h.strip() for h in lines[0].strip("| ").split(" | ")]
    rows = {}
    for line in lines[1:]:
        cells = [c.strip().replace("\\", "") for c in line.strip("| ").split(" | ")]
        if len(cells) != len(headers) or cells[0] == "configuration":
            break
        rows[cells[0]] = dict(zip(headers, cells, strict=True))
    return rows


def test_the_page_and_the_report_cost_the_same_runs_the_same(tmp_path):
    from spotcron.cli import cli as spotcron

    h = local_benchmark()
    try:
        html, _ = build_page(h.deps.store, h.clock.now(), h.settings.region)
        for record in h.records(LOCAL):
            folder = tmp_path / "records" / "runs" / LOCAL / record.run_id
            folder.mkdir(parents=True)
            (folder / "run.json").write_bytes(record.to_json())
    finally:
        h.close()
    done = CliRunner().invoke(spotcron, ["report", LOCAL, "--records", str(tmp_path / "records"), "--jobs",
                                         str(tmp_path / "no-jobs"), "--format", "md"])
    assert done.exit_code == 0, done.output
    page, report = page_cells(html), report_cells(done.output)
    assert sorted(page) == sorted(report) and len(page) == len(LOCAL_ENTRIES), (page, report)
    unit = next(h for h in report[next(iter(report))] if h.startswith("cost/"))
    for configuration, cells in report.items():
        for column in (*COST_COLUMNS, unit):
            assert page[configuration][column] == cells[column], (configuration, column, page[configuration], cells)
