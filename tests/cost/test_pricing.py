"""The packaged price tables, lookups, and user overrides merged over them."""

from __future__ import annotations

import datetime as dt

import pytest
import yaml

from spotcron.core import catalog
from spotcron.core.errors import ConfigError
from spotcron.cost.prices import (
    OVERRIDE_SOURCE,
    PricingError,
    gpu_key,
    load_prices,
    packaged_document,
    parse_gpu,
    table_names,
)

REQUIRED_MACHINES = [
    *(f"n1-standard-{n}" for n in (1, 2, 4, 8, 16)),
    *(f"n1-highcpu-{n}" for n in (8, 16, 32, 64)),
    "e2-micro", "e2-small", "e2-medium", *(f"e2-standard-{n}" for n in (2, 4, 8, 16)),
    *(f"e2-highcpu-{n}" for n in (2, 4, 8, 16, 32)),
    *(f"n2-standard-{n}" for n in (2, 4, 8)),
    *(f"c2-standard-{n}" for n in (4, 8, 16, 30, 60)),
    *(f"g2-standard-{n}" for n in (4, 8, 12, 16)),
    "a2-highgpu-1g",
]


@pytest.fixture(scope="module")
def table():
    return load_prices()


def test_packaged_tables_and_default():
    assert table_names() == ["gcp-2026-11", "recipe-2018"]
    assert load_prices().name == "gcp-2026-11"
    assert load_prices("recipe-2018").as_of == dt.date(2018, 11, 19)


def test_every_figure_names_a_dated_source():
    for name in table_names():
        table = load_prices(name)
        assert table.sources, name
        for source_id, source in table.sources.items():
            assert source.date is not None, f"{name}: source {source_id} has no date"
            assert source.url.startswith("https://"), f"{name}: source {source_id} has no address"
        for where, ref in table._source_refs():
            assert ref in table.sources, f"{name}: {where} -> {ref}"


def test_the_machines_gpus_and_disks_the_jobs_use_have_prices(table):
    for machine in REQUIRED_MACHINES:
        price = table.machine(machine)
        assert 0 < price.spot < price.on_demand, machine
    for gpu in ("T4", "P100", "V100", "L4", "A100"):
        assert 0 < table.gpus[gpu].spot < table.gpus[gpu].on_demand
    assert table.disk_gb_month("pd-standard", "us-central1") == 0.04
    assert table.disk_gb_month("pd-balanced", "us-central1") == 0.10


def test_priced_machines_exist_and_bundle_the_gpus_the_catalog_says(table):
    for name in table.machines:
        known = catalog.machine_type(name)
        assert known is not None, f"{name} is priced but Compute Engine has no such type"
        bundled = table.bundled_gpus(name)
        if known.bundled_gpu is None:
            assert bundled is None, name
        else:
            assert gpu_key(bundled[0]) == gpu_key(known.bundled_gpu[0]) and bundled[1] == known.bundled_gpu[1], name


def test_indicative_figures_from_the_project_sources(table):
    # The figures listed as seen in public price tables are used as given.
    assert (table.machine("n1-standard-1").on_demand, table.machine("n1-standard-1").spot) == (0.0475, 0.01306)
    assert (table.machine("e2-standard-2").on_demand, table.machine("e2-standard-2").spot) == (0.06701, 0.0294)
    assert table.machine("e2-micro").on_demand == 0.00838
    assert table.machine("e2-small").on_demand == 0.01675
    assert table.storage.gb_month == 0.020
    assert (table.scheduler.job_month, table.scheduler.free_jobs) == (0.10, 3)


def test_on_demand_prices_follow_the_per_resource_rates(table):
    # n1-standard-4: 4 vCPU x $0.031611 + 15 GB x $0.004237; e2-standard-8: 8 x $0.021811 + 32 x $0.002923.
    assert table.machine("n1-standard-4").on_demand == pytest.approx(0.19, abs=1e-4)
    assert table.machine("e2-standard-8").on_demand == pytest.approx(8 * 0.021811 + 32 * 0.002923, rel=1e-4)
    assert table.machine("c2-standard-60").on_demand == pytest.approx(60 * 0.03398 + 240 * 0.00455, rel=1e-4)


def test_recipe_2018_table():
    recipe = load_prices("recipe-2018")
    assert recipe.machine_hourly("n1-standard-1", True, "us-central1") == 0.01
    assert recipe.disk_gb_month("pd-standard", "us-central1") == 0.04
    assert recipe.scheduler.job_month == 0.10
    assert recipe.functions.per_100ms == 0.000000463
    assert recipe.functions.invocation_usd(60) == pytest.approx(600 * 0.000000463)


def test_second_gen_functions_are_billed_as_cloud_run(table):
    f = table.functions
    assert f.generation == 2
    assert f.per_second == pytest.approx(0.333 * 0.000024 + 0.5 * 0.0000025)
    assert f.billed_seconds(0.25) == pytest.approx(0.3)
    assert f.billed_seconds(0.3) == pytest.approx(0.3)
    assert f.billed_seconds(0.0) == pytest.approx(0.1)
    assert f.invocation_usd(1.0) == pytest.approx(0.40 / 1e6 + f.per_second)


def test_region_multipliers(table):
    assert table.machine_hourly("n1-standard-1", False, "europe-west1") == pytest.approx(0.0475 * 1.10)
    assert table.gpu_hourly("nvidia-tesla-t4", True, "us-east1") == 0.14
    with pytest.raises(PricingError) as err:
        table.machine_hourly("n1-standard-1", False, "mars-north1")
    assert "no prices for region 'mars-north1'" in str(err.value)
    assert "us-central1" in str(err.value) and "--prices file" in str(err.value)


def test_unknown_machine_says_what_is_known(table):
    with pytest.raises(PricingError) as err:
        table.machine("n1-standard-3")
    message = str(err.value)
    assert message.startswith("price table gcp-2026-11: no price for machine type 'n1-standard-3'; did you mean")
    assert "n1-highcpu-8" in message and "e2-micro" not in message  # lists the same family only
    assert "add it under machines: in a --prices file" in message


def test_gpu_names():
    assert gpu_key("nvidia-tesla-t4") == "T4"
    assert gpu_key("nvidia-l4") == "L4"
    assert gpu_key("t4") == "T4"
    assert gpu_key("nvidia-a100-80gb") == "A100-80GB"
    assert parse_gpu("nvidia-tesla-t4 x2") == ("nvidia-tesla-t4", 2)
    assert parse_gpu("L4") == ("L4", 1)
    with pytest.raises(ValueError, match="is not a GPU like"):
        parse_gpu("")


# --- overrides -------------------------------------------------------------------------------


def write(tmp_path, text: str):
    path = tmp_path / "my-prices.yaml"
    path.write_text(text)
    return path


def test_override_file_merges_over_the_default(tmp_path):
    path = write(tmp_path, "machines:\n  e2-small: {on_demand: 0.02, spot: 0.006}\n"
                           "  n1-standard-3: {on_demand: 0.07, spot: 0.02, source: bill}\n"
                           "sources:\n  bill: {title: my invoice, date: 2026-10-31}\n")
    table = load_prices(str(path))
    assert table.name == "gcp-2026-11+my-prices.yaml"
    assert table.machine("e2-small").spot == 0.006
    # A price set without a source is attributed to the override file, not to the old source.
    assert table.machine("e2-small").source == OVERRIDE_SOURCE
    assert table.machine("e2-small").spot_source == OVERRIDE_SOURCE
    assert table.sources[OVERRIDE_SOURCE].title == "prices from my-prices.yaml"
    assert table.machine("n1-standard-3").source == "bill"
    assert table.machine("n1-standard-1").spot == 0.01306  # untouched entries stay


def test_override_file_can_start_from_another_table(tmp_path):
    table = load_prices(str(write(tmp_path, "base: recipe-2018\nscheduler: {job_month: 0.0}\n")))
    assert table.machine_hourly("n1-standard-1", True, "us-central1") == 0.01
    assert table.scheduler.job_month == 0.0 and table.scheduler.free_jobs == 3
    assert table.scheduler.source == OVERRIDE_SOURCE


def test_override_errors_say_file_line_and_field(tmp_path):
    path = write(tmp_path, "machines:\n  e2-small:\n    on_demand: -1\n")
    with pytest.raises(ConfigError) as err:
        load_prices(str(path))
    assert str(err.value) == (f"{path}:3: machines.e2-small.on_demand: Input should be greater than or "
                              f"equal to 0 (got -1)")

    path = write(tmp_path, "base: recipe-2019\n")
    with pytest.raises(ConfigError) as err:
        load_prices(str(path))
    assert str(err.value) == f"{path}:1: base: 'recipe-2019' is not a price table; use one of gcp-2026-11, recipe-2018"

    path = write(tmp_path, "machines:\n  e2-small: {on_demand: 1, spot: 0.5, source: nowhere}\n")
    with pytest.raises(ConfigError) as err:
        load_prices(str(path))
    assert "unknown source ids (machines.e2-small.source: 'nowhere'); declare them under sources:" in str(err.value)

    path = write(tmp_path, "machines: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_prices(str(path))


def test_prices_choice_that_is_neither_table_nor_file(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_prices(str(tmp_path / "missing.yaml"))
    assert "is neither a price table (gcp-2026-11, recipe-2018) nor a file that exists" in str(err.value)


def test_packaged_document_is_plain_yaml_with_a_default():
    name, text = packaged_document()
    data = yaml.safe_load(text)
    assert name == "spotcron/cost/data/prices.yaml"
    assert data["default"] in data["tables"]
