"""`up --once` says why a run is queued beside `queued`: in a pipe (once per change of reason) and in
its live table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rich.console import Console

from spotcron.core.runs import RunRecord
from spotcron.present.live import wait_rows, wait_table
from spotcron.present.progress import PipeProgress

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
ROOM = "waiting for room: 2 of 2 local runs under the stack limits [limits]"


def queued(reason: str | None) -> RunRecord:
    return RunRecord(job="bench", run_id="20261122-1000-small", state="queued", created_at=T0, updated_at=T0,
                     reason=reason)


def test_a_pipe_says_why_once_per_change_of_reason():
    progress = PipeProgress(T0, heartbeat_s=3600)
    at = T0 + timedelta(seconds=1)
    assert progress.lines([queued(ROOM)], at) == [f"10:00:01 bench/20261122-1000-small queued: {ROOM}"]
    assert progress.lines([queued(ROOM)], at) == []
    other = "waiting for room: 1 GPU in use"
    assert progress.lines([queued(other)], at) == [f"10:00:01 bench/20261122-1000-small queued: {other}"]
    assert progress.lines([queued(None)], at) == ["10:00:01 bench/20261122-1000-small queued: waiting for room"]


def test_the_live_table_shows_the_reason():
    assert wait_rows([queued(ROOM)], T0)[0][-1] == ROOM
    out = Console(width=200, record=True, color_system=None)
    out.print(wait_table([queued(ROOM)], T0))
    text = out.export_text()
    assert "note" in text and ROOM in text
