"""`spotcron status --project`'s VMs, from plain instances: oldest first, a VM whose run is not in
progress marked (the sweep deletes it)."""

from __future__ import annotations

from datetime import timedelta

from spotcron.engine.ports import Instance
from spotcron.present.views import VM_COLUMNS, vm_rows
from tests.cli.conftest import NOW


def vm(name: str, job: str | None, run: str | None, age_s: float) -> Instance:
    labels = {"spotcron": "1", **({"job": job} if job else {}), **({"run": run} if run else {})}
    return Instance(name=name, zone="us-central1-a", status="RUNNING", labels=labels, machine_type="e2-small",
                    provisioning_model="SPOT", created_at=NOW - timedelta(seconds=age_s))


def test_vms_come_oldest_first_and_those_without_a_run_in_progress_are_marked():
    rows = vm_rows([vm("sc-new", "bot", "r2", 30), vm("sc-old", "bot", "r1", 600), vm("stray", None, None, 90)],
                   {("bot", "r2")}, NOW)
    assert [dict(zip(VM_COLUMNS, row.cells, strict=True)) for row in rows] == [
        {"vm": "sc-old", "zone": "us-central1-a", "status": "RUNNING", "machine": "e2-small SPOT", "age": "10m00s",
         "run": "bot/r1 (run not in progress)"},
        {"vm": "stray", "zone": "us-central1-a", "status": "RUNNING", "machine": "e2-small SPOT", "age": "1m30s",
         "run": "?/? (run not in progress)"},
        {"vm": "sc-new", "zone": "us-central1-a", "status": "RUNNING", "machine": "e2-small SPOT", "age": "30s",
         "run": "bot/r2"},
    ]
    assert [row.styles for row in rows] == [{"run": "yellow"}, {"run": "yellow"}, {}]
    assert vm_rows([], set(), NOW) == []
