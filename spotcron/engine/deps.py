"""What the engine needs from the outside world, passed in explicitly."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spotcron.core.runs import RunRecord
from spotcron.core.settings import Settings
from spotcron.core.spec import JobSpec
from spotcron.cost.prices import PriceTable
from spotcron.engine.ports import Advisor, Blobs, Clock, Compute, Events, Identity, Minter
from spotcron.engine.store import RunStore

log = logging.getLogger("spotcron.engine")

# (total USD, items), and optionally why it has no total and (local mode) the wait it left out.
CostFn = Callable[[RunRecord], tuple[float, dict[str, float]] | tuple[float | None, dict[str, float], str | None]
                  | tuple[float | None, dict[str, float], str | None, float | None]]
RunEndHook = Callable[["Deps", RunRecord], None]


@dataclass
class Deps:
    settings: Settings
    compute: Compute
    blobs: Blobs
    events: Events
    identity: Identity
    clock: Clock
    user_data: Callable[[], str] = lambda: ""  # the cloud-init document every VM boots with
    run_cost: CostFn | None = None
    on_run_end: list[RunEndHook] = field(default_factory=list)
    minter: Minter | None = None  # the credentials broker's: storage tokens for one attempt's prefix
    advisor: Advisor | None = None  # Spot advice, asked by the sweep only (engine/spot_advice.py)
    prices: PriceTable | None = None  # the table placement prices zones from; None: the packaged default
    # Why this host can never run a spec's VM, asked before admission (local mode: the GPUs it
    # lacks); None on Google Cloud, where Compute Engine attaches what the spec names.
    host_problem: Callable[[JobSpec], str | None] | None = None

    @property
    def store(self) -> RunStore:
        return RunStore(self.blobs)

    def publish(self, event_type: str, record: RunRecord, *, strict: bool = False, **extra: Any) -> None:
        """Tell the events topic. A failure to publish never fails the run; `strict` raises it, for
        an event that is owed until it is published (run.finished, see writer.do_owed_effects)."""
        data: Mapping[str, Any] = {"type": event_type, "job": record.job, "run_id": record.run_id,
                                   "state": record.state, "reason": record.reason, **extra}
        try:
            self.events.publish(self.settings.events_topic, data, {"type": event_type})
        except Exception:
            if strict:
                raise
            log.warning("could not publish %s for %s/%s", event_type, record.job, record.run_id, exc_info=True)
