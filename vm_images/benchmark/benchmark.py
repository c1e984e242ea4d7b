"""An example spotcron job: the deep-learning training benchmark from the recipe's articles.

Trains three small models on synthetic data shaped like the classic Keras examples and times a
fixed number of steps of each, so the same container can be compared across machine types
(CPU vs GPU, Spot vs on-demand):

    mlp   MNIST-shaped   (784,) inputs, 10 classes     Dense 128 ReLU, Dense 10
    cnn   CIFAR-10-shaped (3, 32, 32), 10 classes      2 x (Conv 3x3, ReLU, MaxPool 2), Dense 10
    lstm  IMDb-shaped    80 tokens of 5000, 2 classes  Embedding 64, LSTM 64, Dense 1

PyTorch is used when it can be imported (on the GPU when one is visible); otherwise a NumPy
implementation of the same models, forward and backward, trains on the CPU. The labels come
from a fixed random "teacher", so the losses fall: the work is real training, not a busy loop.

Writes metrics.json to the results directory ($SPOTCRON_RESULTS_DIR, else /results), in
spotcron's metrics contract (docs/benchmarks.md): the work done in training samples, and named
metrics with units; the job's benchmark.time_metric picks train_seconds as each run's time.

    {"work": {"value": SAMPLES, "unit": "samples"},
     "metrics": {"train_seconds": {"value", "unit": "s"}, "mlp_seconds": ..., "cnn_seconds": ...,
                 "lstm_seconds": ..., "samples_per_second": {"value", "unit": "samples/s"},
                 "mlp_last_loss": {"value", "unit": "1"}, ...},
     "benchmark": "spotcron-dl", "framework", "device", "steps", "batch", "host": {...}, "run_id",
     "started_at", "finished_at",
     "tasks": {"mlp": {"model", "dataset", "input_shape", "classes", "steps", "batch", "seconds",
                       "samples_per_second", "device", "framework", "parameters",
                       "first_loss", "last_loss", "resumed"}, ...}}

A finished task is recorded in the checkpoint directory ($SPOTCRON_CHECKPOINT_DIR, else
/checkpoint, when writable): after a preemption the next attempt keeps its figures and runs
only the tasks that had not finished.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

TASKS = {
    "mlp": {"model": "Dense 128 ReLU, Dense 10", "dataset": "mnist", "input_shape": [784], "classes": 10},
    "cnn": {"model": "2 x (Conv 3x3, ReLU, MaxPool 2), Dense 10", "dataset": "cifar10",
            "input_shape": [3, 32, 32], "classes": 10},
    "lstm": {"model": "Embedding 64, LSTM 64, Dense 1", "dataset": "imdb", "input_shape": [80],
             "classes": 2, "vocabulary": 5000},
}
LEARNING_RATE = {"mlp": 0.1, "cnn": 0.05, "lstm": 0.5}
PROGRESS_FILE = "benchmark-progress.json"


# --- synthetic data -----------------------------------------------------------------------------


def make_batches(task: str, batch: int, count: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """`count` batches shaped like the task's dataset, labelled by a fixed random teacher."""
    rng = np.random.default_rng(seed)
    spec = TASKS[task]
    batches = []
    if task == "mlp":
        teacher = rng.normal(size=(784, 10))
        for _ in range(count):
            x = rng.random((batch, 784), dtype=np.float32)
            batches.append((x, np.argmax((x - 0.5) @ teacher, axis=1)))
    elif task == "cnn":
        teacher = rng.normal(size=(48, 10))
        for _ in range(count):
            x = rng.normal(size=(batch, 3, 32, 32)).astype(np.float32)
            pooled = x.reshape(batch, 3, 4, 8, 4, 8).mean(axis=(3, 5)).reshape(batch, 48)
            batches.append((x, np.argmax(pooled @ teacher, axis=1)))
    else:
        vocabulary, length = spec["vocabulary"], spec["input_shape"][0]
        for _ in range(count):
            bias = rng.uniform(0.3, 0.7, size=(batch, 1))
            low = rng.random((batch, length)) < bias
            tokens = np.where(low, rng.integers(1, vocabulary // 2, (batch, length)),
                              rng.integers(vocabulary // 2, vocabulary, (batch, length)))
            batches.append((tokens, (low.mean(axis=1) > 0.5).astype(np.int64)))
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
    """Embedding, one LSTM layer (gates i, f, o, g), a logistic output on the last state."""

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
        for t in range(steps):
            x = p["emb"][tokens[:, t]]
            z = x @ p["wx"] + h @ p["wh"] + p["b"]
            i, f, o = _sigmoid(z[:, :hsz]), _sigmoid(z[:, hsz:2 * hsz]), _sigmoid(z[:, 2 * hsz:3 * hsz])
            g = np.tanh(z[:, 3 * hsz:])
            c_next = f * c + i * g
            tanh_c = np.tanh(c_next)
            cache.append((x, h, c, i, f, o, g, tanh_c))
            h, c = o * tanh_c, c_next
        logit = (h @ p["wo"] + p["bo"])[:, 0]
        prob = _sigmoid(logit)
        loss = -float(np.mean(y * np.log(prob + 1e-12) + (1 - y) * np.log(1 - prob + 1e-12)))
        dlogit = ((prob - y) / n).astype(dtype)[:, None]
        grads = {name: np.zeros_like(value) for name, value in p.items()}
        grads["wo"] = h.T @ dlogit
        grads["bo"] = dlogit.sum(0)
        dh = dlogit @ p["wo"].T
        dc = np.zeros_like(c)
        for t in reversed(range(steps)):
            x, h_prev, c_prev, i, f, o, g, tanh_c = cache[t]
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


# --- PyTorch models ------------------------------------------------------------------------------


def torch_trainer(task: str, seed: int):
    """(step function, device name, parameter count) for the same model in PyTorch."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if task == "mlp":
        model = nn.Sequential(nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    elif task == "cnn":
        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(16 * 8 * 8, 10))
    else:
        class Sentiment(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(TASKS["lstm"]["vocabulary"], 64)
                self.lstm = nn.LSTM(64, 64, batch_first=True)
                self.out = nn.Linear(64, 1)

            def forward(self, tokens):
                _, (h, _) = self.lstm(self.embed(tokens))
                return self.out(h[-1])[:, 0]

        model = Sentiment()
    model.to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE[task])
    loss_fn = nn.BCEWithLogitsLoss() if task == "lstm" else nn.CrossEntropyLoss()

    def step(x: np.ndarray, y: np.ndarray) -> float:
        inputs = torch.from_numpy(x).to(device)
        target = torch.from_numpy(y).to(device)
        target = target.float() if task == "lstm" else target
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), target)
        loss.backward()
        optimizer.step()
        return float(loss.detach())  # waits for the device, so timings include the GPU work

    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu"
    return step, f"{device.type}:{name}" if device.type == "cuda" else "cpu", sum(
        p.numel() for p in model.parameters())


def pick_framework(requested: str) -> str:
    if requested != "auto":
        return requested
    try:
        import torch  # noqa: F401
    except ImportError:
        return "numpy"
    return "torch"


# --- running and recording -----------------------------------------------------------------------


def run_task(task: str, framework: str, steps: int, batch: int, seed: int) -> dict[str, Any]:
    batches = make_batches(task, batch, count=min(steps, 8) + 1, seed=seed)
    if framework == "torch":
        step, device, parameters = torch_trainer(task, seed)
    else:
        model = numpy_model(task, np.random.default_rng(seed))
        lr = LEARNING_RATE[task]

        def step(x, y):
            return model.step(x, y, lr)

        device, parameters = "cpu", model.parameter_count
    first_loss = step(*batches[0])  # warm-up, not timed: allocations, kernels, caches
    losses = []
    started = time.perf_counter()
    for i in range(steps):
        losses.append(step(*batches[1 + i % (len(batches) - 1)]))
    seconds = time.perf_counter() - started
    spec = TASKS[task]
    return {"model": spec["model"], "dataset": spec["dataset"], "input_shape": spec["input_shape"],
            "classes": spec["classes"], "steps": steps, "batch": batch, "seconds": round(seconds, 6),
            "samples_per_second": round(steps * batch / seconds, 2) if seconds > 0 else None,
            "device": device, "framework": framework, "parameters": int(parameters),
            "first_loss": round(float(first_loss), 6), "last_loss": round(float(losses[-1]), 6) if losses else None,
            "resumed": False}


def writable_dir(path: Path) -> Path | None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_text("")
        probe.unlink()
        return path
    except OSError:
        return None


def load_progress(checkpoint: Path | None, config: dict[str, Any]) -> dict[str, Any]:
    if checkpoint is None or not (checkpoint / PROGRESS_FILE).exists():
        return {}
    try:
        saved = json.loads((checkpoint / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return saved.get("done", {}) if saved.get("config") == config else {}


def save_progress(checkpoint: Path | None, config: dict[str, Any], done: dict[str, Any]) -> None:
    if checkpoint is None:
        return
    tmp = checkpoint / (PROGRESS_FILE + ".tmp")
    tmp.write_text(json.dumps({"config": config, "done": done}, indent=2))
    tmp.replace(checkpoint / PROGRESS_FILE)  # atomic: a preemption never leaves half a file


def figures_line(task: str, m: dict[str, Any]) -> str:
    shape = "x".join(str(d) for d in m["input_shape"])
    rate = f"{m['samples_per_second']:>10.1f}" if m["samples_per_second"] else "         -"
    note = "  (from checkpoint)" if m["resumed"] else ""
    return (f"{task:<5} {m['dataset']:<8} {shape:<8} {m['steps']:>4} steps  {m['seconds']:>8.3f} s  "
            f"{rate} samples/s  {m['device']} {m['framework']}{note}")


def contract_metrics(results: dict[str, Any], train_seconds: float, samples: int) -> dict[str, Any]:
    """The named metrics, each with its unit, that spotcron's report compares across runs."""
    named: dict[str, Any] = {"train_seconds": {"value": train_seconds, "unit": "s"}}
    if train_seconds > 0:
        named["samples_per_second"] = {"value": round(samples / train_seconds, 2), "unit": "samples/s"}
    for task, m in results.items():
        named[f"{task}_seconds"] = {"value": m["seconds"], "unit": "s"}
        if m["last_loss"] is not None:
            named[f"{task}_last_loss"] = {"value": m["last_loss"], "unit": "1"}
    return named


def main(argv: list[str] | None = None, environ: dict[str, str] | None = None) -> int:
    environ = dict(os.environ if environ is None else environ)
    parser = argparse.ArgumentParser(description="Time small MLP, CNN and LSTM training steps.")
    parser.add_argument("--steps", type=int, default=20, help="timed training steps per task (default 20)")
    parser.add_argument("--batch", type=int, default=32, help="batch size (default 32)")
    parser.add_argument("--tasks", default="mlp,cnn,lstm", help="comma-separated subset of mlp,cnn,lstm")
    parser.add_argument("--framework", choices=("auto", "torch", "numpy"), default="auto")
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

    framework = pick_framework(args.framework)
    started_at = datetime.now(UTC)
    config = {"steps": args.steps, "batch": args.batch, "framework": framework, "seed": args.seed}
    checkpoint = writable_dir(args.checkpoint)
    done = load_progress(checkpoint, config)
    restored = [t for t in tasks if t in done]
    print(f"spotcron benchmark: {', '.join(tasks)} with {framework}, {args.steps} steps of {args.batch}"
          + (f"; {', '.join(restored)} restored from {checkpoint}" if restored else ""), flush=True)
    results: dict[str, Any] = {}
    for task in tasks:
        if task in done:
            results[task] = {**done[task], "resumed": True}
        else:
            results[task] = run_task(task, framework, args.steps, args.batch, args.seed)
            done[task] = results[task]
            save_progress(checkpoint, config, done)
        print(figures_line(task, results[task]), flush=True)

    devices = sorted({m["device"] for m in results.values()})
    train_seconds = round(sum(m["seconds"] for m in results.values()), 6)
    samples = sum(m["steps"] * m["batch"] for m in results.values())
    metrics = {
        "work": {"value": samples, "unit": "samples"},
        "metrics": contract_metrics(results, train_seconds, samples),
        "benchmark": "spotcron-dl", "version": 2, "framework": framework, "device": ",".join(devices),
        "steps": args.steps, "batch": args.batch, "tasks": results,
        "host": {"cpus": os.cpu_count(), "machine": platform.machine(), "python": platform.python_version(),
                 "numpy": np.__version__},
        "run_id": environ.get("SPOTCRON_RUN_ID"), "attempt": int(environ.get("SPOTCRON_ATTEMPT", "1")),
        "started_at": started_at.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
    }
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    print(f"total {train_seconds:.3f} s for {samples} samples; wrote {args.results / 'metrics.json'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
