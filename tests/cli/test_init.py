"""`spotcron init [DIR]`: a jobs folder with one example, a stack file and a .gitignore; never over a file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from spotcron.cli import cli as spotcron
from spotcron.core.loader import load_jobs
from spotcron.core.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for name in ("SPOTCRON_JOBS", "SPOTCRON_STACK", "SPOTCRON_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(spotcron, list(args), env={"COLUMNS": "200"}, catch_exceptions=False)


def test_init_writes_a_job_a_stack_file_and_a_gitignore(here: Path) -> None:
    done = run("init")
    assert done.exit_code == 0, done.output
    assert done.output == ("wrote jobs/hello.yaml, infra/stack.yaml, jobs/schema.json, .gitignore\n"
                           "next: spotcron validate && spotcron up --once && spotcron runs\n")
    assert (here / ".gitignore").read_text().splitlines()[-1] == ".spotcron/"
    [job] = load_jobs([here / "jobs"], grace=300, retention_days=90)
    assert job.name == "hello" and job.local is not None
    assert "$SPOTCRON_RESULTS_DIR" in " ".join(job.local.command)
    settings = load_settings(here / "infra" / "stack.yaml", {})
    assert settings.project == "my-project"
    validated = run("validate")
    assert validated.exit_code == 0, validated.output
    assert "1 job valid" in validated.output
    # What the job file's first line points editors at is there, and it is `spotcron schema`'s.
    assert (here / "jobs" / "hello.yaml").read_text().startswith("# yaml-language-server: $schema=./schema.json\n")
    assert (here / "jobs" / "schema.json").read_text() == run("schema").output


def test_init_dir_creates_the_folder_and_says_to_cd_into_it(here: Path) -> None:
    done = run("init", "my-jobs")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines() == [
        "wrote my-jobs/jobs/hello.yaml, my-jobs/infra/stack.yaml, my-jobs/jobs/schema.json, my-jobs/.gitignore",
        "next: cd my-jobs && spotcron validate && spotcron up --once && spotcron runs"]
    assert sorted(p.relative_to(here).as_posix() for p in (here / "my-jobs").rglob("*") if p.is_file()) == [
        "my-jobs/.gitignore", "my-jobs/infra/stack.yaml", "my-jobs/jobs/hello.yaml", "my-jobs/jobs/schema.json"]


@pytest.mark.parametrize("existing", ["jobs/hello.yaml", "infra/stack.yaml"])
def test_init_never_writes_over_a_file_and_writes_nothing_then(here: Path, existing: str) -> None:
    (here / existing).parent.mkdir(parents=True)
    (here / existing).write_text("# mine\n")
    done = run("init")
    assert done.exit_code == 2
    assert done.output == (f"error: {existing} already exists; spotcron init never writes over a file: move it "
                           "away, or init another folder (spotcron init DIR)\n")
    assert (here / existing).read_text() == "# mine\n"
    assert sorted(p.relative_to(here).as_posix() for p in here.rglob("*") if p.is_file()) == [existing]


def test_a_second_init_is_refused_naming_both_files(here: Path) -> None:
    assert run("init").exit_code == 0
    again = run("init")
    assert again.exit_code == 2
    assert again.output.startswith("error: jobs/hello.yaml and infra/stack.yaml already exist; ")
    assert "move them away" in again.output


def test_an_existing_gitignore_gets_the_state_line_once(here: Path) -> None:
    (here / ".gitignore").write_text("__pycache__/")
    done = run("init")
    assert done.exit_code == 0, done.output
    assert done.output.startswith("wrote jobs/hello.yaml, infra/stack.yaml, jobs/schema.json, .gitignore (added .spotcron/)\n")
    text = (here / ".gitignore").read_text()
    assert text.startswith("__pycache__/\n") and text.endswith("\n.spotcron/\n")
    (here / "other").mkdir()
    (here / "other" / ".gitignore").write_text("/.spotcron\n")
    assert run("init", "other").exit_code == 0
    assert (here / "other" / ".gitignore").read_text() == "/.spotcron\n"


def test_the_stack_file_names_every_setting_the_repositorys_does() -> None:
    from spotcron.cli.scaffold import STACK_TEXT

    ours = yaml.safe_load((ROOT / "infra" / "stack.yaml").read_text())
    scaffold = yaml.safe_load(STACK_TEXT)
    assert scaffold == ours


def test_the_help_points_a_new_user_at_init() -> None:
    shown = run("--help").output
    assert "`spotcron init` starts a folder with one" in " ".join(shown.split())
    assert "  init " in shown


def test_init_benchmark_writes_a_matrix_job_from_axes_and_a_script_whose_metrics_fit_it(here: Path) -> None:
    """Before: no benchmark scaffold; a benchmarker assembled the job from two docs pages and wrote
    metrics.json by hand."""
    import json
    import os
    import subprocess
    import sys

    from spotcron.core.metrics import check_time_metric, parse_metrics

    done = run("init", "--benchmark")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[-1] == "next: spotcron validate && spotcron up --once && spotcron report benchmark"
    [job] = load_jobs([here / "jobs"], grace=300, retention_days=90)
    assert [entry.name for entry in job.matrix] == ["e2-2-b64", "e2-2-b256", "e2-4-b64", "e2-4-b256"]
    assert job.variant_named("e2-4-b256").machine.type == "e2-standard-4"
    assert dict(job.variant_named("e2-4-b256").env) == {"BATCH": "256"}
    assert job.benchmark.base == "e2-2-b64" and job.benchmark.compare == ("fit_seconds", "score_seconds")
    assert job.repeat == 4 and job.build is not None
    ran = subprocess.run([sys.executable, "benchmark/train.py", "--samples", "16", "--passes", "1"],
                         env={**os.environ, "SPOTCRON_RESULTS_DIR": str(here / "results"), "BATCH": "8"},
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    written = (here / "results" / "metrics.json").read_bytes()
    metrics = parse_metrics(written)
    check_time_metric(metrics, "train_seconds")
    for name in job.benchmark.compare:
        check_time_metric(metrics, name)
    assert json.loads(written)["work"]["unit"] == "samples"
    assert "spotcron_metrics.py" in (here / "benchmark" / "Dockerfile").read_text()
    validated = run("validate")
    assert validated.exit_code == 0, validated.output
    again = run("init", "--benchmark")
    assert again.exit_code == 2 and "jobs/benchmark.yaml" in again.output


def test_the_benchmark_template_gives_every_configuration_the_same_work(here: Path) -> None:
    """Before: each task ran until a time budget (1 s locally), so every entry's times were the budget
    and the report compared nothing. Now the work is fixed and the time is what varies."""
    import json
    import os
    import shlex
    import subprocess
    import sys

    assert run("init", "--benchmark").exit_code == 0
    [job] = load_jobs([here / "jobs"], grace=300, retention_days=90)
    works = {}
    for entry in job.variants():
        argv = list(entry.local.command)
        assert "--samples" in argv and not any("seconds" in arg for arg in argv), shlex.join(argv)
        argv[argv.index("--samples") + 1], argv[argv.index("--passes") + 1] = "512", "1"  # small, same shape
        results = here / "results" / entry.variant
        ran = subprocess.run([sys.executable, *argv[1:]], env={**os.environ, **dict(entry.env),
                                                              "SPOTCRON_RESULTS_DIR": str(results)},
                             capture_output=True, text=True, timeout=120)
        assert ran.returncode == 0, ran.stderr
        written = json.loads((results / "metrics.json").read_text())
        works[entry.variant] = written["work"]["value"]
        assert written["metrics"]["fit_samples_per_second"]["unit"] == "samples/s"
    assert set(works.values()) == {512.0}, works  # batches of 64 and of 256 fit the same samples


def test_axes_expand_to_their_cross_product_and_refuse_a_setting_given_twice(tmp_path: Path) -> None:
    from spotcron.core.errors import SpotcronError
    from spotcron.core.loader import load_job_file

    path = tmp_path / "sweep.yaml"
    path.write_text("schedule: '0 3 * * 1'\nimage: bench:1\naxes:\n"
                    "  - {cpu: {machine: {type: e2-standard-4}}, t4: {machine: {type: n1-standard-8, gpu: "
                    "{type: nvidia-tesla-t4, count: 1}}, image: 'bench:cuda'}}\n"
                    "  - {b32: {env: {BATCH: '32'}}, b64: {env: {BATCH: '64'}, image: 'bench:big'}}\n")
    with pytest.raises(SpotcronError, match="image is set by both 't4' and 'b64'"):
        load_job_file(path)
    path.write_text(path.read_text().replace(", image: 'bench:big'", ""))
    spec = load_job_file(path)
    assert [(e.name, e.image, dict(e.env)) for e in spec.matrix] == [
        ("cpu-b32", None, {"BATCH": "32"}), ("cpu-b64", None, {"BATCH": "64"}),
        ("t4-b32", "bench:cuda", {"BATCH": "32"}), ("t4-b64", "bench:cuda", {"BATCH": "64"})]
    assert spec.variant_named("t4-b64").machine.gpu.count == 1
    assert "axes" not in spec.to_payload()  # deployed as the entries it stands for


def test_a_second_benchmark_init_lists_the_files_it_refuses_for_in_one_sentence(here: Path) -> None:
    assert run("init", "--benchmark").exit_code == 0
    again = run("init", "--benchmark")
    assert again.exit_code == 2
    first, _, rest = again.output.partition(" already exist; ")
    named = first.removeprefix("error: ")
    assert named.startswith("jobs/benchmark.yaml, benchmark/")
    head, _, last = named.rpartition(" and ")
    assert " and " not in head and len(head.split(", ")) >= 2 and "/" in last
    assert "move them away" in rest


def test_an_init_folder_and_the_help_point_at_the_docs_one_way(here: Path) -> None:
    assert run("init").exit_code == 0 and run("init", "--benchmark").exit_code == 0
    texts = [(here / "jobs" / "hello.yaml").read_text(), (here / "jobs" / "benchmark.yaml").read_text(),
             run("--help").output]
    for text in texts:
        flat = " ".join(text.split())
        assert "spotcron's repository" not in flat
        assert "docs/jobs.md in the spotcron source" in flat or "docs/jobs.md and docs/benchmarks.md in the " \
            "spotcron source" in flat, text[:300]
