"""The example training benchmark on this machine's CPU: how much of a training step is the
framework's fixed cost rather than the hardware's work, at the rebuilt benchmark's sizes beside
the articles' sizes (batch 32, 128-unit MLP, 8-filter CNN, 64-unit LSTM), both measured here.

The share of framework overhead is estimated as (seconds of a batch-1 step) / (seconds of a step
at the batch): a batch-1 step does almost no arithmetic, so its time is the per-step cost of
Python, dispatch and the optimiser that every step pays whatever its batch. Near 1, the step is
overhead and its time says little about the hardware; small, the arithmetic dominates. On a GPU
the same question is the busy share the benchmark records (docs/benchmarks.md); these are the
CPU figures, at `--size small` (the sizes the job runs locally) so the bench stays short.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from bench import Section

BENCHMARK = Path(__file__).resolve().parents[1] / "vm_images" / "benchmark" / "benchmark.py"
ARTICLES = {"mlp": {"batch": 32, "width": 128}, "cnn": {"batch": 32, "width": 8},
            "lstm": {"batch": 32, "width": 64, "embed": 64}}


def _module():
    spec = importlib.util.spec_from_file_location("spotcron_example_benchmark", BENCHMARK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def step_seconds(bm, task: str, size: dict[str, int], steps: int, device) -> float:
    figures = bm.run_task(task, size=size, steps=steps, warmup=3, device=device, heldout_samples=64)
    return figures["seconds"] / steps


def run(quick: bool = False) -> Section:
    section = Section("dl", "Example training benchmark on this CPU: framework overhead per step",
                      baseline="the same step at the articles' sizes (batch 32, small models), measured here")
    if importlib.util.find_spec("torch") is None:
        section.unavailable = "PyTorch is not installed (pip install torch): the example benchmark needs it"
        return section
    import torch

    bm = _module()
    device = torch.device("cpu")
    steps = 8 if quick else 30
    for task in bm.TASKS:
        shares = {}
        rates = {}
        for label, size in (("small", bm.SIZES["small"][task]), ("articles", ARTICLES[task])):
            at_batch = step_seconds(bm, task, size, steps, device)
            at_one = step_seconds(bm, task, {**size, "batch": 1}, steps, device)
            shares[label] = min(at_one / at_batch, 1.0)
            rates[label] = size["batch"] / at_batch
        section.add(f"{task}: framework overhead share of a step at batch {bm.SIZES['small'][task]['batch']}",
                    shares["small"], shares["articles"], "share")
        section.add(f"{task}: samples/s at --size small", rates["small"], rates["articles"], "samples/s",
                    better="higher")
    section.notes.append(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {steps} timed steps after "
                         f"3 untimed; overhead share = batch-1 step time / step time at the batch (1.000 = all "
                         f"overhead)")
    return section
