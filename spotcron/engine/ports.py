"""The outside systems spotcron talks to, each as a small interface.

Every port has an in-memory implementation (`spotcron.testing.memory`) that enforces the same contract
and is used by tests and the fault simulation, and a Google implementation (`spotcron.gcp`).
One behaviour suite (tests/contracts/) runs against every implementation of each port.
Implementations raise only the exceptions of `spotcron.core.errors`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from spotcron.core.names import MANAGED_LABEL  # noqa: F401 - every VM we create carries it

# Compute Engine instance statuses in which the VM still exists and may still bill.
ALIVE_STATUSES = frozenset({"PROVISIONING", "STAGING", "RUNNING", "STOPPING", "REPAIRING"})
DEAD_STATUSES = frozenset({"STOPPED", "TERMINATED", "SUSPENDING", "SUSPENDED"})


@dataclass(frozen=True)
class GpuRequest:
    type: str  # Compute Engine accelerator type, e.g. nvidia-tesla-t4
    count: int


@dataclass(frozen=True)
class InstanceRequest:
    """Everything needed to create one job VM; adapters turn it into the API's body."""

    name: str
    zone: str
    machine_type: str
    spot: bool
    max_run_duration_s: int
    disk_gb: int
    labels: Mapping[str, str]
    metadata: Mapping[str, str]
    service_account: str
    image: str = "projects/cos-cloud/global/images/family/cos-stable"
    disk_type: str = "pd-balanced"  # the engine picks per family: spotcron.core.catalog.boot_disk_type
    gpu: GpuRequest | None = None
    network: str = "global/networks/default"
    subnetwork: str = ""  # regions/REGION/subnetworks/NAME; empty: Compute picks the network's subnet
    # Shielded VM: vTPM and integrity monitoring always; Secure Boot where the job's GPU driver
    # does not need to load (docs/deploy.md, "Shielded VM").
    secure_boot: bool = True
    # An external IPv4 address only for a job that asks for one (`external_ip: true`): without it
    # the VM reaches Google's APIs, Artifact Registry, Cloud Storage and the functions through
    # Private Google Access, and nothing on the internet can reach it.
    external_ip: bool = False
    # Compute Engine's `requestId` (a UUID): an insert repeated with the same id within 60 minutes
    # is ignored and answered with the first one's operation, so a delivery whose insert call was
    # held while a copy created, ran and deleted the attempt's VM cannot create it again. One per
    # attempt, zone and provisioning model (engine/attempts.insert_request_id).
    request_id: str | None = None


@dataclass(frozen=True)
class Instance:
    name: str
    zone: str
    status: str
    labels: Mapping[str, str]
    machine_type: str
    provisioning_model: str  # SPOT | STANDARD
    created_at: datetime
    metadata: Mapping[str, str] = field(default_factory=dict)
    instance_id: str = ""

    @property
    def managed(self) -> bool:
        return self.labels.get(MANAGED_LABEL) == "1"


# How long Compute Engine remembers a requestId: "the server will guarantee that for at least 60
# minutes after the first request" (instances.insert, `requestId`).
REQUEST_ID_MEMORY_S = 3600


class RequestLedger:
    """The requestId rule for the in-memory and local Compute implementations: the first insert
    of an id within REQUEST_ID_MEMORY_S is remembered with its answer, and a repeat gets that
    answer (the instance as it was created, or the error) instead of a second insert."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[datetime, Instance | Exception]] = {}

    def repeat(self, request: InstanceRequest, now: datetime) -> Instance | Exception | None:
        if not request.request_id:
            return None
        seen = self._seen.get(request.request_id)
        if seen is None or (now - seen[0]).total_seconds() > REQUEST_ID_MEMORY_S:
            return None
        return seen[1]

    def remember(self, request: InstanceRequest, now: datetime, answer: Instance | Exception) -> None:
        if request.request_id and request.request_id not in self._seen:
            self._seen[request.request_id] = (now, answer)


@runtime_checkable
class Compute(Protocol):
    def create_instance(self, request: InstanceRequest) -> Instance:
        """Create and return the instance once the insert is accepted.

        An insert whose `request_id` was seen within REQUEST_ID_MEMORY_S creates nothing: it is
        answered as the first was (that instance, even if deleted since, or that error).

        Raises AlreadyExists when an instance of that name exists in the zone (HTTP 409),
        CreateFailed(kind, reason) when Compute Engine refuses (stockout, quota, permission, image),
        Transient when the call timed out: it may still have happened.
        """
        ...

    def get_instance(self, zone: str, name: str) -> Instance | None:
        """The instance, or None when it does not exist."""
        ...

    def list_managed(self) -> list[Instance]:
        """Every instance labelled spotcron=1, across all zones, in as few calls as the API allows."""
        ...

    def delete_instance(self, zone: str, name: str) -> bool:
        """Delete the instance with its disks; False when it was already gone."""
        ...


@dataclass(frozen=True)
class Blob:
    name: str
    data: bytes
    generation: int
    updated: datetime | None = None
    content_type: str = "application/octet-stream"

    def json(self) -> Any:
        import json

        return json.loads(self.data)


@runtime_checkable
class Blobs(Protocol):
    """One bucket. Names are object names inside it (`runs/JOB/RUN/run.json`)."""

    bucket: str

    def read(self, name: str) -> Blob | None: ...

    def write(self, name: str, data: bytes, *, if_generation_match: int | None = None,
              content_type: str = "application/octet-stream") -> int:
        """Write and return the new generation.

        if_generation_match=0 creates only if absent; N>0 replaces only generation N.
        Raises PreconditionFailed when the precondition does not hold.
        """
        ...

    def read_range(self, name: str, start: int, size: int) -> bytes | None:
        """Up to `size` bytes from offset `start` (a ranged download: memory stays that size);
        b"" at or past the end, None when the object does not exist. A growing object (a live
        log rewritten longer) is read on from where the last piece ended. Bytes are counted and
        returned as stored: an object stored with a Content-Encoding (a job may upload gzip) raises
        EncodedObject, never an inflated body."""
        ...

    def list(self, prefix: str) -> list[str]:
        """Every object name under `prefix`, sorted, all pages."""
        ...

    def list_some(self, prefix: str, limit: int, *, start: str = "") -> list[str]:
        """At most `limit` object names under `prefix` that sort at or after `start`, sorted: a
        bounded listing (one page or a few, however many objects a job wrote there)."""
        ...

    def list_folders(self, prefix: str, limit: int, *, start: str = "") -> list[str]:
        """At most `limit` folders directly under `prefix`, sorted: each object name under it cut
        after the first `/` that follows `prefix` (`runs/JOB/` gives `runs/JOB/RUN/`), once, for the
        folders holding an object that sorts at or after `start`. Objects directly under `prefix`
        are left out. A delimiter listing: what it costs is the number of folders, however many
        objects each one holds."""
        ...

    def delete(self, name: str) -> bool:
        """Delete; False when it was already gone."""
        ...


@runtime_checkable
class Events(Protocol):
    def publish(self, topic: str, data: Mapping[str, Any], attributes: Mapping[str, str] | None = None) -> str:
        """Publish JSON `data`; returns the message id."""
        ...


@runtime_checkable
class Identity(Protocol):
    def verify(self, token: str, audience: str) -> dict[str, Any]:
        """The verified claims of a Google-signed (or locally signed) ID token.

        Checks signature, expiry and audience; raises InvalidToken otherwise.
        """
        ...


@runtime_checkable
class Minter(Protocol):
    """Mints storage tokens limited to Credential Access Boundary rules (the credentials broker)."""

    def mint(self, rules: Sequence[Mapping[str, Any]]) -> tuple[str, int]:
        """A token limited to `rules` and its lifetime in seconds; Transient when none can be had now."""
        ...


@dataclass(frozen=True)
class ZoneHistory:
    """What capacityHistory says of one zone for one machine type."""

    spot_hourly: float | None  # the latest list price, USD per hour
    preemption_rate: float | None  # the mean of the daily rates returned


@runtime_checkable
class Advisor(Protocol):
    """Compute Engine's Spot advice for one region (regions.advice.capacityHistory and .capacity)."""

    def capacity_history(self, region: str, machine_type: str, zones: Sequence[str]) -> dict[str, ZoneHistory]:
        """zone → price and preemption rate for each of `zones`; {} for a type the history does not cover."""
        ...

    def capacity(self, region: str, machine_type: str, zones: Sequence[str]) -> dict[str, float]:
        """zone → obtainability score (0..1) of one Spot VM of `machine_type` now."""
        ...


@runtime_checkable
class Clock(Protocol):
    def now(self) -> datetime:
        """An aware UTC datetime."""
        ...
