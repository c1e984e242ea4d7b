"""Placement: the zone of each start by expected cost, and its receipt on the record."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spotcron.core import layout
from spotcron.core.errors import CreateFailed
from spotcron.core.settings import Settings
from spotcron.core.zone_advice import Advice, ZoneAdvice
from spotcron.cost.billing import run_cost
from spotcron.cost.prices import load_prices
from spotcron.engine.placement import place
from spotcron.testing.harness import Harness, make_spec
from spotcron.testing.memory import MemoryAdvisor

NOW = datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC)
RUN = "20261122-1200"
TABLE = load_prices()
PLACED = {"regions": ["us-west4", "us-east1"], "image_gb": 0.0, "results_gb": 0.0}


def settings(**placement) -> Settings:
    return Settings(project="p", zones=("us-central1-a", "us-central1-b"), placement={**PLACED, **placement})


def advice(zones: dict[str, tuple[float | None, float | None, float | None]], *, at: datetime = NOW,
           machine: str = "e2-small") -> Advice:
    """zone → (Spot $/h, daily preemption rate, obtainability)."""
    return Advice(fetched_at=at, machines={machine: {
        zone: ZoneAdvice(spot_hourly=price, preemption_rate=rate, obtainability=obtainable)
        for zone, (price, rate, obtainable) in zones.items()}})


PRICES = {
    "us-central1-a": (0.0070, 0.05, 0.9), "us-central1-b": (0.0070, 0.05, 0.9),
    "us-west4-a": (0.0020, 0.20, 0.9), "us-west4-b": (0.0021, 0.02, 0.9), "us-west4-c": (0.0030, 0.0, 0.9),
    "us-east1-b": (0.0050, 0.0, 0.9), "us-east1-c": (0.0050, 0.0, 0.9), "us-east1-d": (0.0050, 0.0, 0.9),
}


# --- the choice ----------------------------------------------------------------------------------

def test_the_zone_with_the_lowest_expected_cost_goes_first():
    chosen = place(make_spec(), settings(), advice=advice(PRICES), table=TABLE, now=NOW)
    # us-west4-a is the cheapest list price, but its preemption rate (0.20 x half the run redone)
    # costs more than us-west4-b's 0.0001 $/h difference: expected cost, not price, decides.
    assert chosen.zones[:3] == ("us-west4-b", "us-west4-a", "us-west4-c")
    assert chosen.zones[-2:] == ("us-central1-a", "us-central1-b")
    best = chosen.choice("us-west4-b")
    assert best.spot_hourly == 0.0021 and best.price_source == "advice" and best.preemption_rate == 0.02
    assert best.expected_usd == pytest.approx(0.0021 / 6 * (1 + 0.02 * 0.5))
    assert chosen.fallback is None and "us-west4-b: expected $" in chosen.why


def test_a_checkpoint_shrinks_the_preemption_term():
    chosen = place(make_spec(checkpoint="/checkpoint"), settings(), advice=advice(PRICES), table=TABLE, now=NOW)
    # With 10% of the work redone, us-west4-a's lower price wins over its higher rate.
    assert chosen.zones[0] == "us-west4-a"


STACK_IMAGE = "us-central1-docker.pkg.dev/p/spotcron/bot:1"  # in the stack's regional repository


def test_transfer_costs_can_flip_the_choice():
    cheap = place(make_spec(image=STACK_IMAGE), settings(), advice=advice(PRICES), table=TABLE, now=NOW)
    heavy = place(make_spec(image=STACK_IMAGE), settings(image_gb=2.0), advice=advice(PRICES), table=TABLE, now=NOW)
    assert cheap.zones[0] == "us-west4-b"
    # Pulling a 2 GB image across regions ($0.02/GB) costs more than 10 minutes of Spot saves.
    assert heavy.zones[0] == "us-central1-a"
    assert heavy.choice("us-west4-b").transfer_usd == pytest.approx(0.04)
    assert heavy.choice("us-central1-a").transfer_usd == 0.0


def test_an_image_in_a_multi_region_repository_pulls_free_across_its_continent():
    from spotcron.cost.transfer import pull_rate

    multi = place(make_spec(image="us-docker.pkg.dev/p/r/bot:1"), settings(image_gb=2.0), advice=advice(PRICES),
                  table=TABLE, now=NOW)
    assert multi.zones[0] == "us-west4-b" and multi.choice("us-west4-b").transfer_usd == 0.0
    assert pull_rate("us-docker.pkg.dev/p/r/bot:1", "europe-west4") == 0.08
    assert pull_rate("docker.io/library/python:3.11-slim", "us-west4") == 0.0
    assert pull_rate("us-west4-docker.pkg.dev/p/r/bot:1", "us-west4") == 0.0


def test_capacity_advice_puts_a_zone_last_never_drops_it():
    prices = {**PRICES, "us-west4-b": (0.0021, 0.02, 0.1)}
    chosen = place(make_spec(), settings(), advice=advice(prices), table=TABLE, now=NOW)
    assert chosen.zones[0] == "us-west4-a" and chosen.zones[-1] == "us-west4-b"
    assert len(chosen.zones) == 8
    assert "no Spot capacity per advice in us-west4-b (tried last)" in chosen.why


def test_advice_of_no_capacity_anywhere_still_orders_every_allowed_zone():
    prices = {zone: (price, rate, 0.1) for zone, (price, rate, _) in PRICES.items()}
    chosen = place(make_spec(), settings(), advice=advice(prices), table=TABLE, now=NOW)
    assert set(chosen.zones) == set(PRICES) and chosen.fallback is None


def test_stale_advice_falls_back_to_the_fixed_order_and_says_so():
    old = advice(PRICES, at=NOW - timedelta(hours=2))
    chosen = place(make_spec(), settings(), advice=old, table=TABLE, now=NOW)
    # The stack's zones first, then the other allowed regions' (tried before the run fails).
    assert chosen.zones[:2] == ("us-central1-a", "us-central1-b") and len(chosen.zones) == 8
    assert chosen.fallback == "Spot advice is 120 min old, older than placement.max_advice_age (3600s)"


def test_missing_advice_falls_back_to_the_fixed_order_and_says_so():
    chosen = place(make_spec(), settings(), advice=None, table=TABLE, now=NOW)
    assert chosen.zones[:2] == ("us-central1-a", "us-central1-b") and "no Spot advice yet" in chosen.fallback
    assert set(chosen.zones) == set(PRICES)


def test_a_type_the_history_does_not_cover_is_priced_from_the_table_without_a_preemption_term():
    chosen = place(make_spec(), settings(), advice=advice(PRICES, machine="n2-standard-2"), table=TABLE, now=NOW)
    first = chosen.choices[0]
    assert first.price_source == TABLE.name and first.preemption_rate is None
    assert "no preemption rate known" in chosen.why


def test_placement_is_off_by_default_and_for_a_job_that_pins_its_zones():
    assert place(make_spec(), Settings(project="p"), advice=advice(PRICES), table=TABLE, now=NOW) is None
    pinned = make_spec(machine={"type": "e2-small", "zones": ["us-central1-b"]})
    assert place(pinned, settings(), advice=advice(PRICES), table=TABLE, now=NOW) is None
    own = make_spec(regions=["us-central1"])
    assert place(own, settings(), advice=advice(PRICES), table=TABLE, now=NOW) is None


def test_a_job_may_narrow_its_regions():
    chosen = place(make_spec(regions=["us-central1", "us-east1"]), settings(), advice=advice(PRICES),
                   table=TABLE, now=NOW)
    assert chosen.zones[0] == "us-east1-b" and not any(z.startswith("us-west4") for z in chosen.zones)


# --- through start_job ---------------------------------------------------------------------------

@pytest.fixture
def placed():
    harness = Harness(NOW, placement=PLACED)
    yield harness
    harness.close()


def write_advice(h: Harness, advice_object: Advice) -> None:
    h.blobs.write(layout.ADVICE, advice_object.to_json())


def test_a_start_goes_to_the_cheapest_zone_and_keeps_the_receipt(placed):
    write_advice(placed, advice(PRICES))
    placed.start(make_spec())
    record = placed.record("bot", RUN)
    assert record.current_attempt.zone == "us-west4-b"
    assert placed.compute.peek("us-west4-b", "sc-bot-20261122-1200-a1") is not None
    assert record.placement.zones[0] == "us-west4-b" and record.placement.fallback is None
    assert record.placement.choice("us-west4-b").spot_hourly == 0.0021


def test_stale_advice_starts_in_the_fixed_order_and_the_record_says_why(placed):
    write_advice(placed, advice(PRICES, at=NOW - timedelta(hours=3)))
    placed.start(make_spec())
    record = placed.record("bot", RUN)
    assert record.current_attempt.zone == "us-central1-a"
    assert record.placement.fallback.startswith("Spot advice is 180 min old")


def test_a_stockout_moves_down_the_placement_order(placed):
    write_advice(placed, advice(PRICES))
    placed.compute.fail_create(CreateFailed(CreateFailed.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED"),
                               zone="us-west4-b")
    placed.start(make_spec())
    assert placed.record("bot", RUN).current_attempt.zone == "us-west4-a"


def test_a_stockout_in_every_likely_zone_tries_the_unlikely_ones_before_failing(placed):
    unlikely = {"us-east1-b", "us-east1-c"}
    prices = {zone: (price, rate, 0.1 if zone in unlikely else 0.9) for zone, (price, rate, _) in PRICES.items()}
    write_advice(placed, advice(prices))
    allowed = {z for region in placed.settings.placement_regions() for z in placed.settings.zones_in(region)}
    for zone in allowed - unlikely:
        placed.compute.fail_create(CreateFailed(CreateFailed.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED"), zone=zone)
    placed.start(make_spec())
    record = placed.record("bot", RUN)
    assert record.state == "running" and record.current_attempt.zone in unlikely


def test_a_preemption_retries_in_the_next_zone_of_the_placement_order(placed):
    write_advice(placed, advice(PRICES))
    placed.start(make_spec())
    placed.callback("bot", RUN, status="preempted", exit_code=None)
    assert placed.record("bot", RUN).current_attempt.zone == "us-west4-a"


def test_the_run_is_billed_at_the_spot_price_of_its_receipt(placed):
    write_advice(placed, advice(PRICES))
    placed.start(make_spec())
    placed.clock.advance(3600)
    placed.finish_ok("bot", RUN)
    record = placed.record("bot", RUN)
    cost = run_cost(record, TABLE, "us-central1")
    assert cost.items["compute"] == pytest.approx(0.0021 * 3600 / 3600)


# --- the advice object ---------------------------------------------------------------------------

def advisor_for(prices) -> MemoryAdvisor:
    return MemoryAdvisor({("e2-small", zone): said for zone, said in prices.items()})


def test_the_sweep_refreshes_the_advice_once_per_interval_and_starts_never_ask(placed):
    placed.deploy(make_spec())
    advisor = placed.deps.advisor = advisor_for(PRICES)
    placed.sweep()
    asked = len(advisor.calls)
    assert asked == 6  # capacityHistory and capacity, in each of the three regions
    stored = Advice.from_json(placed.blobs.read(layout.ADVICE).data)
    assert stored.fetched_at == NOW and stored.zone("e2-small", "us-west4-b").spot_hourly == 0.0021
    placed.start(make_spec())
    assert placed.record("bot", RUN).current_attempt.zone == "us-west4-b"
    placed.clock.advance(60)
    placed.sweep()
    assert len(advisor.calls) == asked  # within the sweep interval: not asked again
    placed.clock.advance(placed.settings.sweep_interval)
    placed.sweep()
    assert len(advisor.calls) == 2 * asked


def test_a_failing_advice_api_never_fails_the_sweep_nor_a_start(placed):
    placed.deploy(make_spec())
    advisor = placed.deps.advisor = advisor_for(PRICES)
    advisor.fail = RuntimeError("503 backend unavailable")
    response = placed.sweep()
    assert response.status_code == 200
    stored = Advice.from_json(placed.blobs.read(layout.ADVICE).data)
    assert any("503 backend unavailable" in p for p in stored.problems)
    placed.start(make_spec())
    record = placed.record("bot", RUN)
    # Advice with no price anywhere: every zone is priced from the dated table, stack's first.
    assert record.state == "running" and record.placement is not None


def test_an_unreadable_advice_object_falls_back_and_says_so(placed):
    placed.blobs.write(layout.ADVICE, b"{not json")
    placed.start(make_spec())
    record = placed.record("bot", RUN)
    assert record.current_attempt.zone == "us-central1-a"
    assert record.placement.fallback == "the Spot advice object does not parse"


def test_a_month_is_projected_with_and_without_placement():
    from spotcron.engine.placement import project_placement

    month = project_placement(make_spec(), settings(), advice=advice(PRICES), table=TABLE, now=NOW,
                              runs_per_month=180, vm_seconds=120)
    assert (month.zone, month.fixed_zone) == ("us-west4-b", "us-central1-a")
    assert month.with_usd == pytest.approx(180 * 0.0021 * 120 / 3600 * (1 + 0.02 * 0.5))
    assert month.without_usd == pytest.approx(180 * 0.0070 * 120 / 3600 * (1 + 0.05 * 0.5))
    assert project_placement(make_spec(), settings(), advice=advice(PRICES, at=NOW - timedelta(days=1)),
                             table=TABLE, now=NOW, runs_per_month=180, vm_seconds=120) is None


def test_a_placement_region_without_known_zones_is_refused_with_the_fix():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=r"placement.regions: no zones known for europe-west9; name them "
                                              r"under placement.zones"):
        Settings(project="p", placement={"regions": ["europe-west9"]})
    named = Settings(project="p", placement={"regions": ["europe-west9"], "zones": {"europe-west9": ["europe-west9-a"]}})
    assert named.zones_in("europe-west9") == ("europe-west9-a",)
