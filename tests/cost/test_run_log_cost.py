"""`spotcron cost` prices the run-end Cloud Logging entries: free under 50 GiB a project-month."""

from __future__ import annotations

import pytest

from spotcron.cost.projection import LOGGING_USD_PER_GIB, RUN_LOG_ENTRY_BYTES, run_log_month


def test_a_bot_every_4_hours_logs_well_inside_the_free_allotment():
    month = run_log_month(180)
    assert month.gib == pytest.approx(180 * RUN_LOG_ENTRY_BYTES / 2**30) and month.usd == 0.0


def test_only_what_passes_50_gib_is_charged():
    assert run_log_month(1000, other_gib=40.0).usd == 0.0
    over = run_log_month(30_000_000)  # 100 jobs every 10 s for a month: about 57 GiB
    assert over.usd == pytest.approx((over.gib - 50) * LOGGING_USD_PER_GIB)
    already = run_log_month(1000, other_gib=60.0)  # the project pays for every byte already
    assert already.usd == pytest.approx(already.gib * LOGGING_USD_PER_GIB)


def test_the_cost_notes_name_the_logging_line():
    from datetime import UTC, datetime

    from spotcron.core.spec import JobSpec
    from spotcron.cost.prices import load_prices
    from spotcron.cost.projection import project_jobs, project_stack
    from spotcron.present.projection import stack_notes

    table = load_prices()
    spec = JobSpec.model_validate({"name": "bot", "schedule": "0 */4 * * *", "image": "x/y:1"})
    jobs = project_jobs([spec], table=table, region="us-central1", now=datetime(2026, 11, 1, tzinfo=UTC),
                        runtime_s=60)
    notes = stack_notes(project_stack(jobs, table=table, sweep_interval_s=300), table)
    assert any(line.startswith("Cloud Logging: one entry per run end, about 180 a month") and "$0.00/month" in line
               for line in notes)
