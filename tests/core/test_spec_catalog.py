"""The machine/GPU catalog: the rules that make a GPU job creatable."""

from __future__ import annotations

import pytest

from spotcron.core import catalog


def test_every_machine_type_is_named_after_its_family():
    for name, machine in catalog.MACHINE_TYPES.items():
        assert name.startswith(machine.family + "-") or machine.shared_core, name
        assert machine.vcpus > 0 and machine.memory_gb > 0


@pytest.mark.parametrize("name, vcpus, memory", [
    ("n1-standard-1", 1, 3.75), ("n1-highcpu-16", 16, 14.4), ("n1-highmem-8", 8, 52),
    ("e2-standard-4", 4, 16), ("e2-micro", 2, 1), ("c2-standard-30", 30, 120), ("g2-standard-24", 24, 96),
    ("a2-highgpu-1g", 12, 85), ("a3-highgpu-8g", 208, 1872),
])
def test_machine_sizes(name, vcpus, memory):
    machine = catalog.machine_type(name)
    assert machine is not None and (machine.vcpus, machine.memory_gb) == (vcpus, memory)


@pytest.mark.parametrize("name, gpu", [
    ("g2-standard-4", ("nvidia-l4", 1)), ("g2-standard-24", ("nvidia-l4", 2)), ("g2-standard-48", ("nvidia-l4", 4)),
    ("g2-standard-96", ("nvidia-l4", 8)), ("a2-highgpu-8g", ("nvidia-tesla-a100", 8)),
    ("a2-megagpu-16g", ("nvidia-tesla-a100", 16)), ("a2-ultragpu-2g", ("nvidia-a100-80gb", 2)),
    ("a3-highgpu-8g", ("nvidia-h100-80gb", 8)), ("n1-standard-8", None),
])
def test_bundled_gpus(name, gpu):
    assert catalog.machine_type(name).bundled_gpu == gpu


@pytest.mark.parametrize("machine, gpu, count", [
    ("n1-standard-8", "nvidia-tesla-t4", 1), ("n1-standard-96", "nvidia-tesla-t4", 4),
    ("n1-standard-16", "nvidia-tesla-v100", 2), ("n1-highmem-8", "nvidia-tesla-p100", 1),
    ("n1-standard-4", "nvidia-tesla-p4", 2), ("g2-standard-24", "nvidia-l4", 2),
    ("a2-ultragpu-4g", "nvidia-a100-80gb", 4), ("a3-highgpu-8g", "nvidia-h100-80gb", 8),
])
def test_gpu_combinations_that_work(machine, gpu, count):
    assert catalog.gpu_problem(machine, gpu, count) is None


@pytest.mark.parametrize("machine, gpu, count, field, expected", [
    ("n1-standard-16", "nvidia-tesla-v100", 1, "count", "at most 12 vCPUs and 78 GB; use count 2"),
    ("a2-highgpu-1g", "nvidia-h100-80gb", 1, "type", "a2-highgpu-1g comes with 1 x nvidia-tesla-a100 built in"),
    ("a3-highgpu-2g", "nvidia-h100-80gb", 1, "count", "a3-highgpu-2g comes with exactly 2 x nvidia-h100-80gb"),
    ("n2-standard-8", "nvidia-h100-80gb", 1, "type", "use a machine type of the a3-* family, e.g. a3-highgpu-1g"),
    ("n1-standard-8", "nvidia-tesla-v100", 3, "count", "allowed counts: 1, 2, 4, 8"),
    ("f1-micro", "nvidia-tesla-t4", 1, "type", "f1-micro is a shared-core machine type and cannot take GPUs"),
    ("n1-standard-4", "nvidia-tesla-k80", 1, "type", "end of support on Compute Engine on 1 May 2024"),
    ("n1-standard-4", "tesla", 1, "type", "'tesla' is not a GPU type; known GPU types:"),
])
def test_gpu_combinations_that_do_not(machine, gpu, count, field, expected):
    problem = catalog.gpu_problem(machine, gpu, count)
    assert problem is not None and expected in problem.message
    assert problem.field == field  # the loader points at gpu.<field> by this, never by the words


def test_unknown_machine_type_is_left_to_the_machine_check():
    assert catalog.gpu_problem("n1-standrd-1", "nvidia-tesla-t4", 1) is None


def test_suggest():
    assert catalog.suggest("n1-standrd-1", catalog.MACHINE_TYPES) == "n1-standard-1"
    assert catalog.suggest("e2-smal", catalog.MACHINE_TYPES) == "e2-small"
    assert catalog.suggest("zzzz", catalog.MACHINE_TYPES) is None
