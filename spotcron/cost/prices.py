"""Price tables: what a machine, GPU, disk, scheduler entry, function call and stored GB cost.

The tables live in `spotcron/cost/data/prices.yaml`, versioned and dated, every figure tied to a
source. A user's file (`--prices FILE`, or SPOTCRON_PRICES) is merged over one of them, so a
price seen on one's own bill replaces the indicative one without copying the whole table.
Loading reads files; everything after that is pure.
"""

from __future__ import annotations

import datetime as dt
import difflib
import logging
import math
import re
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from spotcron.core.errors import ConfigError, Problem, SpotcronError

log = logging.getLogger("spotcron.cost.prices")

PACKAGED = "prices.yaml"
OVERRIDE_SOURCE = "override"

NonNegative = Field(ge=0)


class PricingError(SpotcronError, KeyError):
    """A price the table does not have; the message says which ones it has."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Model):
    title: str
    url: str = ""
    date: dt.date | None = None


class MachinePrice(_Model):
    on_demand: float = NonNegative
    spot: float = NonNegative
    source: str
    spot_source: str | None = None
    includes: str | None = None  # GPUs bundled in the machine price, "L4 x1"

    def hourly(self, spot: bool) -> float:
        return self.spot if spot else self.on_demand


class GpuPrice(_Model):
    on_demand: float = NonNegative
    spot: float = NonNegative
    source: str
    spot_source: str | None = None

    def hourly(self, spot: bool) -> float:
        return self.spot if spot else self.on_demand


class DiskPrice(_Model):
    gb_month: float = NonNegative
    source: str


class SchedulerPrice(_Model):
    job_month: float = NonNegative
    free_jobs: int = Field(0, ge=0)
    source: str


class FunctionPrice(_Model):
    """One function invocation: a flat part plus its run time, rounded up to `granularity_s`.

    1st gen bills GB-seconds and GHz-seconds; 2nd gen is billed as Cloud Run (vCPU-seconds and
    GiB-seconds). Either way one second of one instance costs `cpu * cpu_second + memory_gb *
    memory_second`, unless the table gives the combined tier price `per_100ms` directly.
    """

    generation: Literal[1, 2]
    per_million_invocations: float = NonNegative
    cpu_second: float = Field(0.0, ge=0)  # per GHz-second (1st gen) or vCPU-second (2nd gen)
    memory_second: float = Field(0.0, ge=0)  # per GB-second
    cpu: float = Field(0.0, ge=0)  # GHz (1st gen) or vCPU (2nd gen) of one instance
    memory_gb: float = Field(0.0, ge=0)
    per_100ms: float | None = Field(None, ge=0)
    granularity_s: float = Field(0.1, gt=0)
    free_invocations: int = Field(0, ge=0)  # per billing account and month
    free_cpu_seconds: float = Field(0.0, ge=0)  # GHz-s or vCPU-s per month
    free_memory_seconds: float = Field(0.0, ge=0)  # GB-s per month
    source: str

    @property
    def per_second(self) -> float:
        if self.per_100ms is not None:
            return self.per_100ms * 10
        return self.cpu * self.cpu_second + self.memory_gb * self.memory_second

    def billed_seconds(self, seconds: float) -> float:
        # Round up to the billing granularity; the epsilon keeps 0.3 s at 0.3, not 0.4.
        steps = math.ceil(seconds / self.granularity_s - 1e-9)
        return max(steps, 1) * self.granularity_s

    def invocation_usd(self, seconds: float) -> float:
        return self.per_million_invocations / 1e6 + self.billed_seconds(seconds) * self.per_second


class StoragePrice(_Model):
    gb_month: float = NonNegative
    class_a_per_10k: float = NonNegative  # writes and listings
    class_b_per_10k: float = Field(0.0, ge=0)  # reads
    source: str


class ExternalIpPrice(_Model):
    """An in-use external IPv4 address, per hour (a job VM has one only with `external_ip: true`)."""

    spot: float = NonNegative
    on_demand: float = NonNegative
    source: str


class RegionFactor(_Model):
    compute: float = Field(1.0, gt=0)
    disk: float = Field(1.0, gt=0)
    source: str


class PriceTable(_Model):
    name: str
    version: str
    as_of: dt.date
    region: str
    note: str = ""
    hours_per_month: float = Field(730.0, gt=0)
    machines: dict[str, MachinePrice]
    gpus: dict[str, GpuPrice] = {}
    disks: dict[str, DiskPrice]
    scheduler: SchedulerPrice
    functions: FunctionPrice
    storage: StoragePrice
    # Left out of a table (an older file, a user's): no VM is priced for an address.
    external_ipv4: ExternalIpPrice | None = None
    regions: dict[str, RegionFactor]
    sources: dict[str, Source]

    @model_validator(mode="after")
    def _sources_exist(self) -> PriceTable:
        missing = sorted(
            f"{where}: {ref!r}" for where, ref in self._source_refs() if ref not in self.sources
        )
        if missing:
            raise ValueError(f"unknown source ids ({', '.join(missing)}); declare them under sources:")
        return self

    def _source_refs(self) -> list[tuple[str, str]]:
        refs: list[tuple[str, str]] = []
        for section in ("machines", "gpus", "disks", "regions"):
            for key, entry in getattr(self, section).items():
                refs.append((f"{section}.{key}.source", entry.source))
                spot_source = getattr(entry, "spot_source", None)
                if spot_source:
                    refs.append((f"{section}.{key}.spot_source", spot_source))
        for section in ("scheduler", "functions", "storage"):
            refs.append((f"{section}.source", getattr(self, section).source))
        if self.external_ipv4 is not None:
            refs.append(("external_ipv4.source", self.external_ipv4.source))
        return refs

    def external_ip_hourly(self, spot: bool) -> float:
        price = self.external_ipv4
        return 0.0 if price is None else (price.spot if spot else price.on_demand)

    # --- lookups ---------------------------------------------------------------------------

    def region_factor(self, region: str) -> RegionFactor:
        try:
            return self.regions[region]
        except KeyError:
            raise PricingError(
                f"price table {self.name}: no prices for region {region!r}; known regions: "
                f"{', '.join(sorted(self.regions))} (add it under regions: in a --prices file)"
            ) from None

    def machine(self, machine_type: str) -> MachinePrice:
        try:
            return self.machines[machine_type]
        except KeyError:
            raise PricingError(self._unknown("machine type", machine_type, self.machines, "machines")) from None

    def machine_hourly(self, machine_type: str, spot: bool, region: str) -> float:
        return self.machine(machine_type).hourly(spot) * self.region_factor(region).compute

    def gpu(self, gpu_type: str) -> GpuPrice:
        key = gpu_key(gpu_type)
        try:
            return self.gpus[key]
        except KeyError:
            raise PricingError(self._unknown("GPU", gpu_type, self.gpus, "gpus")) from None

    def gpu_hourly(self, gpu_type: str, spot: bool, region: str) -> float:
        return self.gpu(gpu_type).hourly(spot) * self.region_factor(region).compute

    def disk_gb_month(self, disk_type: str, region: str) -> float:
        try:
            price = self.disks[disk_type]
        except KeyError:
            raise PricingError(self._unknown("disk type", disk_type, self.disks, "disks")) from None
        return price.gb_month * self.region_factor(region).disk

    def missing_price(self, machine_type: str, gpu: str | None = None) -> str | None:
        """Why a VM of `machine_type` (with `gpu`, "nvidia-tesla-t4 x1") cannot be priced, in one short
        sentence with the fix; None when the table prices it."""
        missing = []
        if machine_type not in self.machines:
            missing.append(("machine type", machine_type, "machines"))
        elif gpu:
            gpu_type = parse_gpu(gpu)[0]
            bundled = self.bundled_gpus(machine_type)
            if (bundled is None or gpu_key(bundled[0]) != gpu_key(gpu_type)) and gpu_key(gpu_type) not in self.gpus:
                missing.append(("GPU", gpu_type, "gpus"))
        if not missing:
            return None
        what, value, section = missing[0]
        return (f"price table {self.name} has no price for {what} {value!r} "
                f"(add it under {section}: in a --prices file, see docs/cost.md)")

    def bundled_gpus(self, machine_type: str) -> tuple[str, int] | None:
        """The GPUs a machine type's price already includes (G2, A2), as (type, count)."""
        includes = self.machine(machine_type).includes
        return parse_gpu(includes) if includes else None

    def _unknown(self, what: str, value: str, known: Mapping[str, Any], section: str) -> str:
        close = difflib.get_close_matches(value, list(known), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        family = value.split("-")[0] + "-"
        listed = sorted(k for k in known if k.startswith(family)) or sorted(known)
        return (f"price table {self.name}: no price for {what} {value!r}{hint} "
                f"(known: {', '.join(listed) or 'none'}; add it under {section}: in a --prices file)")


# --- GPU names ---------------------------------------------------------------------------------

_GPU_PREFIXES = ("nvidia-tesla-", "nvidia-", "tesla-")
_GPU_SPEC = re.compile(r"^\s*(\S+)\s*(?:x\s*(\d+))?\s*$", re.IGNORECASE)


def gpu_key(gpu_type: str) -> str:
    """`nvidia-tesla-t4` and `t4` → `T4`; `nvidia-a100-80gb` → `A100-80GB`."""
    name = gpu_type.strip().lower()
    for prefix in _GPU_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    return name.upper()


def parse_gpu(value: str) -> tuple[str, int]:
    """`"nvidia-tesla-t4 x2"` → ("nvidia-tesla-t4", 2); a bare type means one GPU."""
    match = _GPU_SPEC.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a GPU like 'nvidia-tesla-t4 x1'")
    return match.group(1), int(match.group(2) or 1)


# --- loading -----------------------------------------------------------------------------------


def packaged_document() -> tuple[str, str]:
    """(name for messages, text) of the price tables shipped in the package."""
    text = resources.files("spotcron.cost").joinpath("data", PACKAGED).read_text(encoding="utf-8")
    return f"spotcron/cost/data/{PACKAGED}", text


def table_names() -> list[str]:
    _, text = packaged_document()
    return sorted((yaml.safe_load(text) or {}).get("tables", {}))


def load_prices(choice: str | None = None) -> PriceTable:
    """The table `choice` names: a packaged table name, a path to an override file, or None (default)."""
    doc_name, text = packaged_document()
    document = _parse_yaml(doc_name, text)
    tables = document.get("tables") or {}
    default = document.get("default")
    if choice is None or choice == "":
        return _build(doc_name, text, default, tables.get(default), path=("tables", default))
    if choice in tables:
        return _build(doc_name, text, choice, tables[choice], path=("tables", choice))
    path = Path(choice)
    try:
        override_text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError):
        raise ConfigError([Problem(str(path), None, "--prices",
                                   f"{choice!r} is neither a price table ({', '.join(sorted(tables))}) "
                                   "nor a file that exists")]) from None
    override = _parse_yaml(str(path), override_text)
    base_name = override.pop("base", default)
    if base_name not in tables:
        raise ConfigError([Problem(str(path), _line_of(str(path), override_text, ("base",)), "base",
                                   f"{base_name!r} is not a price table; use one of {', '.join(sorted(tables))}")])
    merged = merge_override(tables[base_name], override)
    merged.setdefault("sources", {})
    if OVERRIDE_SOURCE not in merged["sources"]:
        merged["sources"][OVERRIDE_SOURCE] = {"title": f"prices from {path.name}", "url": ""}
    return _build(str(path), override_text, f"{base_name}+{path.name}", merged, path=())


def merge_override(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`override` deep-merged over `base`; a price it sets without a source is attributed to it."""
    return _deep_merge(base, _attribute(override))


_PRICE_FIELDS = {"on_demand", "gb_month", "job_month", "per_million_invocations", "cpu_second",
                 "memory_second", "per_100ms", "class_a_per_10k", "class_b_per_10k", "compute", "disk"}
_ENTRY_SECTIONS = ("machines", "gpus", "disks", "regions")
_FLAT_SECTIONS = ("scheduler", "functions", "storage")


def _attribute(override: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(override)
    for section in _ENTRY_SECTIONS:
        entries = out.get(section)
        if isinstance(entries, Mapping):
            out[section] = {key: _attributed(entry) for key, entry in entries.items()}
    for section in _FLAT_SECTIONS:
        if isinstance(out.get(section), Mapping):
            out[section] = _attributed(out[section])
    return out


def _attributed(entry: Any) -> Any:
    if not isinstance(entry, Mapping):
        return entry
    entry = dict(entry)
    if "source" not in entry and _PRICE_FIELDS & entry.keys():
        entry["source"] = OVERRIDE_SOURCE
    if "spot" in entry and "spot_source" not in entry:
        entry["spot_source"] = OVERRIDE_SOURCE
    return entry


def _deep_merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _parse_yaml(name: str, text: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError([Problem(name, mark.line + 1 if mark else None, "", f"not valid YAML: {exc}")]) from None
    if not isinstance(data, dict):
        raise ConfigError([Problem(name, 1, "", "must be a mapping (tables, or one table's sections)")])
    return data


def _build(name: str, text: str, table_name: str | None, raw: Any, *, path: tuple[str, ...]) -> PriceTable:
    if not isinstance(raw, Mapping):
        raise ConfigError([Problem(name, None, ".".join(filter(None, path)),
                                   f"price table {table_name!r} is missing or not a mapping")])
    try:
        return PriceTable.model_validate({**raw, "name": table_name})
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(str(p) for p in err["loc"])
            problems.append(Problem(name, _line_of(name, text, path + loc), ".".join(loc),
                                    err["msg"].removeprefix("Value error, ") + f" (got {err.get('input')!r})"
                                    if err["type"] != "missing" else "is required"))
        raise ConfigError(problems) from None


def _line_of(name: str, text: str, loc: tuple[str, ...]) -> int | None:
    """1-based line of the key at `loc` in the YAML `text`, or of its nearest existing parent."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for key in loc:
        if not isinstance(node, yaml.MappingNode):
            break
        for key_node, value_node in node.value:
            if key_node.value == key:
                line = key_node.start_mark.line + 1
                node = value_node
                break
        else:
            break
    return line
