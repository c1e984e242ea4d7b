"""A run that never had a VM (skipped on a host without the configuration's GPU, or before any
attempt) cost only the start_job call that handled it: `runs`, `run --follow` and the page show
that figure labelled as a call, never bare as if a VM had cost it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spotcron.core.runs import Attempt, RunRecord
from spotcron.cost.billing import cost_function, run_cost
from spotcron.cost.prices import load_prices
from spotcron.present.live import ended_detail
from spotcron.present.notes import run_note
from spotcron.present.page import render_index
from spotcron.present.views import run_row

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
GPU = "not run on this host: the configuration asks for nvidia-tesla-t4 x1, and this host has no NVIDIA GPU"


def _priced(record: RunRecord) -> RunRecord:
    total, items, problem = cost_function(load_prices(), "us-central1")(record)
    return record.model_copy(update={"cost_usd": total, "cost_items": items, "cost_problem": problem})


def skipped_on_this_host() -> RunRecord:
    attempt = Attempt(number=1, vm_name="bench-t4-1", zone="local-zone1-a", machine_type="n1-standard-4",
                      provisioning_model="SPOT", gpu="nvidia-tesla-t4:1", outcome="unavailable", error=GPU)
    return _priced(RunRecord(job="bench", run_id="20261127-1100-t4", variant="t4", state="skipped",
                             created_at=NOW - timedelta(hours=1), updated_at=NOW - timedelta(minutes=59),
                             attempts=(attempt,), reason=GPU))


def test_the_cost_of_a_run_without_a_vm_is_its_start_job_call():
    record = skipped_on_this_host()
    items = run_cost(record, load_prices(), "us-central1").items
    assert record.cost_usd == items["functions"] > 0
    assert not any(value for name, value in items.items() if name != "functions")


def test_runs_follow_and_the_page_label_it_a_call():
    record = skipped_on_this_host()
    cell = run_row(record, NOW).cost
    assert cell.endswith(" call") and cell.startswith("$")
    assert "cost: the start_job call only, no VM ran" in run_note(record)
    assert " call" in ended_detail(record, {})
    page = render_index({"bench": [record]}, generated_at=NOW)
    assert f"{cell}</td>" in page


def test_a_run_that_had_a_vm_shows_its_cost_bare():
    attempt = Attempt(number=1, vm_name="bench-t4-1", zone="us-central1-a", machine_type="e2-small",
                      provisioning_model="SPOT", created_at=NOW - timedelta(minutes=5),
                      started_at=NOW - timedelta(minutes=4), finished_at=NOW - timedelta(minutes=2),
                      deleted_at=NOW - timedelta(minutes=1), outcome="exited", exit_code=0)
    record = _priced(RunRecord(job="bot", run_id="20261127-1100", state="succeeded",
                               created_at=NOW - timedelta(minutes=6), updated_at=NOW - timedelta(minutes=1),
                               attempts=(attempt,)))
    assert not run_row(record, NOW).cost.endswith("call") and "start_job" not in run_note(record)
