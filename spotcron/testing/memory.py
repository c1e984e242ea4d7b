"""In-memory implementations of every port, enforcing the same contracts as Google's services.

Used by the tests, the fault simulation and the benchmarks. They are thread-safe, because
duplicate deliveries arrive concurrently, and they accept injected faults so the engine's
failure paths can be driven deterministically.
"""

from __future__ import annotations

import bisect
import itertools
import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from spotcron.core.errors import AlreadyExists, CreateFailed, ObjectKept, PreconditionFailed, Transient
from spotcron.engine.clock import SystemClock
from spotcron.engine.ports import Blob, Instance, InstanceRequest, RequestLedger, ZoneHistory


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, now: datetime | None = None):
        self._now = now or datetime(2026, 1, 1, tzinfo=UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now

    def set(self, now: datetime) -> None:
        with self._lock:
            self._now = now


@dataclass
class CreateFault:
    """Make the next matching create fail. `zone=None` matches every zone."""

    error: Exception
    zone: str | None = None
    times: int = 1
    # When true the instance is created anyway and the caller sees the error (a create that
    # timed out but succeeded).
    succeed_anyway: bool = False


class MemoryCompute:
    """Compute Engine in a dict, keyed by (zone, name), with Spot's DELETE termination action."""

    def __init__(self, clock=None, *, latency_s: float = 0.0):
        self.clock = clock or SystemClock()
        self.latency_s = latency_s
        self._instances: dict[tuple[str, str], Instance] = {}
        self._max_run: dict[tuple[str, str], int] = {}
        self._faults: list[CreateFault] = []
        self._requests = RequestLedger()
        self._lock = threading.RLock()
        self._ids = itertools.count(1000)
        self.calls: dict[str, int] = {"create": 0, "get": 0, "list": 0, "delete": 0}
        self.created: list[InstanceRequest] = []  # every successful insert, for "one VM per attempt" checks
        self.inserts: list[InstanceRequest] = []  # every insert that reached Compute Engine, refused ones too
        self.deleted: list[tuple[str, str]] = []
        # Seconds each insert takes; with a FakeClock the clock moves on by that much (a slow create).
        self.create_delay_s: Callable[[InstanceRequest], float] | None = None
        # (call, VM name) -> True to answer that call with Transient. Called outside the lock, so it
        # may also cut in: deliver a copy, run a sweep, wait for another thread.
        self.fault: Callable[[str, str], bool] | None = None
        # Seconds a new VM may be missing from list_managed while get_instance already returns it:
        # a list can lag behind a create (the sweep's LIST_LAG); a get by name cannot.
        self.list_lag_s: float = 0.0

    # --- faults ------------------------------------------------------------------------------
    def fail_create(self, error: Exception, *, zone: str | None = None, times: int = 1,
                    succeed_anyway: bool = False) -> None:
        with self._lock:
            self._faults.append(CreateFault(error, zone, times, succeed_anyway))

    def _take_fault(self, zone: str) -> CreateFault | None:
        for fault in self._faults:
            if fault.times > 0 and fault.zone in (None, zone):
                fault.times -= 1
                return fault
        return None

    def _hook(self, call: str, name: str) -> None:
        if self.fault is not None and self.fault(call, name):
            raise Transient(f"injected Compute Engine error on {call} {name}")

    # --- the port ----------------------------------------------------------------------------
    def create_instance(self, request: InstanceRequest) -> Instance:
        self._hook("create", request.name)
        if self.latency_s:
            time.sleep(self.latency_s)
        delay = self.create_delay_s(request) if self.create_delay_s is not None else 0.0
        if delay and hasattr(self.clock, "advance"):
            self.clock.advance(delay)
        with self._lock:
            self.calls["create"] += 1
            self.inserts.append(request)
            now = self.clock.now()
            repeated = self._requests.repeat(request, now)
            if isinstance(repeated, Exception):
                raise repeated
            if repeated is not None:
                return repeated  # Compute Engine ignores a repeated requestId: nothing is created
            fault = self._take_fault(request.zone)
            if fault and not fault.succeed_anyway:
                if isinstance(fault.error, CreateFailed):
                    self._requests.remember(request, now, fault.error)  # an operation that failed
                raise fault.error
            key = (request.zone, request.name)
            if key in self._instances:
                raise AlreadyExists(f"instance {request.name} already exists in {request.zone}")
            instance = Instance(
                name=request.name, zone=request.zone, status="RUNNING", labels=dict(request.labels),
                machine_type=request.machine_type, provisioning_model="SPOT" if request.spot else "STANDARD",
                created_at=self.clock.now(), metadata=dict(request.metadata), instance_id=str(next(self._ids)),
            )
            self._instances[key] = instance
            self._max_run[key] = request.max_run_duration_s
            self.created.append(request)
            self._requests.remember(request, now, instance)
            if fault:
                raise fault.error
            return instance

    def get_instance(self, zone: str, name: str) -> Instance | None:
        self._hook("get", name)
        with self._lock:
            self.calls["get"] += 1
            return self._instances.get((zone, name))

    def list_managed(self) -> list[Instance]:
        self._hook("list", "")
        with self._lock:
            self.calls["list"] += 1
            now = self.clock.now()
            return [i for i in self._instances.values()
                    if i.managed and (now - i.created_at).total_seconds() >= self.list_lag_s]

    def delete_instance(self, zone: str, name: str) -> bool:
        self._hook("delete", name)
        if self.latency_s:
            time.sleep(self.latency_s)
        with self._lock:
            self.calls["delete"] += 1
            self._max_run.pop((zone, name), None)
            if self._instances.pop((zone, name), None) is None:
                return False
            self.deleted.append((zone, name))
            return True

    # --- what Google does on its own -----------------------------------------------------------
    def add_foreign(self, instance: Instance) -> None:
        """An instance someone else created (for 'never touched' checks)."""
        with self._lock:
            self._instances[(instance.zone, instance.name)] = instance

    def set_status(self, zone: str, name: str, status: str) -> None:
        with self._lock:
            self._instances[(zone, name)] = replace(self._instances[(zone, name)], status=status)

    def preempt(self, zone: str, name: str) -> bool:
        """Spot preemption with instanceTerminationAction=DELETE: the VM simply disappears."""
        with self._lock:
            self._max_run.pop((zone, name), None)
            return self._instances.pop((zone, name), None) is not None

    def delay_max_run_duration(self, zone: str, name: str, seconds: float) -> None:
        """Compute Engine enforces this VM's maxRunDuration `seconds` late (its own lag, not ours)."""
        with self._lock:
            if (zone, name) in self._max_run:
                self._max_run[(zone, name)] += seconds

    def enforce_max_run_duration(self) -> list[Instance]:
        """Delete VMs past maxRunDuration, as Compute Engine does by itself."""
        now = self.clock.now()
        expired = []
        with self._lock:
            for key, instance in list(self._instances.items()):
                limit = self._max_run.get(key)
                if limit is not None and now >= instance.created_at + timedelta(seconds=limit):
                    expired.append(self._instances.pop(key))
                    self._max_run.pop(key, None)
        return expired

    def all_instances(self) -> list[Instance]:
        with self._lock:
            return list(self._instances.values())

    def peek(self, zone: str, name: str) -> Instance | None:
        """What exists, without counting a call or meeting a fault (for checks, not for the engine)."""
        with self._lock:
            return self._instances.get((zone, name))

    def peek_any(self, name: str) -> Instance | None:
        """The instance of that name in whichever zone, like peek."""
        with self._lock:
            return next((i for (_, n), i in self._instances.items() if n == name), None)


class MemoryBlobs:
    """A Cloud Storage bucket in a dict, with generation preconditions and injectable failures."""

    def __init__(self, bucket: str = "test-bucket", clock=None):
        self.bucket = bucket
        self.clock = clock or SystemClock()
        self._objects: dict[str, Blob] = {}
        self._names: list[str] = []  # sorted, so a prefix listing costs the size of its answer
        self._generations = itertools.count(1)
        self._lock = threading.RLock()
        self.fail_writes: Callable[[str], bool] | None = None  # name -> raise Transient?
        self.fail_reads: Callable[[str], bool] | None = None  # name -> raise Transient?
        # (call, name or prefix) -> True to answer with Transient; called outside the lock, so it may cut in.
        self.fault: Callable[[str, str], bool] | None = None
        self.calls: dict[str, int] = {"read": 0, "write": 0, "list": 0, "delete": 0, "read_range": 0}
        # Object holds and a bucket retention policy, as Cloud Storage keeps them: a held object, or
        # one younger than `retention_s`, refuses to be deleted or replaced (HTTP 403; the adapter
        # raises ObjectKept), by anyone and by the lifecycle rule (`expire`), until the hold is released.
        self._holds: dict[str, str] = {}  # name -> "Temporary" or "Event-Based"
        self.retention_s: float | None = None

    def _hook(self, call: str, name: str) -> None:
        if self.fault is not None and self.fault(call, name):
            raise Transient(f"injected storage error on {call} {name}")

    def hold(self, name: str, kind: str = "Temporary") -> None:
        """Place a hold on an existing object (what objects.patch with temporaryHold/eventBasedHold does)."""
        if kind not in ("Temporary", "Event-Based"):
            raise ValueError(f"hold kind {kind!r}: Temporary or Event-Based")
        with self._lock:
            if name not in self._objects:
                raise KeyError(name)
            self._holds[name] = kind

    def release(self, name: str) -> None:
        with self._lock:
            self._holds.pop(name, None)

    def _kept(self, name: str, current: Blob | None) -> None:
        """ObjectKept, in Cloud Storage's words, when `current` may not be deleted or replaced now."""
        if current is None:
            return
        kind = self._holds.get(name)
        if kind:
            raise ObjectKept(f"403 Object '{self.bucket}/{name}' is under active {kind} hold and cannot be deleted, "
                             f"overwritten or archived until hold is removed.")
        if self.retention_s is not None and current.updated is not None:
            until = current.updated + timedelta(seconds=self.retention_s)
            if self.clock.now() < until:
                raise ObjectKept(f"403 Object '{self.bucket}/{name}' is subject to bucket's retention policy or "
                                 f"object retention and cannot be deleted or overwritten until {until.isoformat()}")

    def expire(self, prefix: str, age_days: float) -> list[str]:
        """The bucket's lifecycle Delete rule for `prefix`: objects older than `age_days` go, except
        those held or retained, which the rule skips. The names deleted."""
        with self._lock:
            cutoff = self.clock.now() - timedelta(days=age_days)
            gone = []
            for name in [n for n in self._names if n.startswith(prefix)]:
                blob = self._objects[name]
                if blob.updated is None or blob.updated > cutoff:
                    continue
                try:
                    self._kept(name, blob)
                except ObjectKept:
                    continue
                del self._objects[name]
                del self._names[bisect.bisect_left(self._names, name)]
                gone.append(name)
            return gone

    def peek(self, name: str) -> Blob | None:
        """The object, without counting a call or meeting a fault (for checks, not for the engine)."""
        with self._lock:
            return self._objects.get(name)

    def list_quietly(self, prefix: str) -> list[str]:
        """Names under `prefix`, like peek: no call counted, no fault met."""
        with self._lock:
            return [name for name in self._names if name.startswith(prefix)]

    def read(self, name: str) -> Blob | None:
        self._hook("read", name)
        with self._lock:
            self.calls["read"] += 1
            if self.fail_reads is not None and self.fail_reads(name):
                raise Transient(f"injected storage error reading {name}")
            return self._objects.get(name)

    def read_range(self, name: str, start: int, size: int) -> bytes | None:
        self._hook("read", name)
        with self._lock:
            self.calls["read_range"] += 1
            if self.fail_reads is not None and self.fail_reads(name):
                raise Transient(f"injected storage error reading {name}")
            blob = self._objects.get(name)
            return None if blob is None else blob.data[start:start + size]

    def write(self, name: str, data: bytes, *, if_generation_match: int | None = None,
              content_type: str = "application/octet-stream") -> int:
        self._hook("write", name)
        with self._lock:
            self.calls["write"] += 1
            if self.fail_writes is not None and self.fail_writes(name):
                raise Transient(f"injected storage error writing {name}")
            current = self._objects.get(name)
            if if_generation_match is not None:
                current_generation = current.generation if current else 0
                if current_generation != if_generation_match:
                    raise PreconditionFailed(
                        f"{name}: generation is {current_generation}, expected {if_generation_match}")
            self._kept(name, current)  # a precondition is checked first: 412 before 403
            generation = next(self._generations)
            if current is None:
                bisect.insort(self._names, name)
            self._objects[name] = Blob(name=name, data=bytes(data), generation=generation,
                                       updated=self.clock.now(), content_type=content_type)
            return generation

    def list(self, prefix: str) -> list[str]:
        self._hook("list", prefix)
        with self._lock:
            self.calls["list"] += 1
            names, at = [], bisect.bisect_left(self._names, prefix)
            while at < len(self._names) and self._names[at].startswith(prefix):
                names.append(self._names[at])
                at += 1
            return names

    def list_some(self, prefix: str, limit: int, *, start: str = "") -> list[str]:
        self._hook("list", prefix)
        with self._lock:
            self.calls["list"] += 1
            names, at = [], bisect.bisect_left(self._names, max(prefix, start))
            while at < len(self._names) and self._names[at].startswith(prefix) and len(names) < limit:
                names.append(self._names[at])
                at += 1
            return names

    def list_folders(self, prefix: str, limit: int, *, start: str = "") -> list[str]:
        self._hook("list", prefix)
        with self._lock:
            self.calls["list"] += 1
            folders, at = [], bisect.bisect_left(self._names, max(prefix, start))
            while at < len(self._names) and self._names[at].startswith(prefix) and len(folders) < limit:
                rest = self._names[at][len(prefix):]
                if "/" not in rest:
                    at += 1
                    continue
                folder = prefix + rest[:rest.index("/") + 1]
                folders.append(folder)
                # '0' follows '/': past every object of this folder, as one delimiter listing skips them.
                at = bisect.bisect_left(self._names, folder[:-1] + "0", at)
            return folders

    def delete(self, name: str) -> bool:
        self._hook("delete", name)
        with self._lock:
            self.calls["delete"] += 1
            self._kept(name, self._objects.get(name))
            if self._objects.pop(name, None) is None:
                return False
            self._holds.pop(name, None)
            del self._names[bisect.bisect_left(self._names, name)]
            return True


@dataclass
class Published:
    topic: str
    data: Mapping[str, Any]
    attributes: Mapping[str, str] = field(default_factory=dict)
    # Set by Pub/Sub when it receives the publish, never by the publisher (PubsubMessage.publishTime).
    publish_time: datetime | None = None


class MemoryAdvisor:
    """Spot advice from a table: (machine type, zone) → (Spot $/h, daily rate, obtainability).

    Counts its calls, so a test can check that starts never ask it and a sweep asks once per
    interval; `fail` makes every call raise it.
    """

    def __init__(self, table: Mapping[tuple[str, str], tuple[float | None, float | None, float | None]]):
        self.table = dict(table)
        self.calls: list[tuple[str, str, str]] = []  # (method, region, machine type)
        self.fail: Exception | None = None

    def capacity_history(self, region: str, machine_type: str, zones: Sequence[str]) -> dict[str, ZoneHistory]:
        self.calls.append(("capacityHistory", region, machine_type))
        if self.fail:
            raise self.fail
        return {zone: ZoneHistory(price, rate) for (mt, zone), (price, rate, _) in self.table.items()
                if mt == machine_type and zone in zones and price is not None}

    def capacity(self, region: str, machine_type: str, zones: Sequence[str]) -> dict[str, float]:
        self.calls.append(("capacity", region, machine_type))
        if self.fail:
            raise self.fail
        return {zone: score for (mt, zone), (_, _, score) in self.table.items()
                if mt == machine_type and zone in zones and score is not None}


class MemoryMinter:
    """The broker's Minter in memory: opaque tokens that remember the rules they were minted for."""

    def __init__(self, lifetime_s: int = 3600):
        self.lifetime_s = lifetime_s
        self.minted: list[tuple[str, list[dict[str, Any]]]] = []

    def mint(self, rules: Sequence[Mapping[str, Any]]) -> tuple[str, int]:
        token = f"memory-token-{len(self.minted) + 1}"
        self.minted.append((token, [dict(rule) for rule in rules]))
        return token, self.lifetime_s

    def rules_of(self, token: str) -> list[dict[str, Any]]:
        return next(rules for minted, rules in self.minted if minted == token)


class MemoryEvents:
    def __init__(self, clock=None):
        self.clock = clock  # stamps each message's publish time, as Pub/Sub does on receipt
        self.published: list[Published] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        # ("publish", event type) -> True to answer with Transient, as MemoryBlobs.fault.
        self.fault: Callable[[str, str], bool] | None = None

    def publish(self, topic: str, data: Mapping[str, Any], attributes: Mapping[str, str] | None = None) -> str:
        if self.fault is not None and self.fault("publish", str(data.get("type", ""))):
            raise Transient(f"injected Pub/Sub error publishing {data.get('type')}")
        # Pub/Sub carries bytes: round-trip through JSON so a value the real adapter could not
        # encode fails here too, and subscribers never share mutable state with the publisher.
        try:
            payload = json.loads(json.dumps(dict(data)))
        except (TypeError, ValueError) as exc:
            raise TypeError(f"event data for {topic} is not JSON: {exc}") from None
        with self._lock:
            self.published.append(Published(topic, payload, dict(attributes or {}),
                                            self.clock.now() if self.clock is not None else None))
            return str(next(self._ids))

    def of_type(self, event_type: str) -> list[Published]:
        return [p for p in self.published if p.data.get("type") == event_type]
