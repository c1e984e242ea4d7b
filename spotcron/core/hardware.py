"""What a run ran on, as the runner measured it: attempt-N/hardware.json, checked when the run ends.

    {"version": 1, "local": false, "host": "sc-bench-...", "machine_type": "n1-standard-8",
     "zone": "us-central1-a", "cpu_model": "Intel(R) Xeon(R) CPU @ 2.20GHz", "cpus": 8,
     "memory_mib": 30100, "gpus": [{"name": "Tesla T4", "driver": "535.104.05", "memory_mib": 15360}],
     "threads": null, "load_start": 0.12, "load_end": 1.05, "waited_s": null}

`threads` is the thread count the job was given (OMP_NUM_THREADS: local mode sets one per run),
`load_start` and `load_end` the host's 1-minute load average when the job started and after it
ended: a run on a host busier than its CPUs measured the other work too. `waited_s` (local runs) is
how long the local VM waited for its turn or its GPUs before its runner started.

The runner writes it (vm_images/runner/hardware.sh), not the job; still, a job that reaches the
VM's metadata server could rewrite it, so it is read like every file a VM writes: a ranged read
of at most `MAX_BYTES`, the bounded parser of core/jobdata.py, and field checks here. A bad file
becomes `hardware_problem` on the run, never an exception.

`key` is what must be equal for two runs to be pooled in one report row: the same CPU model and
count, memory within 2% (the kernel reserves a little that varies), the same GPUs, the same thread
count and, on Google Cloud, the same machine type; local runs also need the same host.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict

from spotcron.core.errors import SpotcronError
from spotcron.core.jobdata import JobDataProblem, load_job_json

HARDWARE_FILE = "hardware.json"  # beside the attempt's manifest: runs/JOB/RUN/attempt-N/hardware.json
MAX_BYTES = 16 << 10
MAX_GPUS = 16
TEXT_MAX = 128


class HardwareProblem(SpotcronError):
    """hardware.json is unusable; the message names the field and the value."""


class Gpu(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    driver: str | None = None
    memory_mib: int | None = None


class Hardware(BaseModel):
    """The checked contents of one attempt's hardware.json, as its run record keeps them."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    local: bool = False
    host: str | None = None
    machine_type: str | None = None
    zone: str | None = None
    cpu_model: str | None = None
    cpus: int | None = None
    memory_mib: int | None = None
    gpus: tuple[Gpu, ...] = ()
    threads: int | None = None
    load_start: float | None = None
    load_end: float | None = None
    waited_s: float | None = None

    @property
    def busy(self) -> bool:
        """The host's load average exceeded its CPUs before or after the job: other work ran too."""
        loads = [load for load in (self.load_start, self.load_end) if load is not None]
        return bool(self.cpus and loads and max(loads) > self.cpus)

    @property
    def gpu_text(self) -> str:
        """`1x Tesla T4 (driver 535.104.05)`, `no GPU`."""
        if not self.gpus:
            return "no GPU"
        names = sorted({g.name for g in self.gpus})
        drivers = sorted({g.driver for g in self.gpus if g.driver})
        text = f"{len(self.gpus)}x {'/'.join(names)}"
        return text + (f" (driver {'/'.join(drivers)})" if drivers else "")

    @property
    def label(self) -> str:
        """One line for a table: `n1-standard-8: 8 CPU Intel Xeon @ 2.20GHz, 29 GiB, 1x Tesla T4` (the zone,
        not hardware, is left out: runs in two zones on the same hardware share a label, as a key)."""
        where = f"local {self.host or '?'}" if self.local else (self.machine_type or self.host or "?")
        cpu = f"{self.cpus if self.cpus is not None else '?'} CPU {_short_cpu(self.cpu_model)}".rstrip()
        memory = f"{self.memory_mib / 1024:.0f} GiB" if self.memory_mib is not None else "? GiB"
        threads = f", {self.threads} thread{'s' if self.threads != 1 else ''}" if self.threads is not None else ""
        return f"{where}: {cpu}, {memory}, {self.gpu_text}{threads}"

    @property
    def key(self) -> tuple:
        """Runs with equal keys ran on the same hardware (see the module's docstring)."""
        memory = round(math.log(self.memory_mib) / math.log(1.02)) if self.memory_mib else None
        gpus = tuple(sorted((g.name, g.memory_mib) for g in self.gpus))
        place = ("local", self.host) if self.local else ("cloud", self.machine_type)
        return (*place, self.cpu_model, self.cpus, memory, gpus, self.threads)


def _short_cpu(model: str | None) -> str:
    if not model:
        return ""
    for noise in ("(R)", "(TM)", "(tm)", " CPU", " Processor", " processor"):
        model = model.replace(noise, "")
    return " ".join(model.split())


def parse_hardware(data: bytes, where: str = HARDWARE_FILE) -> Hardware:
    """The checked hardware; HardwareProblem at the first field that is not what the runner writes."""
    try:
        doc = load_job_json(data, where, max_bytes=MAX_BYTES)
    except JobDataProblem as problem:
        raise HardwareProblem(str(problem)) from None
    if not isinstance(doc, dict):
        raise HardwareProblem(f"{where}: not a JSON object; ignored")
    fields: dict[str, Any] = {"local": _flag(doc.get("local"), f"{where}: local")}
    for name in ("host", "machine_type", "zone", "cpu_model"):
        fields[name] = _text(doc.get(name), f"{where}: {name}")
    fields["cpus"] = _count(doc.get("cpus"), f"{where}: cpus", 1, 100_000)
    fields["memory_mib"] = _count(doc.get("memory_mib"), f"{where}: memory_mib", 0, 1 << 40)
    gpus = doc.get("gpus", [])
    if not isinstance(gpus, list) or len(gpus) > MAX_GPUS:
        raise HardwareProblem(f"{where}: gpus is not a list of at most {MAX_GPUS}; ignored")
    checked = []
    for index, gpu in enumerate(gpus):
        at = f"{where}: gpus[{index}]"
        if not isinstance(gpu, dict):
            raise HardwareProblem(f"{at} is not an object; ignored")
        name = _text(gpu.get("name"), f"{at}.name")
        if not name:
            raise HardwareProblem(f"{at}.name is missing; ignored")
        checked.append(Gpu(name=name, driver=_text(gpu.get("driver"), f"{at}.driver"),
                           memory_mib=_count(gpu.get("memory_mib"), f"{at}.memory_mib", 0, 1 << 30)))
    fields["gpus"] = tuple(checked)
    fields["threads"] = _count(doc.get("threads"), f"{where}: threads", 1, 100_000)
    for name in ("load_start", "load_end", "waited_s"):
        fields[name] = _load(doc.get(name), f"{where}: {name}")
    return Hardware(**fields)


def _flag(value: Any, where: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise HardwareProblem(f"{where} is not true or false; ignored")
    return value


def _text(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > TEXT_MAX or not value.isprintable():
        raise HardwareProblem(f"{where} is not printable text of at most {TEXT_MAX} characters; ignored")
    return value.strip() or None


def _load(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1e6:
        raise HardwareProblem(f"{where} is not a number in 0..1e6; ignored")
    return float(value)


def _count(value: Any, where: str, low: int, high: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise HardwareProblem(f"{where} is not a whole number in {low}..{high}; ignored")
    return value
