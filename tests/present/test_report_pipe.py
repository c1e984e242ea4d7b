"""The report in a pipe or a file: titles and captions flush left, columns of words wrapped at
their words, a table still too wide split by columns (each part repeating the first), no figure
cut; and a host name reads as one."""

from __future__ import annotations

import io
import json

from click.testing import CliRunner
from rich.console import Console

from spotcron.cli import SpotcronGroup
from spotcron.cli.report import REPORT_PAGE_WIDTH
from spotcron.cli.report import report as report_command
from spotcron.core import layout
from spotcron.core.hardware import Hardware
from spotcron.present.tables import print_whole
from tests.examples import copy_examples
from tests.present.test_report import bench_run

METRICS = {f"task_{n}_samples_per_second": {"value": 1234.5 + n, "unit": "samples/s"} for n in range(14)}
TIMED = {"train_seconds": {"value": 41.2, "unit": "s"}}


def piped(renderable, width: int = REPORT_PAGE_WIDTH) -> list[str]:
    out = Console(file=io.StringIO(), width=80, force_terminal=False)
    print_whole(out, renderable, page_width=width)
    return out.file.getvalue().splitlines()


def test_a_wide_table_is_split_by_columns_each_part_repeating_the_first_and_no_figure_cut():
    from rich.table import Table

    table = Table(title="bench: metrics.json, median per run", caption="a caption under the table")
    table.add_column("configuration")
    names = list(METRICS)
    for name in names:
        table.add_column(name, justify="right")
    table.add_row("highcpu-16", *(f"{1234.5 + n:,} samples/s" for n in range(len(names))))
    lines = piped(table)
    assert max(len(line) for line in lines) <= REPORT_PAGE_WIDTH
    titles = [line for line in lines if line.startswith("bench: metrics.json, median per run")]
    assert len(titles) > 1 and titles[0].endswith(f"(1 of {len(titles)})")  # flush left, numbered
    assert sum("highcpu-16" in line for line in lines) == len(titles)  # the first column in every part
    text = "\n".join(lines)
    for n, name in enumerate(names):
        assert name in text and f"{1234.5 + n:,} samples/s" in text  # every figure whole
    assert lines[-1] == "a caption under the table"  # once, at the end, flush left


def test_the_report_command_in_a_pipe(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("SPOTCRON_JOBS", "SPOTCRON_STACK", "SPOTCRON_PRICES"):
        monkeypatch.delenv(name, raising=False)
    vm = Hardware(local=True, host="vm", cpu_model="AMD EPYC 9454 48-Core Processor", cpus=2, memory_mib=24000)
    records = [bench_run(v, s, week).model_copy(update={"hardware": vm}) for week in (0, 1)
               for v, s in (("highcpu-16", 1000 + week), ("e2-std-4", 3000 - week), ("t4", 300 + week))]
    bucket = tmp_path / "bucket"
    for record in records:
        path = bucket / layout.run_record(record.job, record.run_id)
        path.parent.mkdir(parents=True)
        path.write_bytes(record.to_json())
        metrics = bucket / record.results_prefix / "results" / "metrics.json"
        metrics.parent.mkdir(parents=True)
        metrics.write_text(json.dumps({"work": {"value": 6400, "unit": "samples"}, "metrics": {**METRICS, **TIMED}}))
    group = SpotcronGroup("spotcron")
    group.add_command(report_command)
    result = CliRunner().invoke(group, ["report", "dl-benchmark", "--jobs", str(copy_examples(tmp_path / "jobs")),
                                        "--records", str(bucket)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    tables = [line for line in lines if line and not line.startswith((" ", "metrics.json problem", "not "))]
    assert lines[0].startswith("dl-benchmark: per configuration, relative to highcpu-16 (local runs on the host")
    assert '"vm"' in " ".join(lines[:2]) and "on vm" not in result.output
    assert max(len(line) for line in lines) <= REPORT_PAGE_WIDTH, "\n".join(
        line for line in lines if len(line) > REPORT_PAGE_WIDTH)
    assert any(line.startswith("median ±IQR/2") for line in tables)  # the caption starts at the left edge
    assert any(line.startswith("dl-benchmark: what each configuration ran on, and the verdict") for line in tables)
