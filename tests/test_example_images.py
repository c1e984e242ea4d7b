"""The example job images' code, run locally: the bot and the deep-learning benchmark."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

IMAGES = Path(__file__).resolve().parent.parent / "vm_images"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bot = _load("example_bot", IMAGES / "bot" / "bot.py")
benchmark = _load("example_benchmark", IMAGES / "benchmark" / "benchmark.py")


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


# --- the benchmark: the NumPy models are real -------------------------------------------------------


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
def test_numpy_training_lowers_the_loss_on_the_synthetic_data(task):
    figures = benchmark.run_task(task, "numpy", steps=25, batch=16, seed=3)
    assert figures["last_loss"] < figures["first_loss"]


# --- the benchmark as a job ----------------------------------------------------------------------


def _run_benchmark(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"SPOTCRON_RESULTS_DIR": str(tmp_path / "results"), "SPOTCRON_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
           "SPOTCRON_RUN_ID": "20260101-1000"}
    return subprocess.run([sys.executable, str(IMAGES / "benchmark" / "benchmark.py"), "--framework", "numpy",
                           *args], env=env, capture_output=True, text=True, timeout=120)


def test_benchmark_writes_metrics_and_prints_per_task_figures(tmp_path):
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


def test_benchmark_resumes_finished_tasks_after_a_preemption(tmp_path):
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
    done = subprocess.run([sys.executable, str(IMAGES / "benchmark" / "benchmark.py"), "--framework", "numpy",
                           "--steps", "1", "--batch", "2", "--tasks", "mlp", "--results", str(tmp_path / "r"),
                           "--checkpoint", str(blocker / "ckpt")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "r" / "metrics.json").exists()


def test_benchmark_rejects_unknown_tasks(tmp_path):
    done = _run_benchmark(tmp_path, "--tasks", "mlp,gpt")
    assert done.returncode == 2
    assert "--tasks: unknown ['gpt']; choose from mlp,cnn,lstm" in done.stderr


def test_benchmark_with_pytorch_when_it_is_installed(tmp_path):
    pytest.importorskip("torch", reason="PyTorch is not installed here; the NumPy path is tested above")
    env = {"SPOTCRON_RESULTS_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, str(IMAGES / "benchmark" / "benchmark.py"), "--framework", "torch",
                           "--steps", "2", "--batch", "4"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    tasks = json.loads((tmp_path / "metrics.json").read_text())["tasks"]
    assert {figures["framework"] for figures in tasks.values()} == {"torch"}
