"""The example job images' code, run locally: the bot and the deep-learning benchmark."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from spotcron.testing.waiting import wait_until

IMAGES = Path(__file__).resolve().parents[2] / "vm_images"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bot = _load("example_bot", IMAGES / "bot" / "bot.py")
benchmark = _load("example_benchmark_numpy", IMAGES / "benchmark" / "benchmark_numpy.py")
torch_benchmark = _load("example_benchmark", IMAGES / "benchmark" / "benchmark.py")


# --- the bot -------------------------------------------------------------------------------------


def test_bot_writes_a_post_and_its_record(tmp_path):
    env = {"SPOTCRON_RESULTS_DIR": str(tmp_path), "SPOTCRON_RUN_ID": "20260101-1000", "SPOTCRON_JOB": "bot"}
    assert bot.main([], env) == 0

    post = (tmp_path / "post.txt").read_text()
    record = json.loads((tmp_path / "post.json").read_text())
    assert post == record["text"] + "\n"
    assert record["text"][0].isupper() and record["text"].endswith(".")
    assert 3 <= record["words"] <= bot.MAX_WORDS
    assert (record["job"], record["run_id"], record["attempt"]) == ("bot", "20260101-1000", 1)
    assert record["seed"] == bot.seed_for("20260101-1000")


def test_bot_posts_are_repeatable_per_run_and_vary_across_runs(tmp_path):
    posts = {bot.compose(bot.seed_for(f"202601{day:02d}-1000")) for day in range(1, 11)}
    assert len(posts) >= 5
    assert bot.compose(123) == bot.compose(123)


def test_bot_runs_as_a_script_into_the_results_dir(tmp_path):
    done = subprocess.run([sys.executable, str(IMAGES / "bot" / "bot.py"), "--seed", "7"],
                          env={"SPOTCRON_RESULTS_DIR": str(tmp_path)}, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == (tmp_path / "post.txt").read_text().strip()
    assert json.loads((tmp_path / "post.json").read_text())["seed"] == 7


# --- the NumPy benchmark (a separate benchmark): its models are real -----------------------------------


def _numeric_gradient(model, x, y, name, index, eps=1e-5):
    param = model.params[name]
    saved = param[index]
    param[index] = saved + eps
    plus, _ = model.loss_and_grads(x, y)
    param[index] = saved - eps
    minus, _ = model.loss_and_grads(x, y)
    param[index] = saved
    return (plus - minus) / (2 * eps)


def _tiny(task: str, rng):
    if task == "mlp":
        model = benchmark.NumpyMLP(rng, n_in=6, hidden=5, n_out=3, dtype=np.float64)
        return model, rng.normal(size=(4, 6)), rng.integers(0, 3, 4)
    if task == "cnn":
        model = benchmark.NumpyCNN(rng, channels=2, size=8, filters=(3, 4), n_out=3, dtype=np.float64)
        return model, rng.normal(size=(2, 2, 8, 8)), rng.integers(0, 3, 2)
    model = benchmark.NumpyLSTM(rng, vocabulary=7, embed=3, hidden=4, dtype=np.float64)
    return model, rng.integers(0, 7, (3, 5)), rng.integers(0, 2, 3)


@pytest.mark.parametrize("task", ["mlp", "cnn", "lstm"])
def test_numpy_backward_matches_finite_differences(task):
    rng = np.random.default_rng(1)
    model, x, y = _tiny(task, rng)
    _, grads = model.loss_and_grads(x, y)
    assert set(grads) == set(model.params)
    for name, param in model.params.items():
        for _ in range(3):
            index = tuple(int(rng.integers(0, n)) for n in param.shape)
            if name == "emb":  # only rows of tokens that occur get a gradient
                index = (int(x[0, 0]), *index[1:])
            numeric = _numeric_gradient(model, x, y, name, index)
            assert grads[name][index] == pytest.approx(numeric, rel=1e-4, abs=1e-7), (task, name, index)


@pytest.mark.parametrize("task", ["mlp", "cnn", "lstm"])
def test_numpy_training_lowers_the_held_out_loss_by_the_stated_margin(task):
    """Every step trains on a batch of its own; the held-out batches come from the same teacher."""
    figures = benchmark.run_task(task, steps=100, batch=32, seed=3)
    assert figures["heldout_loss"] <= (1 - benchmark.HELDOUT_MARGIN) * figures["heldout_loss_start"], figures
    assert figures["heldout_fell"] is True


# --- the benchmark as a job ----------------------------------------------------------------------


def _run_benchmark(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"SPOTCRON_RESULTS_DIR": str(tmp_path / "results"), "SPOTCRON_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
           "SPOTCRON_RUN_ID": "20260101-1000"}
    return subprocess.run([sys.executable, str(IMAGES / "benchmark" / "benchmark_numpy.py"), *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_numpy_benchmark_writes_metrics_and_prints_per_task_figures(tmp_path):
    done = _run_benchmark(tmp_path, "--steps", "3", "--batch", "8")
    assert done.returncode == 0, done.stderr

    metrics = json.loads((tmp_path / "results" / "metrics.json").read_text())
    assert list(metrics["tasks"]) == ["mlp", "cnn", "lstm"]
    shapes = {"mlp": [784], "cnn": [3, 32, 32], "lstm": [80]}
    for task, figures in metrics["tasks"].items():
        assert figures["input_shape"] == shapes[task]
        assert (figures["steps"], figures["batch"], figures["framework"], figures["device"]) == (3, 8, "numpy", "cpu")
        assert figures["seconds"] > 0
        assert figures["samples_per_second"] == pytest.approx(3 * 8 / figures["seconds"], rel=1e-3)
        assert figures["resumed"] is False
    assert metrics["run_id"] == "20260101-1000"
    assert metrics["benchmark"] == "spotcron-dl-numpy"  # never taken for the PyTorch benchmark's figures
    # The contract spotcron checks at the run end: work in samples, named metrics with units.
    from spotcron.core.metrics import check_time_metric, parse_metrics

    checked = parse_metrics((tmp_path / "results" / "metrics.json").read_bytes())
    assert (checked.work.value, checked.work.unit) == (3 * 3 * 8, "samples")
    check_time_metric(checked, "train_seconds")
    assert checked.seconds("train_seconds") == pytest.approx(sum(f["seconds"] for f in metrics["tasks"].values()))
    assert checked.metrics["samples_per_second"].unit == "samples/s"
    lines = [line for line in done.stdout.splitlines() if "samples/s" in line]
    assert [line.split()[0] for line in lines] == ["mlp", "cnn", "lstm"]
    assert "mnist" in lines[0] and "3x32x32" in lines[1] and "imdb" in lines[2]


def test_numpy_benchmark_resumes_finished_tasks_after_a_preemption(tmp_path):
    first = _run_benchmark(tmp_path, "--steps", "2", "--batch", "4", "--tasks", "mlp")
    assert first.returncode == 0, first.stderr
    before = json.loads((tmp_path / "results" / "metrics.json").read_text())["tasks"]["mlp"]

    second = _run_benchmark(tmp_path, "--steps", "2", "--batch", "4", "--tasks", "mlp,lstm")
    assert second.returncode == 0, second.stderr
    tasks = json.loads((tmp_path / "results" / "metrics.json").read_text())["tasks"]
    assert tasks["mlp"] == {**before, "resumed": True}
    assert tasks["lstm"]["resumed"] is False
    assert "mlp restored from" in second.stdout and "(from checkpoint)" in second.stdout

    other = _run_benchmark(tmp_path, "--steps", "3", "--batch", "4", "--tasks", "mlp")
    assert json.loads((tmp_path / "results" / "metrics.json").read_text())["tasks"]["mlp"]["resumed"] is False
    assert other.returncode == 0


def test_benchmark_runs_without_a_writable_checkpoint_dir(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = subprocess.run([sys.executable, str(IMAGES / "benchmark" / "benchmark_numpy.py"),
                           "--steps", "1", "--batch", "2", "--tasks", "mlp", "--results", str(tmp_path / "r"),
                           "--checkpoint", str(blocker / "ckpt")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r" / "metrics.json").exists()


def test_benchmark_rejects_unknown_tasks(tmp_path):
    done = _run_benchmark(tmp_path, "--tasks", "mlp,gpt")
    assert done.returncode == 2
    assert "--tasks: unknown ['gpt']; choose from mlp,cnn,lstm" in done.stderr


# --- the example benchmark (PyTorch) -----------------------------------------------------------------

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="PyTorch is not installed here (pip install torch); the NumPy benchmark's "
                                        "tests above do not stand in for it")
SMALL = ["--size", "small", "--warmup", "2", "--heldout", "512", "--device", "cpu"]


def _run_torch(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {"SPOTCRON_RESULTS_DIR": str(tmp_path / "results"), "SPOTCRON_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
            "SPOTCRON_RUN_ID": "20260101-1000", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, str(IMAGES / "benchmark" / "benchmark.py"), *args],
                          env={**base, **(env or {})}, capture_output=True, text=True, timeout=300)


@needs_torch
@pytest.mark.parametrize(("task", "steps"), [("mlp", 60), ("cnn", 60), ("lstm", 100)])
def test_the_models_learn_held_out_loss_falls_by_the_stated_margin(task, steps):
    """Small sizes on the CPU; every step trains on a batch of its own, the held-out samples come
    from the same teacher, so the fall is learning, not memorising the batches."""
    import torch

    torch.set_num_threads(1)
    figures = torch_benchmark.run_task(task, size=torch_benchmark.SIZES["small"][task], steps=steps, warmup=2,
                                       device=torch.device("cpu"), heldout_samples=512, seed=0)
    margin = 1 - torch_benchmark.HELDOUT_MARGIN
    assert figures["heldout_loss"] <= margin * figures["heldout_loss_start"], figures
    assert figures["heldout_fell"] is True
    assert (figures["steps"], figures["warmup"], figures["framework"], figures["device"]) == (steps, 2, "torch", "cpu")
    assert figures["samples_per_second"] == pytest.approx(steps * figures["batch"] / figures["seconds"])
    assert figures["gpu_busy"] is None  # no GPU, no busy share


def test_the_lstm_is_bidirectional_and_the_gpu_sizes_are_the_stated_ones():
    pytest.importorskip("torch", reason="PyTorch is not installed here (pip install torch)")
    model = torch_benchmark.build_model("lstm", torch_benchmark.SIZES["gpu"]["lstm"])
    assert model.lstm.bidirectional and model.lstm.num_layers == 2 and model.lstm.hidden_size == 256
    assert model.embed.embedding_dim == 128
    assert torch_benchmark.SIZES["gpu"]["cnn"]["batch"] == 512 and torch_benchmark.SIZES["gpu"]["mlp"]["width"] == 2048


@needs_torch
def test_torch_benchmark_writes_the_metrics_contract(tmp_path):
    done = _run_torch(tmp_path, *SMALL, "--steps", "3", "--tasks", "mlp,lstm")
    assert done.returncode == 0, done.stderr
    metrics = json.loads((tmp_path / "results" / "metrics.json").read_text())
    assert (metrics["benchmark"], metrics["framework"], metrics["device"], metrics["precision"]) == \
        ("spotcron-dl-torch", "torch", "cpu", "fp32")
    from spotcron.core.metrics import check_time_metric, parse_metrics

    checked = parse_metrics((tmp_path / "results" / "metrics.json").read_bytes())
    check_time_metric(checked, "train_seconds")
    assert (checked.work.value, checked.work.unit) == (3 * 128 + 3 * 64, "samples")
    for name in ("mlp_samples_per_second", "lstm_epoch_seconds", "lstm_heldout_loss", "lstm_heldout_loss_start"):
        assert name in checked.metrics, name
    assert checked.metrics["lstm_epoch_seconds"].value == pytest.approx(
        25_000 / checked.metrics["lstm_samples_per_second"].value)
    assert "held-out loss" in done.stdout and "mlp_gpu_busy" not in checked.metrics


@needs_torch
def test_torch_benchmark_restores_finished_tasks_only_from_the_same_device_and_settings(tmp_path):
    assert _run_torch(tmp_path, *SMALL, "--steps", "2", "--tasks", "mlp").returncode == 0
    again = _run_torch(tmp_path, *SMALL, "--steps", "2", "--tasks", "mlp,cnn")
    assert again.returncode == 0, again.stderr
    assert "mlp restored from" in again.stdout
    saved = json.loads((tmp_path / "ckpt" / torch_benchmark.PROGRESS_FILE).read_text())
    saved["config"]["device"] = "cuda:NVIDIA H100 80GB HBM3"  # figures another device measured
    (tmp_path / "ckpt" / torch_benchmark.PROGRESS_FILE).write_text(json.dumps(saved))
    third = _run_torch(tmp_path, *SMALL, "--steps", "2", "--tasks", "mlp")
    assert third.returncode == 0 and "restored" not in third.stdout


@needs_torch
def test_asking_for_a_gpu_where_there_is_none_ends_with_the_reason_not_a_cpu_run(tmp_path):
    done = _run_torch(tmp_path, "--size", "small", "--steps", "1", "--device", "cuda",
                      env={"CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == torch_benchmark.NO_TORCH
    assert "--device cuda, but PyTorch sees no CUDA GPU" in done.stderr and "not run on the CPU" in done.stderr
    assert not (tmp_path / "results" / "metrics.json").exists()


def test_without_pytorch_the_benchmark_says_so_and_names_the_numpy_one(tmp_path):
    hidden = tmp_path / "hide"
    hidden.mkdir()
    (hidden / "torch.py").write_text("raise ImportError('hidden for this test')\n")
    done = _run_torch(tmp_path, "--steps", "1", env={"PYTHONPATH": str(hidden)})
    assert done.returncode == torch_benchmark.NO_TORCH
    assert "PyTorch is not installed" in done.stderr and "benchmark_numpy.py" in done.stderr


def test_torch_benchmark_rejects_unknown_tasks(tmp_path):
    done = _run_torch(tmp_path, "--tasks", "mlp,gpt")
    assert done.returncode == 2
    assert "--tasks: unknown ['gpt']; choose from mlp,cnn,lstm" in done.stderr


@needs_torch
def test_the_gpu_busy_share_falls_back_to_nvidia_smi_for_the_visible_gpu(tmp_path, monkeypatch):
    """Without NVML from Python (no nvidia-ml-py, or no CUDA build), nvidia-smi is asked about the
    GPU the job sees: the first of CUDA_VISIBLE_DEVICES, as the host numbers it."""
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f'#!/bin/sh\necho "$*" >> "{tmp_path}/asked"\necho 87\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    busy = torch_benchmark.GpuBusy(device=None, interval_s=0.02)
    busy.source = "nvidia-smi"
    with busy:
        wait_until(lambda: busy.samples, "a sample from nvidia-smi")
    assert busy.samples and busy.share == pytest.approx(0.87)
    assert (tmp_path / "asked").read_text().splitlines()[0] == \
        "-i 3 --query-gpu=utilization.gpu --format=csv,noheader,nounits"
