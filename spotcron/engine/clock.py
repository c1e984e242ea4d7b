"""The clock the deployed functions and local mode run on; tests pass a settable one instead."""

from __future__ import annotations

from datetime import UTC, datetime


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)
