"""The seeded month's adversary: a rogue publisher and one hostile job (make reliability)."""

from __future__ import annotations

from spotcron.engine.broker import boundary_rules
from spotcron.testing.simulation import SimConfig, simulate
from spotcron.testing.simulation.adversary import allowed


def test_the_boundary_check_sees_a_write_outside_the_prefix():
    rules = boundary_rules("b", "job", "20261020-0000", 1)
    assert allowed(rules, "b", "runs/job/20261020-0000/attempt-1/logs.txt")
    assert allowed(rules, "b", "runs/job/20261020-0000/checkpoint/checkpoint.tar")
    for foreign in ("runs/job/20261020-0000/run.json", "runs/job/20261020-0000/attempt-10/logs.txt",
                    "runs/other/20261020-0000/attempt-1/logs.txt", "live/job/20261020-0000", "index.html",
                    "deployed/job.json", "tokens/abc", "pruned/job"):
        assert not allowed(rules, "b", foreign), foreign
    wide = [{**rules[0], "availabilityCondition": {"expression": "resource.name.startsWith('projects/_/buckets/b/')"}}]
    assert allowed(wide, "b", "index.html")  # what the month would count as a foreign write


def test_the_month_with_a_rogue_publisher_and_a_hostile_job_creates_no_rogue_vm_and_no_foreign_write():
    report = simulate(SimConfig(days=1, jobs=8, seed=3))
    assert report.ok, report.lines()
    extra = report.extra
    assert extra["rogue messages"] > 0 and extra["rogue VMs"] == 0
    assert extra["own tokens granted"] > 0 and extra["foreign tokens refused"] > 0
    assert extra["hostile write attempts"] > 0 and extra["foreign writes allowed"] == 0
    assert report.final_line().endswith("rogue_vms=0 foreign_writes=0")
    # Its hostile metrics and manifests: each run ended with a problem on its record,
    # and no function raised over them (report.ok counts unexpected_errors).
    assert extra["hostile files written"] > 0
    assert extra["hostile runs with a recorded problem"] > 0
