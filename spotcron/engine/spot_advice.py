"""The Spot advice object: refreshed by the sweep, read by start_job.

The sweep asks Compute Engine once per interval, for every machine type a placed job uses and
every zone it may go to, and rewrites `advice/spot.json` whole. start_job reads that one object
and never calls the advice API: a slow or failing API cannot delay a start, and a start with no
advice or stale advice runs in the fixed order, its record saying why (engine/placement.py).
"""

from __future__ import annotations

import functools
import logging
from datetime import timedelta

from pydantic import ValidationError

from spotcron.core import layout
from spotcron.core.errors import SpotcronError
from spotcron.core.runs import Placement
from spotcron.core.spec import JobSpec
from spotcron.core.zone_advice import Advice, ZoneAdvice
from spotcron.cost.prices import PriceTable
from spotcron.engine.deployed import SpecStore
from spotcron.engine.deps import Deps
from spotcron.engine.placement import place, placement_applies, regions_for

log = logging.getLogger("spotcron.engine")

# The advice object is written by the sweep, never by a VM; still, a start reads at most this much.
MAX_ADVICE_BYTES = 1 << 20
# A refresh younger than this share of the sweep interval is not repeated (two sweeps at once).
REFRESH_SHARE = 0.9


def read_advice(deps: Deps) -> tuple[Advice | None, str | None]:
    """The stored advice, or None and why not. Never raises: a start must not fail on advice."""
    try:
        data = deps.blobs.read_range(layout.ADVICE, 0, MAX_ADVICE_BYTES + 1)
    except Exception as exc:  # noqa: BLE001 - any failure means "no advice", said in the record
        return None, f"the Spot advice could not be read ({type(exc).__name__})"
    if data is None:
        return None, None
    if len(data) > MAX_ADVICE_BYTES:
        return None, f"the Spot advice object is over {MAX_ADVICE_BYTES} bytes"
    try:
        return Advice.from_json(data), None
    except (ValueError, ValidationError):
        return None, "the Spot advice object does not parse"


def placed(deps: Deps, spec: JobSpec) -> Placement | None:
    """The placement of one start of `spec` (None when placement does not apply to it)."""
    if not placement_applies(spec, deps.settings):
        return None
    advice, problem = read_advice(deps)
    try:
        table = deps.prices or _packaged_table()
    except SpotcronError as exc:
        why = f"no price table ({exc})"
        zones = [*(spec.machine.zones or deps.settings.zones),
                 *(z for r in regions_for(spec, deps.settings) for z in deps.settings.zones_in(r))]
        return Placement(zones=tuple(dict.fromkeys(zones)), why=f"fixed order: {why}", fallback=why)
    return place(spec, deps.settings, advice=advice, table=table, now=deps.clock.now(), advice_problem=problem)


@functools.cache
def _packaged_table() -> PriceTable:
    """The packaged default table, parsed once per process (about 0.2 s): a warm start_job
    instance places every later run without parsing it again."""
    from spotcron.cost.prices import load_prices

    return load_prices()


def refresh_advice(deps: Deps) -> Advice | None:
    """Ask the advisor for every placed machine type and zone, once per sweep interval.

    Returns the advice written, or None when nothing was due. A failing region or type is noted
    in the object's `problems` and the rest is kept; this never raises into the sweep.
    """
    if deps.advisor is None:
        return None
    now = deps.clock.now()
    current, _ = read_advice(deps)
    if current is not None and current.age(now) < timedelta(seconds=deps.settings.sweep_interval * REFRESH_SHARE):
        return None
    wanted = _wanted(deps)
    if not wanted:
        return None
    machines: dict[str, dict[str, ZoneAdvice]] = {}
    problems: list[str] = []
    for machine_type, regions in sorted(wanted.items()):
        zones_seen = machines.setdefault(machine_type, {})
        for region in sorted(regions):
            zones = deps.settings.zones_in(region)
            try:
                history = deps.advisor.capacity_history(region, machine_type, zones)
            except Exception as exc:  # noqa: BLE001 - one region's failure leaves the others usable
                problems.append(f"capacityHistory {region} {machine_type}: {exc}")
                history = {}
            if not history:
                problems.append(f"capacityHistory {region} {machine_type}: no history (type not covered)")
            try:
                scores = deps.advisor.capacity(region, machine_type, zones)
            except Exception as exc:  # noqa: BLE001
                problems.append(f"capacity {region} {machine_type}: {exc}")
                scores = {}
            for zone in zones:
                said = history.get(zone)
                zones_seen[zone] = ZoneAdvice(
                    spot_hourly=said.spot_hourly if said else None,
                    preemption_rate=said.preemption_rate if said else None,
                    obtainability=scores.get(zone))
    advice = Advice(fetched_at=now, machines=machines, problems=tuple(problems))
    deps.blobs.write(layout.ADVICE, advice.to_json(), content_type="application/json")
    for problem in problems:
        log.info("spot advice: %s", problem)
    return advice


def _wanted(deps: Deps) -> dict[str, set[str]]:
    """machine type → the regions some deployed job of that type may be placed in."""
    store = SpecStore(deps.blobs)
    wanted: dict[str, set[str]] = {}
    for job in store.jobs():
        deployed = store.read(job)
        if deployed is None:
            continue
        for variant in deployed.spec.variants():
            if placement_applies(variant, deps.settings):
                wanted.setdefault(variant.machine.type, set()).update(regions_for(variant, deps.settings))
    return wanted
