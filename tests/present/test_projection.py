"""`spotcron cost`'s table rows and sentences, from a projection: no click, no console."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spotcron.core.spec import JobSpec
from spotcron.cost.prices import load_prices
from spotcron.cost.projection import project_specs
from spotcron.present.projection import COLUMNS, stack_notes, stack_rows, stack_title

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def table():
    return load_prices()


def project(table, spec: JobSpec, scheduling: str = "per-job"):
    return project_specs([spec], table=table, region="us-central1", now=T0, runtime_s=120, scheduling=scheduling)


def bot(**extra) -> JobSpec:
    return JobSpec(name="hello-bot", schedule="0 */4 * * *", image="spotcron/hello-bot",
                   machine={"type": "n1-standard-1", "spot": True}, **extra)


def test_a_row_per_job_then_the_overheads_then_the_stack_each_cell_in_column_order(table):
    stack = project(table, bot())
    rows = stack_rows(stack)
    assert all(len(row) == len(COLUMNS.names) for row in rows)
    job = dict(zip(COLUMNS.names, rows[0], strict=True))
    assert (job["job"], job["ticks"], job["VMs"], job["VM/run"]) == ("hello-bot", "180", "180", "2m00s")  # no decimals
    assert job["total"] == f"{stack.jobs[0].monthly_usd:.3f}"
    assert [row[0] for row in rows[1:-1]] == [f"({part})" for part in stack.overhead]
    assert rows[-1][0] == "stack" and rows[-1][-1] == f"{stack.classic_monthly_usd:.3f}"
    assert stack_title(table, "us-central1").startswith(f"USD per 30-day month; prices {table.name} (")


def test_a_matrix_job_has_a_row_per_configuration_under_its_own(table):
    spec = bot(matrix=[{"name": "small", "machine": {"type": "e2-small"}},
                       {"name": "big", "machine": {"type": "n1-standard-4"}}])
    rows = stack_rows(project(table, spec))
    assert [row[:4] for row in rows[:3]] == [("hello-bot", "180", "360", ""), ("  small", "", "", "2m00s"),
                                            ("  big", "", "", "2m00s")]


def test_the_sentences_give_the_basis_the_month_in_both_modes_and_the_classic_design(table):
    stack, other = project(table, bot()), project(table, bot(), "shared")
    notes = stack_notes(stack, table, ("the local bucket", "2m", True), other)
    assert notes[0] == "VM time per run: hello-bot 2m00s, as given (--runtime 2m)."
    assert notes[1] == (f"After one billing account's free tiers (3 scheduler jobs, function calls): "
                        f"${stack.monthly_after_free_tier_usd:.2f}/month with scheduling: per-job.")
    assert notes[2].startswith(f"With scheduling: shared it would be ${other.monthly_after_free_tier_usd:.2f}/month")
    assert notes[3].endswith(f"${stack.classic_monthly_usd:.2f}/month.")
    assert len(stack_notes(stack, table)) == len(notes) - 2  # no basis, no other mode
