"""Placement: which zone a run starts in, by expected cost, across the regions it may use.

For each zone of each allowed region:

    expected = Spot price x expected run time
             + preemption rate x (work redone) x Spot price
             + data transfer (image pull and results upload across regions, cost/transfer.py)

The run tries the zones cheapest first; a stockout moves to the next in that order, as in the
fixed order. Each attempt goes through every zone once (`attempt_order`: a retry after a
preemption starts one zone further down, wraps around, and tries the zone that lost its VM last). Zones where capacity advice says "no Spot capacity now" are tried last (cheapest of them
first), never dropped: advice is a forecast, and a run that meets a stockout in every likely zone
must still get its try in the others before it fails.

What it can know: prices, daily preemption rates and capacity as of the last refresh of the
advice object (core/zone_advice.py). What it cannot: how long this run will take (it takes the job's
timeout, an upper bound), whether capacity is still there at the insert, or the future. Missing or
stale advice, or a job that pins its zones, gets the fixed order and the record says why.

Pure: the advice, settings, prices and `now` come in as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from spotcron.core.runs import Placement, ZoneChoice
from spotcron.core.settings import Settings
from spotcron.core.spec import JobSpec
from spotcron.core.zone_advice import Advice
from spotcron.cost.prices import PriceTable, PricingError, parse_gpu
from spotcron.cost.transfer import run_transfer_usd

# Of the work a preempted attempt had done, the share done again: half on average without a
# checkpoint (preempted uniformly in time); a checkpoint keeps most of it (an assumption: the job
# syncs often; docs/cost.md).
REDO_WITHOUT_CHECKPOINT = 0.5
REDO_WITH_CHECKPOINT = 0.1


def region_of(zone: str) -> str:
    return zone.rsplit("-", 1)[0]


def regions_for(spec: JobSpec, settings: Settings) -> tuple[str, ...]:
    """The regions `spec` may run in; just the stack's when placement does not apply to it."""
    if spec.machine.zones:  # zones named by the job are a pin: it keeps its order
        return (settings.region,)
    if spec.regions is not None:
        return tuple(dict.fromkeys(spec.regions)) or (settings.region,)
    return settings.placement_regions()


def placement_applies(spec: JobSpec, settings: Settings) -> bool:
    return regions_for(spec, settings) != (settings.region,)


def place(spec: JobSpec, settings: Settings, *, advice: Advice | None, table: PriceTable,
          now: datetime, advice_problem: str | None = None, expected_s: float | None = None) -> Placement | None:
    """The zone order for one start of `spec` and its receipt; None when placement is off for it.

    `expected_s`: how long a run is expected to keep its VM; None: the job's timeout."""
    if not placement_applies(spec, settings):
        return None
    # Without usable advice: the stack's zones first when the job may run there, then every other
    # allowed region's, so a stockout in one region still tries the rest before the run fails
    # (never dropped); a region the job's `regions:` leave out is never in it.
    allowed = regions_for(spec, settings)
    home = (settings.region,) if settings.region in allowed else ()
    fixed = tuple(dict.fromkeys(z for r in (*home, *allowed) for z in settings.zones_in(r)))
    age_limit = settings.placement.max_advice_age
    if advice is None:
        why = advice_problem or "no Spot advice yet (the sweep writes it on its next pass)"
        return Placement(zones=fixed, why=f"fixed order: {why}", fallback=why)
    age = advice.age(now).total_seconds()
    if age > age_limit:
        why = f"Spot advice is {age / 60:.0f} min old, older than placement.max_advice_age ({age_limit}s)"
        return Placement(zones=fixed, why=f"fixed order: {why}", advice_at=advice.fetched_at, fallback=why)

    choices: list[ZoneChoice] = []
    unlikely: list[ZoneChoice] = []
    skipped: list[str] = []
    notes: list[str] = []
    for region in regions_for(spec, settings):
        zones = settings.zones_in(region)
        if not zones:
            notes.append(f"{region}: no zones known (name them under placement.zones)")
            continue
        for zone in zones:
            choice = _weigh(spec, settings, advice, table, zone, notes, expected_s)
            if choice is None:
                continue
            if choice.capacity == "none":
                skipped.append(zone)
                unlikely.append(choice)
                continue
            choices.append(choice)
    if not choices and not unlikely:
        why = "; ".join(notes) or "no zone could be priced"
        return Placement(zones=fixed, why=f"fixed order: {why}", advice_at=advice.fetched_at, fallback=why)
    rank = {zone: i for i, zone in enumerate(z for r in regions_for(spec, settings) for z in settings.zones_in(r))}

    def by_cost(c: ZoneChoice) -> tuple[float, int]:
        return round(c.expected_usd, 12), rank.get(c.zone, len(rank))

    choices = sorted(choices, key=by_cost) + sorted(unlikely, key=by_cost)
    best = choices[0]
    why = _explain(best, choices[1:], skipped, notes)
    return Placement(zones=tuple(c.zone for c in choices), why=why, advice_at=advice.fetched_at,
                     choices=tuple(choices))


def attempt_order(zones: tuple[str, ...], *, lost_in: str | None = None,
                  unlikely: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The order one attempt tries `zones` (the run's order): every one of them, once per
    provisioning model, before it fails for capacity.

    After a preemption (`lost_in`: the zone that lost the previous attempt's VM) it starts one
    zone further down and wraps around, so a retry spreads away from the zone that just reclaimed
    its VM yet still reaches the zones before it. Zones capacity advice calls unlikely come after
    the rest, and the zone that lost the VM comes last: the preemption is the newest evidence of
    no capacity there."""
    zones = tuple(dict.fromkeys(zones))
    last: tuple[str, ...] = ()
    if lost_in in zones:
        at = zones.index(lost_in)
        zones, last = zones[at + 1:] + zones[:at], (lost_in,)
    likely = tuple(z for z in zones if z not in unlikely)
    return likely + tuple(z for z in zones if z in unlikely) + last


def _weigh(spec: JobSpec, settings: Settings, advice: Advice, table: PriceTable, zone: str,
           notes: list[str], expected_s: float | None = None) -> ZoneChoice | None:
    region = region_of(zone)
    machine = spec.machine
    said = advice.zone(machine.type, zone)
    hours = (spec.timeout if expected_s is None else expected_s) / 3600
    try:
        gpu_hourly = 0.0
        if machine.gpu and table.bundled_gpus(machine.type) is None:
            gpu_type, count = parse_gpu(f"{machine.gpu.type} x{machine.gpu.count}")
            gpu_hourly = table.gpu_hourly(gpu_type, True, region) * count
        if said is not None and said.spot_hourly is not None and not gpu_hourly:
            hourly, source = said.spot_hourly, "advice"
        else:
            # N1 with GPUs, custom types and types the history does not cover: the dated table,
            # and no preemption term (nothing says what the rate is).
            hourly, source = table.machine_hourly(machine.type, True, region) + gpu_hourly, table.name
    except PricingError as exc:
        notes.append(f"{zone}: {exc}")
        return None
    rate = said.preemption_rate if said is not None and source == "advice" else None
    redo = REDO_WITH_CHECKPOINT if spec.checkpoint else REDO_WITHOUT_CHECKPOINT
    run_usd = hourly * hours
    preemption_usd = (rate or 0.0) * redo * run_usd
    transfer = sum(run_transfer_usd(settings.region, region, image=spec.image, image_gb=settings.placement.image_gb,
                                    results_gb=settings.placement.results_gb).values())
    return ZoneChoice(zone=zone, spot_hourly=hourly, price_source=source, preemption_rate=rate,
                      capacity=said.capacity if said is not None else None, transfer_usd=transfer,
                      expected_usd=run_usd + preemption_usd + transfer)


def _explain(best: ZoneChoice, others: list[ZoneChoice], skipped: list[str], notes: list[str]) -> str:
    parts = [f"{best.zone}: expected ${best.expected_usd:.6f} per run at Spot ${best.spot_hourly:.5f}/h "
             f"({'Compute Engine advice' if best.price_source == 'advice' else 'price table ' + best.price_source}"
             + (f", preemption rate {best.preemption_rate:.2f}/day" if best.preemption_rate is not None
                else ", no preemption rate known") + ")"]
    if best.transfer_usd:
        parts.append(f"transfer ${best.transfer_usd:.6f} included")
    if others:
        parts.append(f"next {others[0].zone} ${others[0].expected_usd:.6f}")
    if skipped:
        parts.append(f"no Spot capacity per advice in {', '.join(skipped)} (tried last)")
    parts.extend(notes)
    return "; ".join(parts)


@dataclass(frozen=True)
class PlacedMonth:
    """A job's month of VM compute and transfer, with placement and in the fixed order."""

    job: str
    zone: str  # where placement would start its runs now
    fixed_zone: str
    with_usd: float
    without_usd: float
    why: str


def project_placement(spec: JobSpec, settings: Settings, *, advice: Advice, table: PriceTable, now: datetime,
                      runs_per_month: float, vm_seconds: float) -> PlacedMonth | None:
    """What `spec`'s runs would cost a month under `advice` (expected cost, preemptions and
    transfer included), placed and in the stack's fixed order; None when placement is off for it
    or the advice does not let it choose."""
    placement = place(spec, settings, advice=advice, table=table, now=now, expected_s=vm_seconds)
    if placement is None or placement.fallback is not None or not placement.choices:
        return None
    fixed_zone = (spec.machine.zones or settings.zones)[0]
    fixed = _weigh(spec, settings, advice, table, fixed_zone, [], vm_seconds)
    if fixed is None:
        return None
    best = placement.choices[0]
    return PlacedMonth(job=spec.name, zone=best.zone, fixed_zone=fixed_zone,
                       with_usd=best.expected_usd * runs_per_month, without_usd=fixed.expected_usd * runs_per_month,
                       why=placement.why)
