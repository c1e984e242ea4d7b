"""A host name the job wrote is literal text in `spotcron report --format md`, titles included.

hardware.json's `host` is hostile (a job that reaches the metadata server can rewrite the file:
core/hardware.py). When every measured run ran locally and the job compares metrics
(`benchmark.compare`), the comparison table's title names the hosts; markdown() writes every
title and caption through md_text, so the host is no live link and no remote image.
"""

from __future__ import annotations

import json
import re

from spotcron.core.hardware import Hardware
from spotcron.core.loader import load_job_file
from spotcron.core.spec import Benchmark
from spotcron.cost.prices import load_prices
from spotcron.present import exports
from spotcron.present.report import benchmark_report
from tests.examples import example
from tests.present.test_report import bench_run

HOST = "![x](https://evil.example/p.png)[click](http://evil.example)"  # printable, under 128 characters


def test_a_job_written_host_is_no_link_or_image_in_markdown():
    spec = load_job_file(example("dl-benchmark"))
    spec = spec.model_copy(update={"benchmark": Benchmark(base="highcpu-16", time_metric="train_seconds",
                                                          compare=("train_seconds",))})
    hostile = Hardware(local=True, host=HOST, cpu_model="cpu", cpus=16, memory_mib=14700)

    def metrics(seconds: float) -> str:
        return json.dumps({"metrics": {"train_seconds": {"value": seconds, "unit": "s"}}})

    runs = [bench_run("highcpu-16", 900, 0, repeat=i, metrics=metrics(800 + i)).model_copy(
        update={"hardware": hostile}) for i in (1, 2, 3)]
    runs += [bench_run("t4", 300, 0, repeat=i, metrics=metrics(250 + i)).model_copy(
        update={"hardware": hostile}) for i in (1, 2, 3)]
    report = benchmark_report("dl-benchmark", runs, load_prices(), "us-central1", spec=spec)
    assert report.comparisons and report.all_local
    md = exports.markdown(report)
    unescaped = re.sub(r"\\.", "_", md)
    offending = [line for line in unescaped.splitlines() if "](" in line or "://" in line]
    assert not offending, offending
