"""The Compute Engine machine types and GPUs spotcron knows, and the rules that join them.

Pure data, checked against Google's "GPU machine types" and machine-family pages: GPUs attach
only to N1 VMs (T4, P4, P100, V100, in fixed counts, with a vCPU/memory ceiling per count);
accelerator-optimized types (G2, A2, A3) come with their GPUs built in, so the machine type
fixes the GPU model and count. The K80 reached end of support on 1 May 2024 and can no longer
be attached. Validating here means a typo fails at `spotcron validate`, not at 3 a.m. in a
VM create call.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class MachineType:
    name: str
    family: str  # "n1", "e2", "g2", ...
    vcpus: int  # as Compute Engine reports guestCpus; shared-core types report 1 or 2
    memory_gb: float
    shared_core: bool = False
    gpu_type: str | None = None  # accelerator-optimized types: the GPU model they come with
    gpu_count: int = 0

    @property
    def bundled_gpu(self) -> tuple[str, int] | None:
        """(GPU type, count) built into this machine type; such VMs get no guestAccelerators."""
        return (self.gpu_type, self.gpu_count) if self.gpu_type else None


@dataclass(frozen=True)
class GpuType:
    name: str
    label: str  # what people call it: "NVIDIA T4"
    families: tuple[str, ...]  # machine families that can run it
    retired: str | None = None  # why it can no longer be used


_TABLE: dict[str, MachineType] = {}


def _add(name: str, family: str, vcpus: int, memory_gb: float, **kwargs) -> None:
    _TABLE[name] = MachineType(name, family, vcpus, memory_gb, **kwargs)


def _series(prefix: str, family: str, sizes: Iterable[int], gb_per_vcpu: float) -> None:
    for size in sizes:
        _add(f"{prefix}-{size}", family, size, round(size * gb_per_vcpu, 2))


# Shared-core types: a fraction of a vCPU, bursting.
_add("e2-micro", "e2", 2, 1, shared_core=True)
_add("e2-small", "e2", 2, 2, shared_core=True)
_add("e2-medium", "e2", 2, 4, shared_core=True)
_add("f1-micro", "n1", 1, 0.6, shared_core=True)
_add("g1-small", "n1", 1, 1.7, shared_core=True)

_N1 = (1, 2, 4, 8, 16, 32, 64, 96)
_series("n1-standard", "n1", _N1, 3.75)
_series("n1-highcpu", "n1", _N1[1:], 0.9)
_series("n1-highmem", "n1", _N1[1:], 6.5)

_E2 = (2, 4, 8, 16, 32)
_series("e2-standard", "e2", _E2, 4)
_series("e2-highcpu", "e2", _E2, 1)
_series("e2-highmem", "e2", _E2[:-1], 8)

_N2 = (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)
_series("n2-standard", "n2", _N2, 4)
_series("n2-highcpu", "n2", _N2[:-1], 1)
_series("n2-highmem", "n2", _N2[:-1], 8)
_add("n2-highmem-128", "n2", 128, 864)

_N2D = (2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224)
_series("n2d-standard", "n2d", _N2D, 4)
_series("n2d-highcpu", "n2d", _N2D, 1)
_series("n2d-highmem", "n2d", _N2D[:9], 8)

_series("c2-standard", "c2", (4, 8, 16, 30, 60), 4)

_C3 = (4, 8, 22, 44, 88, 176)
_series("c3-standard", "c3", _C3, 4)
_series("c3-highcpu", "c3", _C3, 2)
_series("c3-highmem", "c3", _C3, 8)

_series("t2d-standard", "t2d", (1, 2, 4, 8, 16, 32, 48, 60), 4)

# G2: NVIDIA L4 built in; the count is fixed by the size.
for _size, _gpus in ((4, 1), (8, 1), (12, 1), (16, 1), (24, 2), (32, 1), (48, 4), (96, 8)):
    _add(f"g2-standard-{_size}", "g2", _size, _size * 4, gpu_type="nvidia-l4", gpu_count=_gpus)

# A2 Standard (A100 40GB) and A2 Ultra (A100 80GB).
for _gpus in (1, 2, 4, 8):
    _add(f"a2-highgpu-{_gpus}g", "a2", 12 * _gpus, 85 * _gpus, gpu_type="nvidia-tesla-a100", gpu_count=_gpus)
    _add(f"a2-ultragpu-{_gpus}g", "a2", 12 * _gpus, 170 * _gpus, gpu_type="nvidia-a100-80gb", gpu_count=_gpus)
_add("a2-megagpu-16g", "a2", 96, 1360, gpu_type="nvidia-tesla-a100", gpu_count=16)

# A3 High (H100 80GB). The 1/2/4-GPU sizes are offered only as Spot or flex-start VMs.
for _gpus in (1, 2, 4, 8):
    _add(f"a3-highgpu-{_gpus}g", "a3", 26 * _gpus, 234 * _gpus, gpu_type="nvidia-h100-80gb", gpu_count=_gpus)

MACHINE_TYPES: dict[str, MachineType] = dict(_TABLE)

GPU_TYPES: dict[str, GpuType] = {
    gpu.name: gpu
    for gpu in (
        GpuType("nvidia-tesla-t4", "NVIDIA T4", ("n1",)),
        GpuType("nvidia-tesla-p4", "NVIDIA P4", ("n1",)),
        GpuType("nvidia-tesla-p100", "NVIDIA P100", ("n1",)),
        GpuType("nvidia-tesla-v100", "NVIDIA V100", ("n1",)),
        GpuType("nvidia-tesla-k80", "NVIDIA K80", ("n1",),
                retired="the NVIDIA K80 reached end of support on Compute Engine on 1 May 2024 and can "
                        "no longer be attached; use nvidia-tesla-t4 on an n1-* machine type, or a "
                        "g2-standard-* machine type (NVIDIA L4)"),
        GpuType("nvidia-l4", "NVIDIA L4", ("g2",)),
        GpuType("nvidia-tesla-a100", "NVIDIA A100 40GB", ("a2",)),
        GpuType("nvidia-a100-80gb", "NVIDIA A100 80GB", ("a2",)),
        GpuType("nvidia-h100-80gb", "NVIDIA H100 80GB", ("a3",)),
    )
}

# N1 GPU limits: GPU count -> (max vCPUs, max memory GB) of the VM it attaches to.
# P100 x4 allows 96 vCPUs / 624 GB only in some zones (elsewhere 64 / 208); the zone check is
# Google's, we keep the wider limit so valid configurations are never refused.
N1_GPU_LIMITS: dict[str, dict[int, tuple[int, float]]] = {
    "nvidia-tesla-t4": {1: (48, 312), 2: (48, 312), 4: (96, 624)},
    "nvidia-tesla-p4": {1: (24, 156), 2: (48, 312), 4: (96, 624)},
    "nvidia-tesla-p100": {1: (16, 104), 2: (32, 208), 4: (96, 624)},
    "nvidia-tesla-v100": {1: (12, 78), 2: (24, 156), 4: (48, 312), 8: (96, 624)},
}


# Families that cannot boot from pd-standard; everything else gets it, the cheapest disk.
_BALANCED_BOOT_FAMILIES = frozenset({"g2", "a3", "c3", "c3d", "c4", "n4", "h3"})


def boot_disk_type(machine_type: str) -> str:
    """The persistent disk type a VM of `machine_type` boots from."""
    known = _TABLE.get(machine_type)
    family = known.family if known else machine_type.split("-", 1)[0]
    return "pd-balanced" if family in _BALANCED_BOOT_FAMILIES else "pd-standard"


def machine_type(name: str) -> MachineType | None:
    return MACHINE_TYPES.get(name)


def gpu_type(name: str) -> GpuType | None:
    return GPU_TYPES.get(name)


def suggest(name: str, choices: Iterable[str]) -> str | None:
    """The closest of `choices` to a mistyped `name`, or None when nothing is close."""
    matches = difflib.get_close_matches(str(name), list(choices), n=1, cutoff=0.6)
    return matches[0] if matches else None


def _families_of(gpu: GpuType) -> str:
    return " or ".join(f"{family}-*" for family in gpu.families)


def _bundled_types(gpu_name: str) -> list[str]:
    return [m.name for m in MACHINE_TYPES.values() if m.gpu_type == gpu_name]


@dataclass(frozen=True)
class GpuProblem:
    """Why a GPU cannot attach, and which of the gpu block's fields the fix belongs to."""

    field: Literal["type", "count"]
    message: str  # names the bad value and says what would work; the caller adds where it is


def gpu_problem(machine_type: str, gpu_type: str, count: int) -> GpuProblem | None:
    """What is wrong with attaching `count` x `gpu_type` to `machine_type`, or None if it works."""
    gpu = GPU_TYPES.get(gpu_type)
    if gpu is None:
        hint = suggest(gpu_type, GPU_TYPES)
        known = ", ".join(name for name, g in GPU_TYPES.items() if not g.retired)
        did_you_mean = f"did you mean {hint!r}? " if hint and not GPU_TYPES[hint].retired else ""
        return GpuProblem("type", f"{gpu_type!r} is not a GPU type; {did_you_mean}known GPU types: {known}")
    if gpu.retired:
        return GpuProblem("type", f"{gpu_type!r}: {gpu.retired}")
    machine = MACHINE_TYPES.get(machine_type)
    if machine is None:
        return None  # the machine type is reported on its own
    if machine.family not in gpu.families:
        if machine.bundled_gpu:
            return GpuProblem("type", f"{machine.name} comes with {machine.gpu_count} x {machine.gpu_type} built "
                                      f"in; it cannot take {gpu_type}; set gpu.type to {machine.gpu_type!r} or "
                                      f"leave gpu out")
        where = (f"use a machine type of the {_families_of(gpu)} family"
                 + (f", e.g. {_bundled_types(gpu_type)[0]}" if _bundled_types(gpu_type) else ""))
        return GpuProblem("type", f"{gpu.label} ({gpu_type}) cannot attach to {machine.name} "
                                  f"({machine.family.upper()} family); {where}")
    if machine.bundled_gpu:
        if count != machine.gpu_count:
            sizes = ", ".join(f"{name} ({MACHINE_TYPES[name].gpu_count})" for name in _bundled_types(gpu_type))
            return GpuProblem("count", f"{machine.name} comes with exactly {machine.gpu_count} x {gpu_type}, not "
                                       f"{count}; set count to {machine.gpu_count} or pick another size: {sizes}")
        return None
    if machine.shared_core:
        return GpuProblem("type", f"{machine.name} is a shared-core machine type and cannot take GPUs; "
                                  f"use e.g. n1-standard-4 with {gpu_type}")
    limits = N1_GPU_LIMITS[gpu_type]
    if count not in limits:
        allowed = ", ".join(str(c) for c in limits)
        return GpuProblem("count", f"{count} x {gpu_type} cannot attach to an N1 VM; allowed counts: {allowed}")
    max_vcpus, max_memory = limits[count]
    if machine.vcpus > max_vcpus or machine.memory_gb > max_memory:
        bigger = [c for c, (v, m) in limits.items() if machine.vcpus <= v and machine.memory_gb <= m]
        # More GPUs raise the ceiling: when some count fits, the count is what to change.
        fix = (f"use count {bigger[0]} or a smaller machine type" if bigger
               else "use a smaller machine type")
        return GpuProblem("count" if bigger else "type",
                          f"{machine.name} has {machine.vcpus} vCPUs and {machine.memory_gb:g} GB; with {count} x "
                          f"{gpu_type} an N1 VM may have at most {max_vcpus} vCPUs and {max_memory:g} GB; {fix}")
    return None


def machine_problem(machine) -> str | None:
    """Why a job's `machine` (core/spec.Machine) cannot be created, per this catalog; None when it can."""
    if machine_type(machine.type) is None:
        return (f"machine type {machine.type!r} is not in spotcron's catalog; refused before any VM was "
                f"created (spotcron validate names the known types)")
    gpu = machine.gpu
    if gpu is not None:
        problem = gpu_problem(machine.type, gpu.type, gpu.count)
        if problem:
            return f"refused before any VM was created: {problem.message}"
    return None
