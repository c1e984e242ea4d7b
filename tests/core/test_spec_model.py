"""The JobSpec model: validators, matrix resolution, payload round trip, the editor schema."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from spotcron.core.loader import load_jobs
from spotcron.core.spec import JobSpec, job_file_schema
from tests.examples import EXAMPLES, copy_examples, example

BASE = {"name": "bot", "schedule": "0 * * * *", "image": "spotcron/bot:latest"}


def test_accelerator_optimized_types_record_their_gpus():
    spec = JobSpec(**BASE, machine={"type": "g2-standard-24"},
                   matrix=[{"name": "a100", "machine": {"type": "a2-highgpu-2g"}}, {"name": "same"}])
    assert (spec.machine.gpu.type, spec.machine.gpu.count) == ("nvidia-l4", 2)
    a100, same = spec.variants()
    assert (a100.machine.gpu.type, a100.machine.gpu.count) == ("nvidia-tesla-a100", 2)
    assert same.machine == spec.machine


def test_variants_merge_env_and_replace_args():
    spec = JobSpec(**BASE, env={"A": "1", "B": "2"}, args=["--x"],
                   matrix=[{"name": "one", "env": {"B": "3"}, "args": "--y 1"}, {"name": "two"}])
    one, two = spec.variants()
    assert one.env == {"A": "1", "B": "3"} and one.args == ("--y", "1") and one.key == "bot/one"
    assert two.args == ("--x",) and two.matrix == () and spec.variant_named("two") == two


def test_a_matrix_entry_may_name_its_own_image_and_local_command():
    spec = JobSpec(**BASE, local={"command": "python3 cpu.py"},
                   matrix=[{"name": "cpu"}, {"name": "gpu", "image": "spotcron/bot:cuda",
                                             "local": {"command": ["python3", "gpu.py"]}}])
    cpu, gpu = spec.variants()
    assert (cpu.image, cpu.local.command) == ("spotcron/bot:latest", ("python3", "cpu.py"))
    assert (gpu.image, gpu.local.command) == ("spotcron/bot:cuda", ("python3", "gpu.py"))
    assert JobSpec.from_payload(gpu.to_payload()) == gpu


def test_an_entry_image_is_validated_like_the_job_image():
    with pytest.raises(ValidationError) as caught:
        JobSpec(**BASE, matrix=[{"name": "gpu", "image": "Not An Image"}])
    text = str(caught.value)
    assert "matrix.0.image" in text and "'Not An Image' is not a container image reference" in text
    with pytest.raises(ValidationError, match="is empty"):
        JobSpec(**BASE, matrix=[{"name": "gpu", "local": {"command": []}}])


def test_a_gpu_entry_on_the_cpu_entries_image_is_warned_about():
    gpu = {"type": "n1-standard-8", "gpu": {"type": "nvidia-tesla-t4"}}
    shared = JobSpec(**BASE, matrix=[{"name": "cpu"}, {"name": "t4", "machine": gpu}])
    [warning] = shared.image_warnings()
    assert "'t4' asks for nvidia-tesla-t4 x1 but runs 'spotcron/bot:latest'" in warning
    assert "the CPU entry 'cpu'" in warning and "image: a CUDA build" in warning
    own = JobSpec(**BASE, matrix=[{"name": "cpu"}, {"name": "t4", "machine": gpu, "image": "spotcron/bot:cuda"}])
    assert own.image_warnings() == []
    assert JobSpec(**BASE, machine=gpu).image_warnings() == []  # no CPU entry to share with


def test_yaml_numbers_and_booleans_become_words():
    spec = JobSpec(**BASE, args=["--steps", 20, "--lr", 0.5, "--fast", True], env={"N": 4, "ON": False})
    assert spec.args == ("--steps", "20", "--lr", "0.5", "--fast", "true")
    assert spec.env == {"N": "4", "ON": "false"}


def test_invalid_names_are_rejected_by_the_model_too():
    with pytest.raises(ValidationError, match="at most 30 characters"):
        JobSpec(**{**BASE, "name": "x" * 31})
    with pytest.raises(ValidationError, match="at most 12 characters"):
        JobSpec(**BASE, matrix=[{"name": "entry-name-too-long"}])


def test_short_timeouts_are_fine_for_the_model():
    # timeout + grace is what Compute Engine sees; the loader checks the sum with the stack's grace.
    assert JobSpec(**BASE, timeout="2s").timeout == 2


def test_example_jobs_load_and_round_trip(tmp_path):
    specs = load_jobs([copy_examples(tmp_path / "jobs")])
    assert {s.name for s in specs} >= {"hello-bot", "dl-benchmark"}
    for spec in specs:
        assert JobSpec.from_payload(json.loads(json.dumps(spec.to_payload()))) == spec


def test_example_benchmark_compares_cpu_and_gpu(tmp_path):
    bench = next(s for s in load_jobs([copy_examples(tmp_path / "jobs")]) if s.name == "dl-benchmark")
    machines = {v.variant: (v.machine.type, v.machine.gpu and v.machine.gpu.type) for v in bench.variants()}
    assert len(machines) >= 3
    assert ("n1-highcpu-16", None) in machines.values() and ("e2-standard-4", None) in machines.values()
    assert ("n1-standard-8", "nvidia-tesla-t4") in machines.values()
    assert bench.checkpoint == "/checkpoint" and bench.timeout == 7200
    # The GPU entry runs the CUDA image and asks for the GPU; the CPU entries the CPU image.
    images = {v.variant: (v.image, v.build.dockerfile, v.local.command[-2:]) for v in bench.configurations()}
    assert images["t4"] == ("spotcron/dl-benchmark-t4", "Dockerfile.cuda", ("--device", "cuda"))
    assert images["highcpu-16"] == images["e2-std-4"] == ("spotcron/dl-benchmark", "Dockerfile", ("--device", "cpu"))
    assert {v.build.context for v in bench.configurations()} == {"vm_images/benchmark"}  # deploy pushes both
    assert bench.image_warnings() == []


def test_schema_describes_the_file_not_the_resolved_copy():
    schema = job_file_schema()
    assert "variant" not in schema["properties"]
    assert schema["required"] == ["schedule"]
    assert schema["anyOf"] == [{"required": ["image"]}, {"required": ["build"]}]
    assert schema["additionalProperties"] is False
    assert all(prop.get("description") for prop in schema["properties"].values())
    gpu_types = schema["$defs"]["Gpu"]["properties"]["type"]["enum"]
    assert "nvidia-tesla-t4" in gpu_types and "nvidia-tesla-k80" not in gpu_types


def test_example_jobs_match_the_schema():
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed")
    import yaml

    for path in (example(name) for name in EXAMPLES):
        jsonschema.validate(yaml.safe_load(path.read_text()), job_file_schema())


def test_repeat_makes_one_resolved_copy_per_run_of_a_tick():
    spec = JobSpec(**BASE, repeat=2, benchmark={"base": "gpu"},
                   matrix=[{"name": "cpu"}, {"name": "gpu", "repeat": 3}, {"name": "once", "repeat": 1}])
    assert [(c.variant, c.repeat_index, c.run_suffix) for c in spec.variants()] == [
        ("cpu", 1, "cpu-r1"), ("cpu", 2, "cpu-r2"), ("gpu", 1, "gpu-r1"), ("gpu", 2, "gpu-r2"),
        ("gpu", 3, "gpu-r3"), ("once", None, "once")]
    assert [c.variant for c in spec.configurations()] == ["cpu", "gpu", "once"]
    assert spec.variant_named("gpu").repeat == 3 and spec.variant_named("gpu").repeat_index is None
    assert {c.benchmark.base for c in spec.variants()} == {"gpu"}
    # A run's payload is its resolved copy: it never expands again.
    copy = JobSpec.from_payload(spec.variants()[3].to_payload())
    assert copy.variants() == [copy] and copy.run_suffix == "gpu-r2"
    alone = JobSpec(**BASE, repeat=2)
    assert [c.run_suffix for c in alone.variants()] == ["r1", "r2"]
    assert [c.run_suffix for c in JobSpec(**BASE).variants()] == [None]
    with pytest.raises(ValidationError, match="less than or equal to 20"):
        JobSpec(**BASE, repeat=21)
