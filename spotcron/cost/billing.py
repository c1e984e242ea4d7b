"""What a run cost: pure arithmetic over a price table.

Billing model (Compute Engine): every VM — every attempt of a run — is billed per second with a
one-minute minimum for its vCPUs, memory and GPUs, at the price of its provisioning model (Spot
or on-demand), from creation to deletion; its boot disk is billed per GB-month, prorated per
second, with no minimum. A VM outside the stack's region pays data transfer for its image pull
and its upload to the stack's bucket (cost/transfer.py), priced from the stack's assumed sizes
(`placement.image_gb`, `placement.results_gb`): no part of spotcron measures the bytes. Around the
VM each run costs function invocations (one `start_job`, one `job_done` per attempt); its storage,
the sweep and the scheduler entries are the stack's, counted in the monthly projection.

This module ships to the functions (the engine prices each run as it ends, `cost_function`);
what a job will cost a month is `spotcron.cost.projection`, which stays on the user's side.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from spotcron.core.catalog import boot_disk_type
from spotcron.core.errors import SpotcronError
from spotcron.core.runs import Attempt, Outcome, RunRecord
from spotcron.cost.prices import FunctionPrice, PriceTable, gpu_key, load_prices, parse_gpu
from spotcron.cost.transfer import run_transfer_usd

log = logging.getLogger("spotcron.cost")

BILLING_MINIMUM_S = 60
RUN_ITEMS = ("compute", "gpu", "disk", "functions")


@dataclass(frozen=True)
class Overheads:
    """What the system does around a VM: assumptions, not prices. Override per call."""

    start_seconds: float = 2.0  # start_job: validate, insert the VM without waiting, write the record
    done_seconds: float = 2.0  # job_done: verify the token, finalize the record, delete the VM
    sweep_seconds: float = 1.0  # one sweep pass over the managed VMs
    # The recipe's start/stop functions wait for the operation: about 60 s each, as it says.
    classic_function_seconds: float = 60.0
    results_mb_per_run: float = 1.0  # logs, manifest and results of one run
    # Storage operations of one run, as the engine makes them (tests/cost/test_cost.py counts them through
    # the functions on the in-memory bucket, so this cannot drift). Class A: run.json 5 writes
    # (scheduled, starting, running, ended with its effects owed, effects done), the live marker 3
    # (waiting, running, owed; deleting is free), the limits 5 (at start the listing of each UTC day
    # it reaches before and after its admission is written, and the admission; at the end the listing
    # and the settlement; one day for most runs), the token's replay
    # marker, the live-index listings of the concurrency check, of the queue ahead of a start and of
    # the queue at the run's end, the job's listing for history pruning, and the runner's logs.txt,
    # one results file and manifest.json. Class B: 18 reads (among them the record once more right
    # before the insert and when its end's effects are recorded done, the deployed spec once more
    # right before the insert, and once with its since object for the tick's trust
    # (engine/tick_trust.py), the pruning mark once more right after the record's create, and the
    # runner's hardware.json).
    # Live log parts (one per 5 s in which the job's output grew) come on top and depend on the job.
    class_a_per_run: int = 21
    class_b_per_run: int = 18
    sweep_lists: int = 1  # Class A listings per sweep pass: the live index (engine/sweep.py)
    # scheduling: shared. One dispatch a minute; in a minute where some job fires it reads its
    # cursor (Class B) and writes it once (Class A), and publishes one message per tick (each adds a little: the client
    # batches concurrent publishes). A warm instance reads nothing else; a cold one lists the
    # deployed specs (Class A) and reads each, and the cursor (Class B). Cloud Run keeps an idle
    # instance for minutes, so one fired every minute is rarely cold: an hourly cold start is
    # assumed, which errs high.
    dispatch_seconds: float = 0.2
    publish_seconds: float = 0.005
    dispatch_cold_starts_per_day: float = 24.0
    disk_type: str | None = None  # None: what the engine gives the machine (catalog.boot_disk_type)
    classic_disk_type: str = "pd-standard"


DEFAULT_OVERHEADS = Overheads()


@dataclass(frozen=True)
class RunCost:
    total_usd: float
    items: dict[str, float]


@dataclass(frozen=True)
class FunctionUse:
    """Function invocations and their billed instance-seconds (each rounded up to the granularity)."""

    invocations: float = 0.0
    seconds: float = 0.0

    @classmethod
    def of(cls, price: FunctionPrice, invocations: float, seconds_each: float) -> FunctionUse:
        return cls(invocations, invocations * price.billed_seconds(seconds_each))

    def __add__(self, other: FunctionUse) -> FunctionUse:
        return FunctionUse(self.invocations + other.invocations, self.seconds + other.seconds)

    def __mul__(self, factor: float) -> FunctionUse:
        return FunctionUse(self.invocations * factor, self.seconds * factor)

    def usd(self, price: FunctionPrice) -> float:
        return self.invocations * price.per_million_invocations / 1e6 + self.seconds * price.per_second


# --- one run -----------------------------------------------------------------------------------


def billed_vm_seconds(seconds: float) -> int:
    """Per second, rounded up, with the one-minute minimum: 20 s bills 60, 61 s bills 61."""
    return max(BILLING_MINIMUM_S, math.ceil(seconds - 1e-9))


def attempt_seconds(attempt: Attempt, now: datetime | None = None) -> float | None:
    """How long the attempt's VM existed; a VM not yet deleted counts until `now` when given."""
    if attempt.vm_seconds is not None:
        return attempt.vm_seconds
    if attempt.created_at is not None and now is not None:
        return max(0.0, (now - attempt.created_at).total_seconds())
    return None


def vm_items(machine_type: str, spot: bool, gpu: str | None, disk_gb: float, seconds: float,
             table: PriceTable, region: str, disk_type: str | None, *, external_ip: bool = False) -> dict[str, float]:
    """compute, gpu and disk for one VM that lived `seconds`, and `external_ip` when it had an
    external IPv4 address (billed per second like the VM, at the in-use rate of its model)."""
    billed = billed_vm_seconds(seconds)
    compute = table.machine_hourly(machine_type, spot, region) * billed / 3600
    gpu_usd = 0.0
    if gpu:
        gpu_type, count = parse_gpu(gpu)
        bundled = table.bundled_gpus(machine_type)
        if bundled is None or gpu_key(bundled[0]) != gpu_key(gpu_type):
            gpu_usd = table.gpu_hourly(gpu_type, spot, region) * count * billed / 3600
    disk_type = disk_type or boot_disk_type(machine_type)
    disk = disk_gb * table.disk_gb_month(disk_type, region) * seconds / (table.hours_per_month * 3600)
    items = {"compute": compute, "gpu": gpu_usd, "disk": disk}
    if external_ip:
        items["external_ip"] = table.external_ip_hourly(spot) * billed / 3600
    return items


def run_cost(record: RunRecord, table: PriceTable, region: str, *, usage: Overheads = DEFAULT_OVERHEADS,
             now: datetime | None = None, sweep_invocations: float = 0.0, image_gb: float = 0.0,
             results_gb: float = 0.0) -> RunCost:
    """The cost of one run: every attempt's VM and its data transfer, plus its function invocations.

    Attempts whose VM was never created cost nothing, nor does one that never ran its
    configuration (a local host without the hardware it names: nothing of it was measured, so
    no VM of it is priced); a run without any VM still made its start_job call, its whole cost. A VM not yet deleted is billed up to `now`
    when given, else left out. `sweep_invocations` is the share of sweep passes to charge to this
    run (the engine may pass sweeps per month / runs per month; default none). `image_gb` and
    `results_gb` are what each VM pulls and uploads (the stack's assumptions): a VM in another
    region than `region` pays their transfer, as the item `transfer` (absent when nothing is due).
    """
    items = dict.fromkeys(RUN_ITEMS, 0.0)
    image = str((record.spec or {}).get("image") or "")
    vms = 0
    for attempt in record.attempts:
        seconds = attempt_seconds(attempt, now)
        if seconds is None or attempt.outcome == Outcome.UNAVAILABLE:
            continue
        vms += 1
        where = _attempt_region(attempt, table, region)
        one = vm_items(attempt.machine_type, attempt.provisioning_model == "SPOT", attempt.gpu,
                       attempt.disk_gb, seconds, table, where, usage.disk_type, external_ip=attempt.external_ip)
        receipt = record.placement.choice(attempt.zone) if record.placement is not None else None
        if receipt is not None and receipt.price_source == "advice" and attempt.provisioning_model == "SPOT":
            # The Spot price the run was placed at is the price it is billed at (its receipt).
            one["compute"] = receipt.spot_hourly * billed_vm_seconds(seconds) / 3600
        # Every VM is fresh: each pulls its image whole and uploads its own attempt's files.
        moved = sum(run_transfer_usd(region, where, image=image, image_gb=image_gb, results_gb=results_gb).values())
        if moved:
            one["transfer"] = moved
        for key, value in one.items():
            items[key] = items.get(key, 0.0) + value
    price = table.functions
    # One start_job per run, one job_done (or sweep action) per attempt that had a VM.
    calls = (FunctionUse.of(price, 1, usage.start_seconds) + FunctionUse.of(price, vms, usage.done_seconds)
             + FunctionUse.of(price, sweep_invocations, usage.sweep_seconds))
    items["functions"] = calls.usd(price)
    return RunCost(total_usd=sum(items.values()), items=items)


def _attempt_region(attempt: Attempt, table: PriceTable, default: str) -> str:
    """The region the attempt's VM ran in, when the table prices it; else `default` (the stack's)."""
    region = attempt.zone.rsplit("-", 1)[0] if attempt.zone else default
    return region if region in table.regions else default


# --- for the engine ----------------------------------------------------------------------------


def cost_function(prices: PriceTable | str | None, region: str, *, image_gb: float = 0.0,
                  results_gb: float = 0.0) -> Callable[[Any], tuple[float | None, dict, str | None]]:
    """What the engine calls on a run's terminal record: (total USD, items, why unpriced). `image_gb`
    and `results_gb` price the data transfer of a VM outside `region` (run_cost).

    A VM not yet deleted when the run ends is billed up to that moment (the record's
    updated_at). A machine the table has no price for gives (None, {}, the reason) and a warning: a
    missing price must never fail a run, and the record says why it has no cost.
    """
    # Loaded on the first run that ends, not at the function's cold start: parsing the table
    # costs about 0.2 s, and most start_job calls price nothing.
    loaded: list[PriceTable] = [prices] if isinstance(prices, PriceTable) else []

    def cost(record: Any) -> tuple[float | None, dict, str | None]:
        try:
            if not loaded:
                loaded.append(load_prices(prices))
            result = run_cost(record, loaded[0], region, now=record.updated_at, image_gb=image_gb,
                              results_gb=results_gb)
        except SpotcronError as exc:  # an unknown price, or a --prices file that does not load
            why = unpriced_reason(record, loaded[0]) if loaded else None
            log.warning("no cost for run %s/%s: %s", record.job, record.run_id, why or exc)
            return None, {}, why or str(exc).splitlines()[0]
        return result.total_usd, result.items, None

    return cost


def unpriced_reason(record: RunRecord, table: PriceTable) -> str | None:
    """Why `table` cannot price `record`: the first of its attempts' machines (or GPUs) it lacks."""
    for attempt in record.attempts:
        if attempt.outcome != Outcome.UNAVAILABLE and attempt.machine_type:
            missing = table.missing_price(attempt.machine_type, attempt.gpu)
            if missing is not None:
                return missing
    return None
