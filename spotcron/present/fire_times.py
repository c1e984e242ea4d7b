"""When a job fires next, for people: `spotcron next`'s table of fire times, each in the job's
time zone and in UTC. Times in, rows or a rich table out; the command prints it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any


def fire_rows(fires: Sequence[datetime], zone: tzinfo) -> list[tuple[str, str, str]]:
    """`1`, `Sat 2026-10-24 09:00 CEST (+0200)`, `Sat 2026-10-24 07:00`: number, local time, UTC."""
    return [(str(number), f"{fire.astimezone(zone):%a %Y-%m-%d %H:%M %Z (%z)}",
             f"{fire.astimezone(UTC):%a %Y-%m-%d %H:%M}") for number, fire in enumerate(fires, 1)]


def fire_table(fires: Sequence[datetime], zone: tzinfo, time_zone: str) -> Any:
    """The fire times as a rich table; `time_zone` is the name the job file gives its zone."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    table.add_column("#", justify="right")
    table.add_column(f"local ({time_zone})")
    table.add_column("UTC")
    for row in fire_rows(fires, zone):
        table.add_row(*row)
    return table
