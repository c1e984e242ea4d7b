"""`spotcron next`'s fire times, from plain times: each in the job's zone and in UTC."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from rich.console import Console

from spotcron.present.fire_times import fire_rows, fire_table

BERLIN = ZoneInfo("Europe/Berlin")


def test_each_fire_time_is_numbered_in_the_jobs_zone_and_in_utc_across_a_dst_change():
    fires = [datetime(2026, 10, 24, 7, 0, tzinfo=UTC), datetime(2026, 10, 25, 8, 0, tzinfo=UTC)]
    assert fire_rows(fires, BERLIN) == [
        ("1", "Sat 2026-10-24 09:00 CEST (+0200)", "Sat 2026-10-24 07:00"),
        ("2", "Sun 2026-10-25 09:00 CET (+0100)", "Sun 2026-10-25 08:00"),
    ]
    assert fire_rows([], BERLIN) == []


def test_the_table_names_the_zone_as_the_job_file_does():
    out = Console(file=io.StringIO(), width=120, force_terminal=False)
    out.print(fire_table([datetime(2026, 10, 24, 7, 0, tzinfo=UTC)], BERLIN, "Europe/Berlin"))
    lines = out.file.getvalue().splitlines()
    assert lines[0].split() == ["#", "local", "(Europe/Berlin)", "UTC"]
    assert lines[1].split() == ["1", "Sat", "2026-10-24", "09:00", "CEST", "(+0200)", "Sat", "2026-10-24", "07:00"]
