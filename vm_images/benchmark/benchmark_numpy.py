"""A separate benchmark: the example's three models written in NumPy, forward and backward by hand.

This is not the example benchmark (benchmark.py, PyTorch) and never stands in for it: its
metrics.json names itself "spotcron-dl-numpy", and its figures measure NumPy's CPU code, not a
GPU or a framework. It is here for hosts without PyTorch and as a check of the models' maths.

    mlp   MNIST-shaped   (784,) inputs, 10 classes     Dense 128 ReLU, Dense 10
    cnn   CIFAR-10-shaped (3, 32, 32), 10 classes      2 x (Conv 3x3, ReLU, MaxPool 2), Dense 10
    lstm  IMDb-shaped    80 tokens of 5000, 2 classes  Embedding 64, LSTM 64 (mean over time), Dense 1

The labels come from a fixed random "teacher" (its own seed), every timed step trains on a batch
of its own, and the loss on held-out samples from the same teacher is measured before and after
the timed steps: it must fall (by HELDOUT_MARGIN) for the models to have learned, not memorised.

Writes metrics.json to the results directory ($SPOTCRON_RESULTS_DIR, else /results) in
spotcron's metrics contract (docs/benchmarks.md), like benchmark.py, and keeps finished tasks in
the checkpoint directory ($SPOTCRON_CHECKPOINT_DIR, else /checkpoint) across a preemption.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

if str(Path(__file__).resolve().parent) not in sys.path:  # however this file is loaded: its shared part beside it
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark_common import Progress, learned_text, totals, write_metrics  # noqa: E402

TASKS = {
    "mlp": {"model": "Dense 128 ReLU, Dense 10", "dataset": "mnist", "input_shape": [784], "classes": 10},
    "cnn": {"model": "2 x (Conv 3x3, ReLU, MaxPool 2), Dense 10", "dataset": "cifar10",
            "input_shape": [3, 32, 32], "classes": 10},
    "lstm": {"model": "Embedding 64, LSTM 64 (mean over time), Dense 1", "dataset": "imdb", "input_shape": [80],
             "classes": 2, "vocabulary": 5000},
}
LEARNING_RATE = {"mlp": 0.1, "cnn": 0.05, "lstm": 1.0}
PROGRESS_FILE = "benchmark-numpy-progress.json"
BENCHMARK = "spotcron-dl-numpy"
VERSION = 3
HELDOUT_MARGIN = 0.05  # plain SGD on these small models: the held-out loss must end at most 95% of where it started
TEACHER_SEED = 1234


# --- synthetic data -----------------------------------------------------------------------------


def make_batches(task: str, batch: int, count: int, seed: int,
                 teacher_seed: int = TEACHER_SEED) -> list[tuple[np.ndarray, np.ndarray]]:
    """`count` batches shaped like the task's dataset, labelled by a fixed random teacher (from
    `teacher_seed`, so held-out batches of another `seed` follow the same rule)."""
    rng = np.random.default_rng(seed)
    teachers = np.random.default_rng(teacher_seed)
    spec = TASKS[task]
    batches = []
    if task == "mlp":
        teacher = teachers.normal(size=(784, 10))
        for _ in range(count):
            x = rng.random((batch, 784), dtype=np.float32)
            batches.append((x, np.argmax((x - 0.5) @ teacher, axis=1)))
    elif task == "cnn":
        teacher = teachers.normal(size=(48, 10))
        for _ in range(count):
            x = rng.normal(size=(batch, 3, 32, 32)).astype(np.float32)
            pooled = x.reshape(batch, 3, 4, 8, 4, 8).mean(axis=(3, 5)).reshape(batch, 48)
            batches.append((x, np.argmax(pooled @ teacher, axis=1)))
    else:
        # Reviews of random words among which sentiment words (50 positive, 50 negative) lean to the class.
        vocabulary, length = spec["vocabulary"], spec["input_shape"][0]
        lexicon = teachers.permutation(np.arange(1, vocabulary))[:100]
        for _ in range(count):
            labels = rng.integers(0, 2, batch)
            tokens = rng.integers(1, vocabulary, (batch, length))
            sentiment = rng.random((batch, length)) < 0.3
            positive = np.where(rng.random((batch, length)) < 0.8, labels[:, None] == 1, labels[:, None] == 0)
            words = lexicon[rng.integers(0, 50, (batch, length)) + 50 * (~positive)]
            batches.append((np.where(sentiment, words, tokens), labels.astype(np.int64)))
    return batches


# --- NumPy models: forward and backward by hand --------------------------------------------------


def softmax_cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, np.ndarray]:
    shifted = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(shifted)
    probs /= probs.sum(axis=1, keepdims=True)
    n = len(labels)
    loss = -float(np.log(probs[np.arange(n), labels] + 1e-12).mean())
    grad = probs
    grad[np.arange(n), labels] -= 1
    return loss, grad / n


class NumpyModel:
    params: dict[str, np.ndarray]

    def loss_and_grads(self, x: np.ndarray, y: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
        raise NotImplementedError

    def step(self, x: np.ndarray, y: np.ndarray, lr: float) -> float:
        loss, grads = self.loss_and_grads(x, y)
        for name, grad in grads.items():
            self.params[name] -= lr * grad
        return loss

    @property
    def parameter_count(self) -> int:
        return int(sum(p.size for p in self.params.values()))


def _init(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int, dtype) -> np.ndarray:
    return (rng.normal(size=shape) * np.sqrt(2.0 / fan_in)).astype(dtype)


class NumpyMLP(NumpyModel):
    def __init__(self, rng, n_in=784, hidden=128, n_out=10, dtype=np.float32):
        self.params = {"w1": _init(rng, (n_in, hidden), n_in, dtype), "b1": np.zeros(hidden, dtype),
                       "w2": _init(rng, (hidden, n_out), hidden, dtype), "b2": np.zeros(n_out, dtype)}

    def loss_and_grads(self, x, y):
        p = self.params
        pre = x @ p["w1"] + p["b1"]
        hidden = np.maximum(pre, 0)
        loss, dlogits = softmax_cross_entropy(hidden @ p["w2"] + p["b2"], y)
        dhidden = (dlogits @ p["w2"].T) * (pre > 0)
        return loss, {"w2": hidden.T @ dlogits, "b2": dlogits.sum(0),
                      "w1": x.T @ dhidden, "b1": dhidden.sum(0)}


def conv3x3_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Same-padded 3x3 convolution through im2col; returns the output and the columns."""
    n, c, h, width = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))  # n c h w 3 3
    cols = windows.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * width, c * 9)
    out = cols @ w.reshape(len(w), -1).T + b
    return out.reshape(n, h, width, len(w)).transpose(0, 3, 1, 2), cols


def conv3x3_backward(dout, x_shape, cols, w, need_dx: bool):
    n, c, h, width = x_shape
    flat = dout.transpose(0, 2, 3, 1).reshape(n * h * width, len(w))
    dw = (flat.T @ cols).reshape(w.shape)
    db = flat.sum(0)
    if not need_dx:
        return dw, db, None
    dcols = (flat @ w.reshape(len(w), -1)).reshape(n, h, width, c, 3, 3)
    dpadded = np.zeros((n, c, h + 2, width + 2), dtype=dout.dtype)
    for i in range(3):
        for j in range(3):
            dpadded[:, :, i:i + h, j:j + width] += dcols[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return dw, db, dpadded[:, :, 1:-1, 1:-1]


def maxpool2_forward(x):
    n, c, h, w = x.shape
    blocks = x.reshape(n, c, h // 2, 2, w // 2, 2)
    out = blocks.max(axis=(3, 5))
    mask = blocks == out[:, :, :, None, :, None]
    mask = mask / mask.sum(axis=(3, 5), keepdims=True)  # ties share the gradient
    return out, mask


def maxpool2_backward(dout, mask):
    n, c, h, _, w, _ = mask.shape
    return (mask * dout[:, :, :, None, :, None]).reshape(n, c, h * 2, w * 2)


class NumpyCNN(NumpyModel):
    def __init__(self, rng, channels=3, size=32, filters=(8, 16), n_out=10, dtype=np.float32):
        f1, f2 = filters
        flat = f2 * (size // 4) ** 2
        self.params = {"c1": _init(rng, (f1, channels, 3, 3), channels * 9, dtype), "cb1": np.zeros(f1, dtype),
                       "c2": _init(rng, (f2, f1, 3, 3), f1 * 9, dtype), "cb2": np.zeros(f2, dtype),
                       "w": _init(rng, (flat, n_out), flat, dtype), "b": np.zeros(n_out, dtype)}

    def loss_and_grads(self, x, y):
        p = self.params
        a1, cols1 = conv3x3_forward(x, p["c1"], p["cb1"])
        r1 = np.maximum(a1, 0)
        p1, mask1 = maxpool2_forward(r1)
        a2, cols2 = conv3x3_forward(p1, p["c2"], p["cb2"])
        r2 = np.maximum(a2, 0)
        p2, mask2 = maxpool2_forward(r2)
        flat = p2.reshape(len(x), -1)
        loss, dlogits = softmax_cross_entropy(flat @ p["w"] + p["b"], y)
        grads = {"w": flat.T @ dlogits, "b": dlogits.sum(0)}
        dp2 = (dlogits @ p["w"].T).reshape(p2.shape)
        da2 = maxpool2_backward(dp2, mask2) * (a2 > 0)
        grads["c2"], grads["cb2"], dp1 = conv3x3_backward(da2, p1.shape, cols2, p["c2"], need_dx=True)
        da1 = maxpool2_backward(dp1, mask1) * (a1 > 0)
        grads["c1"], grads["cb1"], _ = conv3x3_backward(da1, x.shape, cols1, p["c1"], need_dx=False)
        return loss, grads


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


class NumpyLSTM(NumpyModel):
    """Embedding, one LSTM layer (gates i, f, o, g), a logistic output on the mean of its states."""

    def __init__(self, rng, vocabulary=5000, embed=64, hidden=64, dtype=np.float32):
        self.hidden = hidden
        self.params = {"emb": (rng.normal(size=(vocabulary, embed)) * 0.1).astype(dtype),
                       "wx": _init(rng, (embed, 4 * hidden), embed, dtype),
                       "wh": _init(rng, (hidden, 4 * hidden), hidden, dtype),
                       "b": np.zeros(4 * hidden, dtype), "wo": _init(rng, (hidden, 1), hidden, dtype),
                       "bo": np.zeros(1, dtype)}
        self.params["b"][hidden:2 * hidden] = 1.0  # forget-gate bias: remember by default

    def loss_and_grads(self, tokens, y):
        p, hsz = self.params, self.hidden
        n, steps = tokens.shape
        dtype = p["wx"].dtype
        h = np.zeros((n, hsz), dtype)
        c = np.zeros((n, hsz), dtype)
        cache = []
        total = np.zeros((n, hsz), dtype)
        for t in range(steps):
            x = p["emb"][tokens[:, t]]
            z = x @ p["wx"] + h @ p["wh"] + p["b"]
            i, f, o = _sigmoid(z[:, :hsz]), _sigmoid(z[:, hsz:2 * hsz]), _sigmoid(z[:, 2 * hsz:3 * hsz])
            g = np.tanh(z[:, 3 * hsz:])
            c_next = f * c + i * g
            tanh_c = np.tanh(c_next)
            cache.append((x, h, c, i, f, o, g, tanh_c))
            h, c = o * tanh_c, c_next
            total += h
        mean = total / steps  # the readout sees every step's state, not only the last
        logit = (mean @ p["wo"] + p["bo"])[:, 0]
        prob = _sigmoid(logit)
        loss = -float(np.mean(y * np.log(prob + 1e-12) + (1 - y) * np.log(1 - prob + 1e-12)))
        dlogit = ((prob - y) / n).astype(dtype)[:, None]
        grads = {name: np.zeros_like(value) for name, value in p.items()}
        grads["wo"] = mean.T @ dlogit
        grads["bo"] = dlogit.sum(0)
        dmean = (dlogit @ p["wo"].T) / steps  # reaches every step's h
        dh = np.zeros_like(h)
        dc = np.zeros_like(c)
        for t in reversed(range(steps)):
            x, h_prev, c_prev, i, f, o, g, tanh_c = cache[t]
            dh = dh + dmean
            dc = dc + dh * o * (1 - tanh_c ** 2)
            dz = np.concatenate([dc * g * i * (1 - i), dc * c_prev * f * (1 - f),
                                 dh * tanh_c * o * (1 - o), dc * i * (1 - g ** 2)], axis=1)
            grads["wx"] += x.T @ dz
            grads["wh"] += h_prev.T @ dz
            grads["b"] += dz.sum(0)
            np.add.at(grads["emb"], tokens[:, t], dz @ p["wx"].T)
            dh = dz @ p["wh"].T
            dc = dc * f
        return loss, grads


def numpy_model(task: str, rng: np.random.Generator) -> NumpyModel:
    if task == "mlp":
        return NumpyMLP(rng)
    if task == "cnn":
        return NumpyCNN(rng)
    return NumpyLSTM(rng, vocabulary=TASKS["lstm"]["vocabulary"])


# --- running and recording -----------------------------------------------------------------------


def heldout_loss(model: NumpyModel, batches: list[tuple[np.ndarray, np.ndarray]]) -> float:
    return float(np.mean([model.loss_and_grads(x, y)[0] for x, y in batches]))


def run_task(task: str, steps: int, batch: int, seed: int, heldout_batches: int = 4) -> dict[str, Any]:
    batches = make_batches(task, batch, count=steps + 1, seed=seed)  # a batch of its own for every step
    test = make_batches(task, batch, count=heldout_batches, seed=seed + 10_000)
    model = numpy_model(task, np.random.default_rng(seed))
    lr = LEARNING_RATE[task]
    loss_start = heldout_loss(model, test)
    first_loss = model.step(*batches[0], lr)  # warm-up, not timed: allocations, caches
    losses = []
    started = time.perf_counter()
    for x, y in batches[1:]:
        losses.append(model.step(x, y, lr))
    seconds = time.perf_counter() - started
    loss_end = heldout_loss(model, test)
    spec = TASKS[task]
    return {"model": spec["model"], "dataset": spec["dataset"], "input_shape": spec["input_shape"],
            "classes": spec["classes"], "steps": steps, "batch": batch, "seconds": seconds,
            "samples_per_second": steps * batch / seconds if seconds > 0 else None,
            "device": "cpu", "framework": "numpy", "parameters": model.parameter_count,
            "first_loss": float(first_loss), "last_loss": float(losses[-1]),
            "heldout_loss_start": loss_start, "heldout_loss": loss_end,
            "heldout_fell": loss_end <= (1 - HELDOUT_MARGIN) * loss_start, "resumed": False}


def figures_line(task: str, m: dict[str, Any]) -> str:
    shape = "x".join(str(d) for d in m["input_shape"])
    rate = f"{m['samples_per_second']:>10.1f}" if m["samples_per_second"] else "         -"
    note = "  (from checkpoint)" if m["resumed"] else ""
    learned = learned_text(m, HELDOUT_MARGIN)
    return (f"{task:<5} {m['dataset']:<8} {shape:<8} {m['steps']:>4} steps  {m['seconds']:>8.3f} s  "
            f"{rate} samples/s  held-out loss {m['heldout_loss_start']:.3f} -> {m['heldout_loss']:.3f} ({learned})  "
            f"{m['device']} {m['framework']}{note}")


def contract_metrics(results: dict[str, Any], train_seconds: float, samples: int) -> dict[str, Any]:
    """The named metrics, each with its unit, that spotcron's report compares across runs."""
    named: dict[str, Any] = {"train_seconds": {"value": train_seconds, "unit": "s"}}
    if train_seconds > 0:
        named["samples_per_second"] = {"value": samples / train_seconds, "unit": "samples/s"}
    for task, m in results.items():
        named[f"{task}_seconds"] = {"value": m["seconds"], "unit": "s"}
        named[f"{task}_heldout_loss"] = {"value": m["heldout_loss"], "unit": "1"}
        named[f"{task}_heldout_loss_start"] = {"value": m["heldout_loss_start"], "unit": "1"}
    return named


def main(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> int:
    environ = dict(os.environ if environ is None else environ)
    parser = argparse.ArgumentParser(description="Time small MLP, CNN and LSTM training steps in NumPy.")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per task (default 20)")
    parser.add_argument("--batch", type=int, default=32, help="batch size (default 32)")
    parser.add_argument("--tasks", default="mlp,cnn,lstm", help="comma-separated subset of mlp,cnn,lstm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", type=Path, default=Path(environ.get("SPOTCRON_RESULTS_DIR", "/results")))
    parser.add_argument("--checkpoint", type=Path,
                        default=Path(environ.get("SPOTCRON_CHECKPOINT_DIR", "/checkpoint")))
    args = parser.parse_args(argv)
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = [t for t in tasks if t not in TASKS]
    if unknown or not tasks:
        parser.error(f"--tasks: unknown {unknown or args.tasks!r}; choose from {','.join(TASKS)}")
    if args.steps < 1 or args.batch < 1:
        parser.error("--steps and --batch must be at least 1")

    started_at = datetime.now(UTC)
    config = {"benchmark": BENCHMARK, "version": VERSION, "steps": args.steps, "batch": args.batch, "seed": args.seed}
    progress = Progress(args.checkpoint, PROGRESS_FILE, config)
    print(f"spotcron benchmark: {', '.join(tasks)} with numpy, {args.steps} steps of {args.batch}"
          + progress.restored(tasks), flush=True)
    results = progress.run(tasks, lambda task: run_task(task, args.steps, args.batch, args.seed), figures_line)

    train_seconds, samples = totals(results)
    metrics = {
        "work": {"value": samples, "unit": "samples"},
        "metrics": contract_metrics(results, train_seconds, samples),
        "benchmark": BENCHMARK, "version": VERSION, "framework": "numpy", "heldout_margin": HELDOUT_MARGIN,
        "device": ",".join(sorted({m["device"] for m in results.values()})),
        "steps": args.steps, "batch": args.batch, "tasks": results,
        "host": {"cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version(),
                 "numpy": np.__version__},
    }
    path = write_metrics(args.results, metrics, environ, started_at)
    print(f"total {train_seconds:.3f} s for {samples} samples; wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
