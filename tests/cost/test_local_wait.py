"""A local run's wait for its turn on the host: the record keeps it, its cost leaves it out, and every
surface (`cost`'s projection, `runs`, the page, the report) reads the same figure.

Locally the compared runs of a job take turns (local/turns.py): a run whose container ran 90 s
after waiting 300 s for two siblings would, on Google Cloud, have had a VM of its own and not
waited. Priced from its VM's creation it cost over four times its sibling's, and `spotcron cost`
projected from that inflated VM time while the report left the wait out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from spotcron.core import layout
from spotcron.core.hardware import Hardware
from spotcron.core.runs import Attempt, RunRecord
from spotcron.cost.billing import cost_function
from spotcron.cost.local_wait import waited_seconds, work_cost_usd, work_vm_seconds
from spotcron.cost.prices import load_prices
from spotcron.cost.projection import vm_seconds_from_history
from spotcron.engine import writer
from spotcron.local.stack import local_run_cost, local_settings
from spotcron.present.page import render_index
from spotcron.present.report import benchmark_report
from spotcron.present.views import format_usd, run_row

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
BOOT, WORK, UPLOAD = 5.0, 90.0, 3.0


@pytest.fixture(scope="module")
def table():
    return load_prices()


def local_run(repeat: int, waited: float, *, zone: str = "local-zone1-a") -> RunRecord:
    """A local run whose VM existed `waited` seconds before its runner started (its turn came)."""
    created = T0 + timedelta(minutes=repeat)
    start = created + timedelta(seconds=waited + BOOT)
    attempt = Attempt(number=1, vm_name=f"sc-bench-r{repeat}-a1", machine_type="e2-standard-4", zone=zone,
                      provisioning_model="SPOT", created_at=created, started_at=start,
                      finished_at=start + timedelta(seconds=WORK),
                      deleted_at=start + timedelta(seconds=WORK + UPLOAD), outcome="exited", exit_code=0)
    hardware = Hardware(local=True, host="laptop", cpu_model="AMD EPYC", cpus=2, memory_mib=8000, threads=2,
                        waited_s=waited or None)
    run_id = f"20261122-10{repeat:02d}-r{repeat}"
    return RunRecord(job="bench", run_id=run_id, state="succeeded", created_at=created,
                     updated_at=start + timedelta(seconds=WORK + UPLOAD), attempts=(attempt,), exit_code=0,
                     results_prefix=layout.attempt_prefix("bench", run_id, 1), hardware=hardware)


def priced_locally(table, record: RunRecord) -> RunRecord:
    """The record as local mode's engine prices it when the run ends."""
    settings = local_settings("http://127.0.0.1:1/job_done")
    return writer.priced(SimpleNamespace(run_cost=local_run_cost(table, settings)), record)


def test_a_local_runs_wait_for_its_turn_is_kept_on_the_record_and_left_out_of_its_cost(table):
    alone = priced_locally(table, local_run(1, 0))
    late = priced_locally(table, local_run(2, 300))
    assert late.cost_usd == pytest.approx(alone.cost_usd)  # the same work on the same machine
    assert late.local_wait_s == 300 and alone.local_wait_s is None
    assert RunRecord.from_json(late.to_json()).local_wait_s == 300  # visible in run.json
    assert waited_seconds(late) == 300 and late.hardware.waited_s == 300
    assert work_vm_seconds(late) == work_vm_seconds(alone) == BOOT + WORK + UPLOAD
    assert late.billed_vm_seconds == 300 + BOOT + WORK + UPLOAD  # the VM's whole life stays on the record


def test_on_google_cloud_the_vm_is_billed_from_its_creation_whatever_its_hardware_json_says(table):
    """A job may rewrite its hardware.json: a zone of Google Cloud is never priced without a wait."""
    claimed = local_run(1, 300, zone="us-central1-a")
    billed = writer.priced(SimpleNamespace(run_cost=cost_function(table, "us-central1")), claimed)
    local = priced_locally(table, claimed)
    assert local.cost_usd == pytest.approx(billed.cost_usd) and local.local_wait_s is None
    assert work_vm_seconds(claimed) == claimed.billed_vm_seconds and work_cost_usd(billed) == billed.cost_usd


def test_cost_projects_each_run_from_its_work_not_its_wait():
    runs = [local_run(1, 0), local_run(2, 300), local_run(3, 600)]
    assert vm_seconds_from_history(runs)[("bench", None)] == (BOOT + WORK + UPLOAD, 3)


def test_runs_the_page_and_the_report_show_the_same_cost_of_the_work(table):
    """Records priced before the wait was left out (their cost counts it) read the same as new ones."""
    alone = priced_locally(table, local_run(1, 0))
    late = priced_locally(table, local_run(2, 300))
    older = writer.priced(SimpleNamespace(run_cost=cost_function(table, "us-central1")), local_run(3, 300))
    assert older.cost_usd > alone.cost_usd and older.local_wait_s is None
    records = [alone, late, older]
    for record in records:
        assert work_cost_usd(record) == pytest.approx(alone.cost_usd)
    shown = format_usd(alone.cost_usd)
    assert [run_row(r, T0).cost for r in records] == [shown] * 3
    page = render_index({"bench": records}, generated_at=T0)
    assert format_usd(older.cost_usd) not in page and page.count(f">{shown}<") >= 3
    report = benchmark_report("bench", records, None, "us-central1")  # the recorded costs, as `report` reads them
    assert [run.cost for run in report.rows[0].runs_detail] == pytest.approx([alone.cost_usd] * 3)
