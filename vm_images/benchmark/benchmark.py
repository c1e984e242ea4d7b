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
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parent) not in sys.path:  # however this file is loaded: its shared part beside it
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark_common import Progress, totals, write_metrics  # noqa: E402

BENCHMARK = "spotcron-dl-torch"
VERSION = 3  # of the models, data and timing: figures of another version are never restored
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


# --- GPU busy share --------------------------------------------------------------------------------


class GpuBusy:
    """Samples the GPU's utilisation (the share of time a kernel ran) while the timed loop runs."""

    def __init__(self, device, interval_s: float = 0.1):
        self.device, self.interval_s = device, interval_s
        self.samples: list[float] = []
        self.source: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _read(self) -> float | None:
        import torch

        if self.source in (None, "nvml"):
            try:
                value = float(torch.cuda.utilization(self.device))
                self.source = "nvml"
                return value
            except Exception:  # noqa: BLE001 - no nvidia-ml-py, or NVML refused: try nvidia-smi
                self.source = "nvidia-smi"
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"
        try:
            out = subprocess.run(["nvidia-smi", "-i", visible, "--query-gpu=utilization.gpu",
                                  "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5)
            return float(out.stdout.split()[0]) if out.returncode == 0 and out.stdout.strip() else None
        except (OSError, ValueError, subprocess.TimeoutExpired):
            self.source = "none"
            return None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            value = self._read()
            if value is not None:
                self.samples.append(value / 100)
            elif self.source == "none":
                return

    def __enter__(self) -> GpuBusy:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    @property
    def share(self) -> float | None:
        return sum(self.samples) / len(self.samples) if self.samples else None


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
             pool: int = 0, heldout_samples: int = 4096, seed: int = 0) -> dict[str, Any]:
    import torch

    torch.manual_seed(seed)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    batch = size["batch"]
    pool = pool or steps + warmup
    model = build_model(task, size).to(device)
    if task == "cnn" and device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE[task])
    loss_fn = torch.nn.BCEWithLogitsLoss() if task == "lstm" else torch.nn.CrossEntropyLoss()
    train_x, train_y = make_data(task, pool * batch, seed + 1, device)
    if task == "lstm":
        train_y = train_y.float()
    if task == "cnn" and device.type == "cuda":
        train_x = train_x.contiguous(memory_format=torch.channels_last)
    test = make_data(task, heldout_samples, seed + 2, device)
    autocast = precision == "bf16"

    def step(i: int):
        start = (i % pool) * batch
        x, y = train_x[start:start + batch], train_y[start:start + batch]
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            loss = loss_fn(model(x), y)
        loss.backward()
        if task == "lstm":  # recurrent gradients spike now and then; no host sync: clipping stays on the device
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss.detach()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    loss_start, accuracy_start = heldout(model, task, test, batch)
    first = step(0)
    for i in range(1, warmup):  # untimed: allocations, cuDNN's algorithm search, caches
        step(i)
    sync()
    busy = GpuBusy(device) if device.type == "cuda" else None
    with busy if busy is not None else contextlib.nullcontext():
        started = time.perf_counter()
        last = first
        for i in range(steps):
            last = step(warmup + i)  # no .item() here: the loop never waits for the device
        sync()
        seconds = time.perf_counter() - started
    loss_end, accuracy_end = heldout(model, task, test, batch)
    rate = steps * batch / seconds if seconds > 0 else None
    spec = TASKS[task]
    return {
        "model": model_text(task, size), "dataset": spec["dataset"], "input_shape": spec["input_shape"],
        "classes": spec["classes"], "steps": steps, "warmup": warmup, "batch": batch, "seconds": seconds,
        "samples_per_second": rate,
        "epoch_seconds": spec["epoch_samples"] / rate if rate else None,
        "device": device_name(device), "framework": "torch", "precision": precision,
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
    learned = "fell" if m["heldout_fell"] else f"did NOT fall {HELDOUT_MARGIN:.0%}"
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
                   "heldout_accuracy": (m["heldout_accuracy"], "1"), "gpu_busy": (m.get("gpu_busy"), "1")}
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
    parser.add_argument("--steps", type=int, default=50, help="timed training steps per task (default 50)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto",
                        help="auto: the GPU when PyTorch sees one; cuda: fail rather than run on the CPU")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="bf16: mixed precision (autocast); named in the metrics")
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
    if args.steps < 1 or args.warmup < 1 or args.pool < 0 or args.heldout < 1 or (args.batch or 1) < 1:
        parser.error("--steps, --warmup, --heldout and --batch must be at least 1, --pool at least 0")
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

    sizes = {task: {**SIZES[args.size][task], **({"batch": args.batch} if args.batch else {})} for task in TASKS}
    started_at = datetime.now(UTC)
    name = device_name(device)
    # Another device, size or version never restores these figures: they would not be this run's.
    config = {"benchmark": BENCHMARK, "version": VERSION, "device": name, "torch": torch.__version__, "sizes": sizes, "steps": args.steps,
              "warmup": args.warmup, "precision": args.precision, "pool": args.pool, "heldout": args.heldout,
              "seed": args.seed}
    progress = Progress(args.checkpoint, PROGRESS_FILE, config)
    print(f"spotcron benchmark: {', '.join(args.task_list)} on {name} with torch {torch.__version__}, "
          f"{args.size} sizes, {args.warmup} warm-up + {args.steps} timed steps, {args.precision}"
          + progress.restored(args.task_list), flush=True)
    results = progress.run(args.task_list, lambda task: run_task(
        task, size=sizes[task], steps=args.steps, warmup=args.warmup, device=device, precision=args.precision,
        pool=args.pool, heldout_samples=args.heldout, seed=args.seed), figures_line)

    train_seconds, samples = totals(results)
    metrics = {
        "work": {"value": samples, "unit": "samples"},
        "metrics": contract_metrics(results, train_seconds, samples),
        "benchmark": BENCHMARK, "version": VERSION, "framework": "torch", "torch": torch.__version__,
        "cuda": torch.version.cuda, "device": name, "precision": args.precision, "size": args.size,
        "heldout_margin": HELDOUT_MARGIN, "tasks": results,
        "host": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(), "machine": platform.machine(),
                 "python": platform.python_version()},
    }
    path = write_metrics(args.results, metrics, environ, started_at)
    print(f"total {train_seconds:.3f} s for {samples} samples; wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
