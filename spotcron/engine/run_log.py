"""One structured log entry per run end (a missed record included): Cloud Logging as the index.

The functions' stdout JSON lines become Cloud Logging entries, `severity` read as the entry's
severity and every other field kept in `jsonPayload` (runtime/structured_log.py; docs/results.md has the
fields and the Logs Explorer filters). The entry is written by the functions as an owed run-end
hook (`log`), so every run end has one (at least one: a crash before its "done" writes it again);
the VMs keep no log-writing role. The bucket stays the record: the entry names where it is.
"""

from __future__ import annotations

import logging
from typing import Any

from spotcron.core import layout
from spotcron.core.runs import RunRecord, RunState
from spotcron.engine.hooks import RunEndHook

log = logging.getLogger("spotcron.runs")

EVENT = "run.ended"
BAD = frozenset({RunState.FAILED, RunState.TIMED_OUT, RunState.LOST, RunState.PREEMPTED, RunState.MISSED})


def entry_fields(record: RunRecord, bucket: str) -> dict[str, Any]:
    """The entry's jsonPayload fields (docs/results.md lists them)."""
    fields: dict[str, Any] = {
        "event": EVENT, "job": record.job, "run_id": record.run_id, "variant": record.variant,
        "state": str(record.state), "reason": record.reason, "exit_code": record.exit_code,
        "duration_s": record.duration_seconds, "cost_usd": record.cost_usd, "trigger": record.trigger,
        "tick": record.tick.isoformat() if record.tick else None,
        "attempts": len(record.attempts),
        "bucket_path": f"gs://{bucket}/{layout.run_prefix(record.job, record.run_id)}",
    }
    if record.state == RunState.MISSED:
        fields["missed_ticks"] = record.missed_ticks
        fields["missed_until"] = record.missed_until.isoformat() if record.missed_until else None
    if record.overrides:
        fields["overrides"] = sorted(record.overrides)
    return fields


def write_entry(deps, record: RunRecord) -> None:
    level = logging.ERROR if record.state in BAD else logging.INFO
    log.log(level, "%s/%s %s%s", record.job, record.run_id, record.state,
            f": {record.reason}" if record.reason else "",
            extra={"fields": entry_fields(record, deps.settings.bucket)})


def log_hook() -> RunEndHook:
    return RunEndHook("log", write_entry)
