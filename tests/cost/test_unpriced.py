"""A machine type the price table lacks, and a job with an external address: every cost surface
still answers. `validate` warns, the run records no cost and why, `cost` and `report` show the
configuration with `-` and a note instead of refusing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from spotcron.cli import SpotcronGroup
from spotcron.cli.cost import cost as cost_command
from spotcron.cli.report import report as report_command
from spotcron.cli.specs import validate as validate_command
from spotcron.core import layout
from spotcron.core.runs import Attempt, RunRecord
from spotcron.core.spec import JobSpec
from spotcron.cost.billing import cost_function
from spotcron.cost.prices import load_prices
from spotcron.cost.projection import project_specs
from spotcron.engine import writer
from spotcron.present.projection import COLUMNS, stack_notes, stack_rows
from spotcron.present.report import benchmark_report

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
UNPRICED = "c3-highcpu-4"  # a real machine type (validate knows it) that the packaged table does not price
BENCH = ('schedule: "0 3 * * 1"\nimage: x\nbenchmark: {base: small}\nmatrix:\n'
         '  - {name: small, machine: {type: e2-small}}\n'
         f'  - {{name: c3, machine: {{type: {UNPRICED}}}}}\n')


@pytest.fixture(scope="module")
def table():
    return load_prices()


def test_the_table_has_no_price_for_the_machine_type_these_tests_use(table):
    assert UNPRICED not in table.machines
    assert table.missing_price(UNPRICED) == (f"price table {table.name} has no price for machine type {UNPRICED!r} "
                                             "(add it under machines: in a --prices file, see docs/cost.md)")
    assert table.missing_price("e2-small") is None
    assert "GPU 'nvidia-h9000'" in table.missing_price("n1-standard-8", "nvidia-h9000 x1")


def test_a_job_with_an_external_address_projects_and_its_address_counts_under_compute(table):
    spec = JobSpec(name="bot", schedule="0 * * * *", image="x", machine={"type": "e2-small"}, external_ip=True)
    stack = project_specs([spec], table=table, region="us-central1", now=T0, runtime_s=120)
    rows = stack_rows(stack)  # raised KeyError: 'external_ip'
    job = dict(zip(COLUMNS.names, rows[0], strict=True))
    items = stack.jobs[0].items
    assert items["external_ip"] > 0
    assert job["compute"] == f"{items['compute'] + items['external_ip']:.3f}"
    assert stack.items()["external_ip"] == items["external_ip"]
    assert f"compute includes external IPv4 addresses: {items['external_ip']:.3f}" in stack_notes(stack, table)


def test_an_unpriced_configuration_shows_a_dash_and_a_note_and_the_rest_is_priced(table):
    spec = JobSpec.model_validate({"name": "bench", "schedule": "0 3 * * 1", "image": "x", "matrix": [
        {"name": "small", "machine": {"type": "e2-small"}}, {"name": "c3", "machine": {"type": UNPRICED}}]})
    stack = project_specs([spec], table=table, region="us-central1", now=T0, runtime_s=120)
    job = stack.jobs[0]
    assert job.unpriced == {"c3": table.missing_price(UNPRICED)}
    assert job.items["compute"] > 0  # the priced configuration
    rows = {row[0]: dict(zip(COLUMNS.names, row, strict=True)) for row in stack_rows(stack)}
    assert (rows["  c3"]["compute"], rows["  c3"]["total"]) == ("-", "-")
    assert rows["  small"]["compute"] == ""
    assert (f"bench/c3: not priced, left out of the totals: {table.missing_price(UNPRICED)}"
            in stack_notes(stack, table))
    assert job.to_json()["unpriced"] == {"c3": table.missing_price(UNPRICED)}
    # A job all of whose VM is unpriced: its VM cells are dashes.
    alone = JobSpec(name="one", schedule="0 3 * * 1", image="x", machine={"type": UNPRICED})
    row = dict(zip(COLUMNS.names, stack_rows(project_specs([alone], table=table, region="us-central1", now=T0,
                                                          runtime_s=60))[0], strict=True))
    assert (row["compute"], row["disk"]) == ("-", "-")


def test_an_unknown_region_still_refuses(table):
    from spotcron.cost.prices import PricingError

    spec = JobSpec(name="bot", schedule="0 * * * *", image="x", machine={"type": "e2-small"})
    with pytest.raises(PricingError, match="no prices for region 'mars-north1'"):
        project_specs([spec], table=table, region="mars-north1", now=T0, runtime_s=60)


@pytest.fixture
def cli(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("SPOTCRON_JOBS", "SPOTCRON_STACK", "SPOTCRON_PRICES", "SPOTCRON_REGION", "SPOTCRON_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    group = SpotcronGroup("spotcron")
    for command in (cost_command, report_command, validate_command):
        group.add_command(command)
    jobs = tmp_path / "jobs"
    jobs.mkdir()

    def invoke(*args: str):
        return CliRunner().invoke(group, [*args, "--jobs", str(jobs)], terminal_width=200)

    return SimpleNamespace(invoke=invoke, jobs=jobs, root=tmp_path)


def test_cost_with_an_external_address_answers(cli):
    (cli.jobs / "bot.yaml").write_text('schedule: "0 * * * *"\nimage: x\nexternal_ip: true\n'
                                       'machine: {type: e2-small}\n')
    result = cli.invoke("cost")
    assert result.exit_code == 0, result.output
    assert "compute includes external IPv4 addresses" in result.output
    assert "external_ip" in json.loads(cli.invoke("cost", "--json").output)[0]["items"]


def test_validate_warns_and_cost_notes_an_unpriced_machine_type(cli, table):
    (cli.jobs / "bench.yaml").write_text(BENCH)
    result = cli.invoke("validate")
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert f"warning: bench/c3: {table.missing_price(UNPRICED)}; its runs record no cost" in said
    result = cli.invoke("cost")
    assert result.exit_code == 0, result.output
    assert "bench/c3: not priced, left out of the totals" in " ".join(result.output.split())


def unpriced_run(variant: str, machine: str, seconds: float = 30) -> RunRecord:
    created = T0
    attempt = Attempt(number=1, vm_name=f"sc-bench-{variant}-a1", machine_type=machine, zone="us-central1-a",
                      provisioning_model="SPOT", created_at=created, started_at=created + timedelta(seconds=5),
                      finished_at=created + timedelta(seconds=5 + seconds),
                      deleted_at=created + timedelta(seconds=10 + seconds), outcome="exited", exit_code=0)
    run_id = f"20261122-1000-{variant}"
    return RunRecord(job="bench", run_id=run_id, variant=variant, state="succeeded", created_at=created,
                     updated_at=created + timedelta(seconds=10 + seconds), attempts=(attempt,), exit_code=0,
                     results_prefix=layout.attempt_prefix("bench", run_id, 1))


def test_the_run_records_no_cost_and_the_reason(table):
    record = unpriced_run("c3", UNPRICED)
    total, items, why = cost_function(table, "us-central1")(record)
    assert (total, items, why) == (None, {}, table.missing_price(UNPRICED))
    ended = writer.priced(SimpleNamespace(run_cost=cost_function(table, "us-central1")), record)
    assert (ended.cost_usd, ended.cost_problem) == (None, table.missing_price(UNPRICED))
    assert RunRecord.from_json(ended.to_json()).cost_problem == ended.cost_problem
    priced = writer.priced(SimpleNamespace(run_cost=cost_function(table, "us-central1")),
                          unpriced_run("small", "e2-small"))
    assert priced.cost_usd > 0 and priced.cost_problem is None


def test_report_shows_the_configuration_with_a_dash_and_a_note(cli, table):
    (cli.jobs / "bench.yaml").write_text(BENCH)
    records = [unpriced_run("small", "e2-small"), unpriced_run("c3", UNPRICED, 20)]
    result = benchmark_report("bench", records, table, "us-central1")
    rows = {r.variant: r for r in result.rows}
    assert rows["c3"].runs == 1 and rows["c3"].cost is None and rows["c3"].time.median == 20
    bucket = cli.root / "bucket"
    for record in records:
        path = bucket / layout.run_record(record.job, record.run_id)
        path.parent.mkdir(parents=True)
        path.write_bytes(record.to_json())
    result = cli.invoke("report", "bench", "--records", str(bucket))  # refused with exit 2
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert f"not priced: c3: its cost is -, {table.missing_price(UNPRICED)}" in said
    assert cli.invoke("report", "bench", "--records", str(bucket), "--format", "csv").exit_code == 0
