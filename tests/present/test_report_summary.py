"""The report as a newcomer reads it after a quickstart, in a pipe, a file or Markdown: titles and
captions wrap at the page's width (never at a narrow part's), a part of a split table names its
rows, each footnote once, the runs not measured summed up in a line per reason, and the metrics.json
medians behind --detail, with every figure still reachable."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from spotcron.cli import SpotcronGroup
from spotcron.cli.report import REPORT_PAGE_WIDTH
from spotcron.cli.report import report as report_command
from spotcron.core import layout
from spotcron.core.hardware import Hardware
from spotcron.core.metrics import parse_metrics
from spotcron.present.tables import print_whole
from tests.examples import copy_examples
from tests.present.test_report import bench_run
from tests.present.test_single_report import hello_run

VM = Hardware(local=True, host="vm", cpu_model="AMD EPYC 9454 48-Core Processor", cpus=2, memory_mib=24000)
# What the example benchmark writes: the compared metrics, the time metric and many more.
EXTRA = {f"{model}_{what}": {"value": 0.5 + n, "unit": unit} for n, (model, (what, unit)) in enumerate(
    (m, w) for m in ("mlp", "cnn", "lstm") for w in (("heldout_accuracy", "1"), ("heldout_loss", "1"),
                                                     ("samples_per_second", "samples/s"), ("tflops", "TFLOP/s"),
                                                     ("epoch_seconds", "s")))}
NO_GPU = ("not run on this host: the configuration asks for nvidia-tesla-t4 x1, and this host has no NVIDIA GPU "
          "(nvidia-smi lists none); not run on the CPU")
CAPTION = ("a footnote long enough to need several lines at the page's width, which says what every column "
           "means and on what basis each figure was taken, so that it must never be wrapped at the narrow "
           "width of the last part of a table split by its columns")


def test_a_split_tables_title_and_caption_wrap_at_the_page_width_and_each_part_names_its_rows():
    from rich.table import Table

    title = "bench: metrics.json, median per run, with a title as long as a real one with its host " * 2
    table = Table(title=title.strip(), caption=CAPTION)
    table.add_column("configuration")
    for n in range(9):
        table.add_column(f"metric_number_{n}", justify="right")
    table.add_row("highcpu-16", *(f"{n}.5 s" for n in range(9)))
    out = Console(file=io.StringIO(), width=80, force_terminal=False)
    print_whole(out, table, page_width=REPORT_PAGE_WIDTH)
    text = out.file.getvalue()
    parts = text.count("configuration")
    assert parts > 1 and text.count("highcpu-16") == parts  # every part carries the row's key
    lines = text.splitlines()
    # The caption is the page's: wrapped at its width, not at the last part's (31 columns or so).
    assert "\n".join(lines[-len(textwrap.wrap(CAPTION, REPORT_PAGE_WIDTH)):]) == textwrap.fill(CAPTION,
                                                                                              REPORT_PAGE_WIDTH)
    last_title = max(i for i, line in enumerate(lines) if line.startswith("bench: metrics.json"))
    assert lines[last_title + 1].endswith(f"({parts} of {parts})")  # the whole title on the page's two lines
    assert len(lines[last_title]) > REPORT_PAGE_WIDTH - 20 and max(map(len, lines)) <= REPORT_PAGE_WIDTH


def _write(bucket: Path, records, metrics: dict) -> None:
    for record in records:
        path = bucket / layout.run_record(record.job, record.run_id)
        path.parent.mkdir(parents=True)
        path.write_bytes(record.to_json())
        if record.state == "succeeded":
            target = bucket / record.results_prefix / "results" / "metrics.json"
            target.parent.mkdir(parents=True)
            target.write_text(json.dumps(metrics(record)))


def _invoke(tmp_path: Path, monkeypatch, *args: str) -> str:
    monkeypatch.chdir(tmp_path)
    for name in ("SPOTCRON_JOBS", "SPOTCRON_STACK", "SPOTCRON_PRICES", "SPOTCRON_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    group = SpotcronGroup("spotcron")
    group.add_command(report_command)
    result = CliRunner().invoke(group, ["report", *args, "--records", str(tmp_path / "bucket")])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def quickstart(tmp_path, monkeypatch):
    """The example benchmark's records as `make run` leaves them on a host without a GPU: three runs of
    each CPU entry, three skipped t4 runs, a metrics.json of 19 metrics; `report(*options)` prints."""
    records = [bench_run(v, s + r, 0, repeat=r).model_copy(update={"hardware": VM})
               for v, s in (("highcpu-16", 30), ("e2-std-4", 90)) for r in (1, 2, 3)]
    records += [bench_run("t4", 0, 0, repeat=r, state="skipped").model_copy(update={"reason": NO_GPU})
                for r in (1, 2, 3)]

    def metrics(record):
        seconds = (record.current_attempt.finished_at - record.current_attempt.started_at).total_seconds()
        timed = {name: {"value": seconds / 4, "unit": "s"} for name in ("mlp_seconds", "cnn_seconds", "lstm_seconds")}
        return {"work": {"value": 6400, "unit": "samples"},
                "metrics": {**EXTRA, **timed, "train_seconds": {"value": seconds, "unit": "s"}}}

    _write(tmp_path / "bucket", records, metrics)
    jobs = str(copy_examples(tmp_path / "jobs"))
    return lambda *options: _invoke(tmp_path, monkeypatch, "dl-benchmark", "--jobs", jobs, *options)


def test_the_quickstart_report_reads_as_a_summary_and_keeps_what_it_must_say(quickstart):
    output = quickstart()
    said = " ".join(output.split())
    # What the figures are, and how far to trust them: never left out.
    assert 'local runs on the host "vm": machine types were priced, not measured' in said
    assert "measured on local host vm, not on the machine types" in said
    assert "verdict: lstm_seconds" in said and "(0." in said  # per-metric verdicts with their interval
    assert "highcpu-16 is the base" in said and "e2-std-4 entry's runs took" in said  # per configuration
    # Each footnote once; the runs not measured in one line with their count and reason.
    assert said.count("per second after a 60-second minimum") == 1
    assert output.count("not measured:") == 1
    assert f"not measured: t4: 3 runs skipped: {NO_GPU} (--detail names each run)" in said
    # The metrics.json medians are behind --detail, and a line says so.
    assert "median per run" not in output and "mlp_heldout_accuracy" not in output
    assert "metrics.json: 19 metrics per run" in said and "--detail shows their medians" in said
    assert max(len(line) for line in output.splitlines()) <= REPORT_PAGE_WIDTH
    assert "(1 of" not in output  # nothing of the default report is split by columns at the page's width
    assert len(output.splitlines()) < 130  # `make run`'s report was about 220 lines


def test_detail_brings_back_every_metric_and_every_run(quickstart):
    output = quickstart("--detail")
    said = " ".join(output.split())
    for name in (*EXTRA, "train_seconds"):
        assert name in output
    assert "dl-benchmark: metrics.json, median per run" in output
    # A metric a line, a configuration a column: one table on the page, not a part per few metrics.
    assert "(1 of" not in output and any(line.split() == ["metric", "highcpu-16", "e2-std-4", "t4"]
                                         for line in output.splitlines())
    assert output.count("not measured: t4/") == 3 and "--detail names" not in said
    assert said.count("per second after a 60-second minimum") == 1


def test_markdown_is_the_same_summary_and_detail_the_same_whole(quickstart):
    md = quickstart("--format", "md")
    assert "| configuration | cnn\\_epoch\\_seconds" not in md and "metrics.json: 19 metrics per run" in md
    assert md.count("- t4") == 1 and "t4: 3 runs skipped:" in md
    assert md.count("per second after a 60-second minimum") == 1
    assert "measured on local host vm, not on the machine types" in md
    full = quickstart("--format", "md", "--detail")
    assert "| configuration | cnn\\_epoch\\_seconds" in full and full.count("- t4/") == 3


def test_a_job_without_a_matrix_in_a_pipe_names_its_rows_in_every_part(tmp_path, monkeypatch):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "hello.yaml").write_text('schedule: "0 * * * *"\nimage: busybox\n')
    many = {f"task_{n}_samples_per_second": {"value": 1234.5 + n, "unit": "samples/s"} for n in range(12)}
    written = {"work": {"value": 6400, "unit": "samples"}, "metrics": many}
    runs = [hello_run(h, 10 + h).model_copy(update={"metrics": parse_metrics(json.dumps(written).encode())})
            for h in range(3)]
    _write(tmp_path / "bucket", runs, lambda _: written)
    output = _invoke(tmp_path, monkeypatch, "hello", "--jobs", str(tmp_path / "jobs"))
    lines = output.splitlines()
    titles = [line for line in lines if line.startswith("hello: metrics.json, median per run")]
    assert len(titles) > 1  # split by columns at the page's width
    heads = [lines[i + 2] for i, line in enumerate(lines) if line in titles]  # title, edge, header
    assert all(head.split()[0] == "job" for head in heads), heads
    rows = [line for line in lines if line.startswith(" hello ")]
    assert len(rows) >= len(titles) + 1  # the runs table and every part of the metrics table
    caption = next(i for i, line in enumerate(lines) if line.startswith("median ±IQR/2"))
    assert len(lines[caption]) > 80  # the caption wraps at the page, not at the runs table's width
    assert max(len(line) for line in lines) <= REPORT_PAGE_WIDTH
