"""Spot advice: what Compute Engine says about each zone, kept as one object (layout.ADVICE).

The sweep refreshes it once per interval from `regions.advice.capacityHistory` (each zone's
30-day daily preemption rate and Spot list price for a machine type) and `regions.advice.capacity`
(whether Spot capacity can be had now, as an obtainability score). start_job reads it once per
start and never calls the advice API itself, so a slow or failing API never delays a run.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

# An obtainability score below this means capacity advice says "not now" for the zone.
OBTAINABLE = 0.5


class ZoneAdvice(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    spot_hourly: float | None = Field(None, ge=0)  # the latest list price, USD per hour; None: not covered
    preemption_rate: float | None = Field(None, ge=0, le=1)  # mean daily rate over the history returned
    obtainability: float | None = Field(None, ge=0, le=1)  # capacity advice's score now; None: not asked

    @property
    def capacity(self) -> str | None:
        if self.obtainability is None:
            return None
        return "available" if self.obtainability >= OBTAINABLE else "none"


class Advice(BaseModel):
    """machine type → zone → what the advice said, fetched at `fetched_at`."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    fetched_at: datetime
    machines: dict[str, dict[str, ZoneAdvice]] = Field(default_factory=dict)
    problems: tuple[str, ...] = ()  # what the refresh could not ask (a region that failed, a type not covered)

    def zone(self, machine_type: str, zone: str) -> ZoneAdvice | None:
        return self.machines.get(machine_type, {}).get(zone)

    def age(self, now: datetime) -> timedelta:
        return now - self.fetched_at

    def to_json(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Advice:
        return cls.model_validate_json(data)
