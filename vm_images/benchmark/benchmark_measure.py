"""How benchmark.py measures: the time budget, the warm-up, the precision it runs in (and its
label), the model FLOPs behind achieved TFLOP/s, and the GPU busy share.

- Time budget: a task trains for at least `min_seconds` and at least `min_steps` steps. The loop
  runs in chunks with one synchronisation between chunks (none inside one), each chunk sized from
  the rate so far, so a 10-20 ms loop (an MLP on an H100) becomes seconds and launch jitter stops
  deciding the figure, while a slow CPU still stops after `min_steps`.
- Warm-up: at least `warmup` steps and at least `warmup_seconds`, untimed: allocations, cuDNN's
  algorithm search, caches, and a GPU's clocks, which sit low after seconds of host-side set-up.
- Precision: `fp32` on a GPU with TF32 (compute capability 8.0 and later: A100, L4, H100) lets
  matmuls and convolutions run as TF32 and says so, `fp32 (TF32 allowed)`; `fp32-strict` forbids
  it; `bf16` is autocast to bfloat16 (emulated, slowly, before compute capability 8.0); `fp16` is
  autocast to float16 with a GradScaler, the mixed precision of a T4 or V100; `auto` picks bf16
  where it is native, fp16 on older GPUs and fp32 on a CPU.
- Achieved TFLOP/s: the model's FLOPs per trained sample (a multiply-add counts 2, training 3x
  the forward pass: forward, and backward's two products), times the samples, over the measured
  seconds. Unlike NVML's busy share, which reads near 100% for a loop of small kernels that
  leaves the SMs idle, it says how much arithmetic the hardware did.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

PRECISIONS = ("auto", "fp32", "fp32-strict", "bf16", "fp16")
TRAIN_FACTOR = 3  # training FLOPs per forward FLOP


def resolve_precision(requested: str, device) -> str:
    """`auto` made concrete for `device`: bf16 where native, fp16 on older GPUs, fp32 on a CPU."""
    if requested != "auto":
        return requested
    if device.type != "cuda":
        return "fp32"
    import torch

    return "bf16" if torch.cuda.get_device_capability(device)[0] >= 8 else "fp16"


def precision_label(precision: str, device) -> str:
    """What the arithmetic was, as the metrics say it: `fp32 (TF32 allowed)` on Ampere and later."""
    if precision == "fp32" and device.type == "cuda":
        import torch

        if torch.cuda.get_device_capability(device)[0] >= 8:
            return "fp32 (TF32 allowed)"
        return "fp32 (no TF32 on this GPU)"
    if precision == "fp32-strict":
        return "fp32 (strict: TF32 off)"
    if precision == "fp16":
        return "fp16 autocast + GradScaler"
    if precision == "bf16":
        return "bf16 autocast"
    return precision


def set_precision(precision: str, device) -> None:
    import torch

    if device.type == "cuda":
        allowed = precision != "fp32-strict"
        torch.backends.cuda.matmul.allow_tf32 = allowed
        torch.backends.cudnn.allow_tf32 = allowed


def autocast_dtype(precision: str):
    import torch

    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)


# --- model FLOPs -------------------------------------------------------------------------------------


def forward_flops(task: str, size: dict[str, int], *, classes: int = 10, length: int = 80) -> float:
    """FLOPs of one sample's forward pass (2 per multiply-add), counted from the layers' shapes."""
    w = size["width"]
    if task == "mlp":
        return 2.0 * (784 * w + w * w + w * classes)
    if task == "cnn":
        convs = [(3, w, 32), (w, 2 * w, 32), (2 * w, 4 * w, 16), (4 * w, 4 * w, 8)]  # (in, out, side)
        return sum(2.0 * cin * cout * 9 * side * side for cin, cout, side in convs) + 2.0 * 4 * w * 16 * classes
    embed = size["embed"]
    # Per time step and direction, an LSTM layer multiplies [input, hidden] by 4 gates of width w.
    layers = [(embed, w), (2 * w, w)]
    recurrent = sum(2 * 2.0 * 4 * hidden * (inputs + hidden) for inputs, hidden in layers)  # x2 directions
    return recurrent * length + 2.0 * 2 * w


def train_flops(task: str, size: dict[str, int]) -> float:
    return TRAIN_FACTOR * forward_flops(task, size)


# --- the timed loop ----------------------------------------------------------------------------------


def warm_up(step: Callable[[int], Any], sync: Callable[[], None], *, steps: int, seconds: float) -> int:
    """Untimed steps: at least `steps` and at least `seconds`; how many ran."""
    done = 0
    started = time.perf_counter()
    while done < steps or time.perf_counter() - started < seconds:
        step(done)
        done += 1
        if done >= steps:
            sync()  # time only counts what the device finished
    return done


def timed_loop(step: Callable[[int], Any], sync: Callable[[], None], *, min_steps: int, min_seconds: float,
               first_index: int = 0, max_chunk: int = 100_000) -> tuple[int, float, Any]:
    """(steps, seconds, the last step's value): at least `min_steps` and `min_seconds`.

    No synchronisation inside a chunk; between chunks one, to read the clock truthfully."""
    sync()
    started = time.perf_counter()
    done, last, chunk = 0, None, min_steps
    while True:
        for i in range(chunk):
            last = step(first_index + done + i)
        done += chunk
        sync()
        elapsed = time.perf_counter() - started
        if done >= min_steps and elapsed >= min_seconds:
            return done, elapsed, last
        rate = done / elapsed if elapsed > 0 else float(max_chunk)
        # Enough for the time left (and a little over), at most doubling what ran so far.
        chunk = max(1, min(max_chunk, done, int((min_seconds - elapsed) * rate * 1.05) + 1))


# --- GPU busy share ----------------------------------------------------------------------------------


class GpuBusy:
    """Samples the GPU's utilisation (the share of time a kernel ran) from the start of the timed
    loop, every `interval_s`: NVML through torch.cuda.utilization, else nvidia-smi."""

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
        while True:  # a sample at once: a loop shorter than the interval still gets one
            value = self._read()
            if value is not None:
                self.samples.append(value / 100)
            elif self.source == "none":
                return
            if self._stop.wait(self.interval_s):
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
