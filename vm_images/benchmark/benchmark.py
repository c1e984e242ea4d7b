"""The example spotcron job: a deep-learning training benchmark whose figures are the hardware's.

Three tasks shaped like the classic articles' models, trained with plain PyTorch loops:

    mlp   MNIST-shaped    (784,) inputs, 10 classes     784-W-W-10 ReLU MLP
    cnn   CIFAR-10-shaped (3, 32, 32), 10 classes       4 conv layers (W, 2W, 4W, 4W) with pooling, dense 10
    lstm  IMDb-shaped     80 tokens of 5000, 2 classes  embedding E, bidirectional LSTM 2 layers of W, dense 1

Sizes are chosen so that the hardware, not Python, bounds the timed loop (`--size gpu`, the
default: MLP width 2048 at batch 2048, CNN width 64 at batch 512, LSTM embedding 128 and 2
layers of 256 at batch 2048: on an H100 these keep the GPU busy most of each step); `--size
small` is for quick CPU runs and tests. What is timed:

- `--warmup` steps first, untimed (allocations, cuDNN's algorithm search, caches);
- then `--steps` training steps back to back, with no host-device synchronisation inside the
  loop (losses stay on the device), one synchronisation before and one after;
- the training data lives on the device, generated before the loop: by default a batch of its
  own for every step (`--pool` cycles fewer), labelled by a fixed random "teacher" (the same
  rule for every task's held-out set);
- optional mixed precision (`--precision bf16`: autocast), named in the metrics.

The models must learn, not memorise: before and after the timed loop the loss on `--heldout`
samples the model never trained on, drawn from the same teacher, is measured; the run states
whether it fell by at least HELDOUT_MARGIN (20%). Recorded per task: samples/s, the seconds of
an epoch-equivalent (60,000 MNIST, 50,000 CIFAR-10, 25,000 IMDb samples at that rate), and on a
GPU its busy share during the timed loop (NVML through torch.cuda.utilization, which needs
nvidia-ml-py, else nvidia-smi).

Writes metrics.json to the results directory ($SPOTCRON_RESULTS_DIR, else /results) in
spotcron's metrics contract (docs/benchmarks.md): the work in training samples, and named
metrics with units; the job's benchmark.time_metric picks train_seconds (timed loops only).
A finished task is kept in the checkpoint directory ($SPOTCRON_CHECKPOINT_DIR, else /checkpoint):
after a preemption the next attempt runs only the others, and only if it runs on the same
device with the same settings (another device's figures are never restored).

Without PyTorch it exits with status 3 and says so: the NumPy models in benchmark_numpy.py are
a separate benchmark ("spotcron-dl-numpy"), never a silent fallback.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parent) not in sys.path:  # however this file is loaded: its shared part beside it
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark_common import Progress, learned_text, totals, write_metrics  # noqa: E402
from benchmark_measure import (  # noqa: E402
    PRECISIONS,
    GpuBusy,
    autocast_dtype,
    precision_label,
    resolve_precision,
    set_precision,
    timed_loop,
    train_flops,
    warm_up,
)

BENCHMARK = "spotcron-dl-torch"
VERSION = 4  # of the models, data and timing: figures of another version are never restored
TASKS: dict[str, dict[str, Any]] = {
    "mlp": {"dataset": "mnist", "input_shape": [784], "classes": 10, "epoch_samples": 60_000},
    "cnn": {"dataset": "cifar10", "input_shape": [3, 32, 32], "classes": 10, "epoch_samples": 50_000},
    "lstm": {"dataset": "imdb", "input_shape": [80], "classes": 2, "vocabulary": 5000, "epoch_samples": 25_000},
}
SIZES: dict[str, dict[str, dict[str, int]]] = {
    "gpu": {"mlp": {"batch": 2048, "width": 2048}, "cnn": {"batch": 512, "width": 64},
            "lstm": {"batch": 2048, "width": 256, "embed": 128}},
    "small": {"mlp": {"batch": 128, "width": 256}, "cnn": {"batch": 64, "width": 8},
              "lstm": {"batch": 64, "width": 32, "embed": 32}},
}
# Per size: (seconds, steps) of the time budget of each task, and the seconds of warm-up.
BUDGETS = {"gpu": {"min_seconds": 10.0, "warmup_seconds": 2.0}, "small": {"min_seconds": 0.0, "warmup_seconds": 0.0}}
INPUTS = ("device", "host")
LEARNING_RATE = {"mlp": 1e-3, "cnn": 1e-3, "lstm": 4e-3}
HELDOUT_MARGIN = 0.2  # the held-out loss must end at most 80% of where it started
PROGRESS_FILE = "benchmark-progress.json"
NO_TORCH = 3  # exit status without PyTorch (or without the GPU --device cuda asks for)


class Unavailable(Exception):
    """What the run needs is not here (PyTorch, a GPU): the message says what to do."""


# --- data: a fixed random teacher, on the device ---------------------------------------------------


def make_data(task: str, count: int, seed: int, device, teacher_seed: int = 1234):
    """`count` samples of the task's shape and their labels, generated on `device`.

    A fixed random "teacher" (from `teacher_seed`) defines each class: MNIST-like digit templates
    under heavy noise, CIFAR-like smooth class images shifted by up to 4 pixels under noise, and
    IMDb-like reviews whose few sentiment words lean to their class. The held-out set (another
    `seed`) follows the same teacher, so a falling held-out loss is learning, not memorising.
    """
    import torch

    teacher = torch.Generator().manual_seed(teacher_seed)
    data = torch.Generator().manual_seed(seed)
    classes = TASKS[task]["classes"]
    y = torch.randint(0, classes, (count,), generator=data)
    if task == "mlp":
        templates = torch.rand(classes, 784, generator=teacher)
        x = 0.2 * templates[y] + 0.8 * torch.rand(count, 784, generator=data)
    elif task == "cnn":
        templates = torch.randn(classes, 3, 32, 32, generator=teacher)
        templates = torch.nn.functional.avg_pool2d(templates, 5, stride=1, padding=2) * 5  # smooth, like photos
        x = torch.empty(count, 3, 32, 32)
        shifts = torch.randint(-4, 5, (count, 2), generator=data)
        for index in range(count):
            x[index] = torch.roll(templates[y[index]], shifts=tuple(shifts[index].tolist()), dims=(1, 2))
        x = 0.3 * x + torch.randn(count, 3, 32, 32, generator=data)
    else:
        vocabulary, length = TASKS["lstm"]["vocabulary"], TASKS["lstm"]["input_shape"][0]
        lexicon = torch.randperm(vocabulary - 1, generator=teacher)[:400] + 1  # 200 positive, 200 negative words
        x = torch.randint(1, vocabulary, (count, length), generator=data)
        sentiment = torch.rand(count, length, generator=data) < 0.25  # where a sentiment word stands
        leans = torch.rand(count, length, generator=data) < 0.8  # it leans to the review's class 4 times in 5
        positive = torch.where(leans, y[:, None] == 1, y[:, None] == 0)
        pick = torch.randint(0, 200, (count, length), generator=data)
        x = torch.where(sentiment, lexicon[pick + 200 * (~positive).long()], x)
    return x.to(device), y.to(device)


# --- models ----------------------------------------------------------------------------------------


def build_model(task: str, size: dict[str, int]):
    import torch
    from torch import nn

    width = size["width"]
    if task == "mlp":
        return nn.Sequential(nn.Linear(784, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                             nn.Linear(width, 10))
    if task == "cnn":
        w = width
        return nn.Sequential(
            nn.Conv2d(3, w, 3, padding=1), nn.ReLU(), nn.Conv2d(w, 2 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(2 * w, 4 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(4 * w, 4 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(4 * w * 16, 10))

    class Sentiment(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(TASKS["lstm"]["vocabulary"], size["embed"])
            self.lstm = nn.LSTM(size["embed"], width, num_layers=2, batch_first=True, bidirectional=True)
            self.out = nn.Linear(2 * width, 1)

        def forward(self, tokens):
            _, (hidden, _) = self.lstm(self.embed(tokens))
            return self.out(torch.cat([hidden[-2], hidden[-1]], dim=1))[:, 0]  # the last layer, both directions

    return Sentiment()


def model_text(task: str, size: dict[str, int]) -> str:
    w = size["width"]
    if task == "mlp":
        return f"784-{w}-{w}-10 ReLU MLP"
    if task == "cnn":
        return f"conv {w}, {2 * w}, {4 * w}, {4 * w} (3x3, ReLU, max-pool), dense 10"
    return f"embedding {size['embed']}, bidirectional LSTM 2x{w}, dense 1"


# --- one task --------------------------------------------------------------------------------------


def pick_device(requested: str):
    try:
        import torch
    except ImportError:
        raise Unavailable("PyTorch is not installed (pip install torch, or build vm_images/benchmark/Dockerfile); "
                          "the NumPy models are a separate benchmark: vm_images/benchmark/benchmark_numpy.py") from None
    if requested == "cuda" and not torch.cuda.is_available():
        raise Unavailable("--device cuda, but PyTorch sees no CUDA GPU (CUDA_VISIBLE_DEVICES="
                          f"{os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')!r}, torch {torch.__version__}, built "
                          f"for CUDA {torch.version.cuda}); not run on the CPU")
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(requested)


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), so a resumed run never mixes two CPU platforms' tasks."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def device_name(device) -> str:
    import torch

    return f"cuda:{torch.cuda.get_device_name(device)}" if device.type == "cuda" else "cpu"


def heldout(model, task: str, data, batch: int) -> tuple[float, float]:
    """Mean loss and accuracy on the held-out samples, without training."""
    import torch

    x, y = data
    model.eval()
    total_loss = correct = 0.0
    with torch.no_grad():
        for start in range(0, len(x), batch):
            out = model(x[start:start + batch]).float()
            target = y[start:start + batch]
            if task == "lstm":
                total_loss += float(torch.nn.functional.binary_cross_entropy_with_logits(
                    out, target.float(), reduction="sum"))
                correct += float(((out > 0).long() == target).sum())
            else:
                total_loss += float(torch.nn.functional.cross_entropy(out, target, reduction="sum"))
                correct += float((out.argmax(dim=1) == target).sum())
    model.train()
    return total_loss / len(x), correct / len(x)


def run_task(task: str, *, size: dict[str, int], steps: int, warmup: int, device, precision: str = "fp32",
             pool: int = 0, heldout_samples: int = 4096, seed: int = 0, min_seconds: float = 0.0,
             warmup_seconds: float = 0.0, input_mode: str = "device") -> dict[str, Any]:
    """Train `task` for at least `steps` steps and `min_seconds` after an untimed warm-up of at least
    `warmup` steps and `warmup_seconds`. `input_mode` host keeps the batches in (pinned) host memory
    and copies each to the device inside the timed step, as a data loader's training loop does."""
    import torch

    torch.manual_seed(seed)
    precision = resolve_precision(precision, device)
    set_precision(precision, device)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    batch = size["batch"]
    pool = pool or steps + warmup
    model = build_model(task, size).to(device)
    if task == "cnn" and device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE[task])
    loss_fn = torch.nn.BCEWithLogitsLoss() if task == "lstm" else torch.nn.CrossEntropyLoss()
    on_host = input_mode == "host" and device.type == "cuda"
    cpu = torch.device("cpu")
    train_x, train_y = make_data(task, pool * batch, seed + 1, cpu if on_host else device)
    if task == "lstm":
        train_y = train_y.float()
    if task == "cnn" and device.type == "cuda":
        train_x = train_x.contiguous(memory_format=torch.channels_last)
    if on_host:  # pinned: the copy to the device is a DMA that overlaps the previous step's work
        train_x, train_y = train_x.pin_memory(), train_y.pin_memory()
    test = make_data(task, heldout_samples, seed + 2, device)
    dtype = autocast_dtype(precision)
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")

    def step(i: int):
        start = (i % pool) * batch
        x, y = train_x[start:start + batch], train_y[start:start + batch]
        if on_host:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = loss_fn(model(x).float(), y)
        scaler.scale(loss).backward()
        if task == "lstm":  # recurrent gradients spike now and then; no host sync: clipping stays on the device
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    loss_start, accuracy_start = heldout(model, task, test, batch)
    first = step(0)
    # Untimed: allocations, cuDNN's algorithm search, caches, and the GPU's clocks coming up.
    warmed = 1 + warm_up(lambda i: step(i + 1), sync, steps=max(0, warmup - 1), seconds=warmup_seconds)
    busy = GpuBusy(device) if device.type == "cuda" else None
    with busy if busy is not None else contextlib.nullcontext():
        # No .item() in a chunk: the loop never waits for the device until the chunk ends.
        steps, seconds, last = timed_loop(step, sync, min_steps=steps, min_seconds=min_seconds, first_index=warmed)
    last = first if last is None else last
    loss_end, accuracy_end = heldout(model, task, test, batch)
    rate = steps * batch / seconds if seconds > 0 else None
    flops = train_flops(task, size)
    spec = TASKS[task]
    return {
        "model": model_text(task, size), "dataset": spec["dataset"], "input_shape": spec["input_shape"],
        "classes": spec["classes"], "steps": steps, "warmup": warmed, "batch": batch, "seconds": seconds,
        "samples_per_second": rate,
        "epoch_seconds": spec["epoch_samples"] / rate if rate else None,
        "train_gflop_per_sample": flops / 1e9, "tflops": flops * rate / 1e12 if rate else None,
        "input": "host-to-device copy per step" if on_host else "on the device",
        "device": device_name(device), "framework": "torch", "precision": precision,
        "precision_label": precision_label(precision, device),
        "parameters": sum(p.numel() for p in model.parameters()),
        "first_loss": float(first), "last_loss": float(last),
        "heldout_loss_start": loss_start, "heldout_loss": loss_end,
        "heldout_accuracy_start": accuracy_start, "heldout_accuracy": accuracy_end,
        "heldout_fell": loss_end <= (1 - HELDOUT_MARGIN) * loss_start,
        "gpu_busy": busy.share if busy is not None else None,
        "gpu_busy_samples": len(busy.samples) if busy is not None else 0,
        "gpu_busy_source": busy.source if busy is not None else None,
        "resumed": False,
    }


# --- the run ---------------------------------------------------------------------------------------


def figures_line(task: str, m: dict[str, Any]) -> str:
    rate = f"{m['samples_per_second']:>10.1f}" if m["samples_per_second"] else "         -"
    busy = f"  GPU busy {m['gpu_busy']:.0%}" if m.get("gpu_busy") is not None else ""
    busy += f"  {m['tflops']:.3g} TFLOP/s" if m.get("tflops") else ""
    learned = learned_text(m, HELDOUT_MARGIN)
    note = "  (from checkpoint)" if m["resumed"] else ""
    return (f"{task:<5} {m['dataset']:<8} batch {m['batch']:<5} {m['steps']:>4} steps {m['seconds']:>9.3f} s "
            f"{rate} samples/s  held-out loss {m['heldout_loss_start']:.3f} -> {m['heldout_loss']:.3f} ({learned})"
            f"{busy}  {m['device']}{note}")


def contract_metrics(results: dict[str, Any], train_seconds: float, samples: int) -> dict[str, Any]:
    """The named metrics, each with its unit, that spotcron's report compares across runs."""
    named: dict[str, Any] = {"train_seconds": {"value": train_seconds, "unit": "s"}}
    if train_seconds > 0:
        named["samples_per_second"] = {"value": samples / train_seconds, "unit": "samples/s"}
    for task, m in results.items():
        figures = {"seconds": (m["seconds"], "s"), "samples_per_second": (m["samples_per_second"], "samples/s"),
                   "epoch_seconds": (m["epoch_seconds"], "s"), "heldout_loss": (m["heldout_loss"], "1"),
                   "heldout_loss_start": (m["heldout_loss_start"], "1"),
                   "heldout_accuracy": (m["heldout_accuracy"], "1"), "gpu_busy": (m.get("gpu_busy"), "1"),
                   "tflops": (m.get("tflops"), "TFLOP/s")}
        for name, (value, unit) in figures.items():
            if value is not None and math.isfinite(value):
                named[f"{task}_{name}"] = {"value": value, "unit": unit}
    return named


def parse_args(argv: list[str] | None, environ: dict[str, str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Train an MLP, a CNN and a bidirectional LSTM; time them.")
    parser.add_argument("--tasks", default="mlp,cnn,lstm", help="comma-separated subset of mlp,cnn,lstm")
    parser.add_argument("--size", choices=sorted(SIZES), default="gpu",
                        help="gpu: sizes that keep a GPU busy (default); small: quick CPU runs")
    parser.add_argument("--batch", type=int, help="one batch size for every task (default: the size's)")
    parser.add_argument("--steps", type=int, default=50,
                        help="timed training steps per task, at least (default 50)")
    parser.add_argument("--min-seconds", type=float, default=None,
                        help="train each task at least this long, timed (default: 10 at --size gpu, 0 at small): "
                             "a 20 ms loop measures launch jitter, not the GPU")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first, at least (default 5)")
    parser.add_argument("--warmup-seconds", type=float, default=None,
                        help="untimed warm-up of at least this long (default: 2 at --size gpu, 0 at small)")
    parser.add_argument("--input", choices=INPUTS, default="device",
                        help="device: batches wait on the device (the hardware's step rate); host: batches in "
                             "pinned host memory, copied to the GPU in every timed step (a training loop's input "
                             "path)")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads for PyTorch (default: its own choice, or OMP_NUM_THREADS)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="auto: the GPU when PyTorch sees one; cuda: fail rather than run on the CPU")
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="fp32 (TF32 allowed on Ampere and later, and labelled so), fp32-strict (no TF32), "
                             "bf16 (autocast), fp16 (autocast + GradScaler: a T4's mixed precision), auto (bf16 "
                             "where native, else fp16 on a GPU, fp32 on a CPU); named in the metrics")
    parser.add_argument("--pool", type=int, default=0,
                        help="training batches kept on the device, cycled (default: warm-up + steps, every step "
                             "a batch of its own)")
    parser.add_argument("--heldout", type=int, default=4096, help="held-out samples (default 4096)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", type=Path, default=Path(environ.get("SPOTCRON_RESULTS_DIR", "/results")))
    parser.add_argument("--checkpoint", type=Path,
                        default=Path(environ.get("SPOTCRON_CHECKPOINT_DIR", "/checkpoint")))
    args = parser.parse_args(argv)
    args.task_list = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in args.task_list if t not in TASKS]
    if unknown or not args.task_list:
        parser.error(f"--tasks: unknown {unknown or args.tasks!r}; choose from {','.join(TASKS)}")
    if args.steps < 1 or args.warmup < 1 or args.pool < 0 or args.heldout < 1 or (args.batch or 1) < 1 \
            or (args.threads or 1) < 1:
        parser.error("--steps, --warmup, --heldout, --batch and --threads must be at least 1, --pool at least 0")
    budget = BUDGETS[args.size]
    args.min_seconds = budget["min_seconds"] if args.min_seconds is None else args.min_seconds
    args.warmup_seconds = budget["warmup_seconds"] if args.warmup_seconds is None else args.warmup_seconds
    if args.min_seconds < 0 or args.warmup_seconds < 0:
        parser.error("--min-seconds and --warmup-seconds must be at least 0")
    args.pool = args.pool or args.steps + args.warmup
    return args


def main(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> int:
    environ = dict(os.environ if environ is None else environ)
    args = parse_args(argv, environ)
    try:
        device = pick_device(args.device)
    except Unavailable as exc:
        print(f"spotcron benchmark: {exc}", file=sys.stderr)
        return NO_TORCH
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    precision = resolve_precision(args.precision, device)
    sizes = {task: {**SIZES[args.size][task], **({"batch": args.batch} if args.batch else {})} for task in TASKS}
    started_at = datetime.now(UTC)
    name = device_name(device)
    # Another device, size or version never restores these figures: they would not be this run's.
    config = {"benchmark": BENCHMARK, "version": VERSION, "device": name, "cpu": cpu_model(), "torch": torch.__version__,
              "sizes": sizes, "steps": args.steps, "min_seconds": args.min_seconds, "warmup": args.warmup,
              "warmup_seconds": args.warmup_seconds, "precision": precision, "input": args.input, "pool": args.pool,
              "heldout": args.heldout, "seed": args.seed, "threads": torch.get_num_threads()}
    progress = Progress(args.checkpoint, PROGRESS_FILE, config)
    label = precision_label(precision, device)
    print(f"spotcron benchmark: {', '.join(args.task_list)} on {name} with torch {torch.__version__}, "
          f"{args.size} sizes, warm-up {args.warmup}+ steps and {args.warmup_seconds:g}+ s, timed {args.steps}+ steps "
          f"and {args.min_seconds:g}+ s, {label}, input {args.input}, {torch.get_num_threads()} CPU threads"
          + progress.restored(args.task_list), flush=True)
    results = progress.run(args.task_list, lambda task: run_task(
        task, size=sizes[task], steps=args.steps, warmup=args.warmup, device=device, precision=precision,
        pool=args.pool, heldout_samples=args.heldout, seed=args.seed, min_seconds=args.min_seconds,
        warmup_seconds=args.warmup_seconds, input_mode=args.input), figures_line)

    train_seconds, samples = totals(results)
    named = contract_metrics(results, train_seconds, samples)
    named["cpu_threads"] = {"value": torch.get_num_threads(), "unit": "threads"}
    metrics = {
        "work": {"value": samples, "unit": "samples"},
        "metrics": named,
        "benchmark": BENCHMARK, "version": VERSION, "framework": "torch", "torch": torch.__version__,
        "cuda": torch.version.cuda, "device": name, "precision": precision, "precision_label": label,
        "input": args.input, "size": args.size, "cpu": cpu_model(),
        "heldout_margin": HELDOUT_MARGIN, "tasks": results,
        "host": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "machine": platform.machine(),
                 "python": platform.python_version()},
    }
    path = write_metrics(args.results, metrics, environ, started_at)
    print(f"total {train_seconds:.3f} s for {samples} samples; wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
