"""What a local run's recorded cost comes to without its VM's wait for its turn on the host.

The results page has only the costs the records priced; `spotcron report` reprices each run at a
price table, its VM as if created when its runner started (compare.without_wait). For the two
to show the same figures, the page takes the wait out of a record's cost the way repricing does:
the billed seconds the wait added (the one-minute minimum counts) at the rate the record paid
for its machine, GPUs and address, and the wait's seconds of disk. Pure: a record in, dollars out.
"""

from __future__ import annotations

from spotcron.core.runs import RunRecord
from spotcron.cost.billing import billed_vm_seconds

PER_BILLED_SECOND = ("compute", "gpu", "external_ip")  # billed with the VM's one-minute minimum


def cost_without_wait(record: RunRecord, waited: float | None) -> float | None:
    """The record's cost less what its latest attempt's `waited` seconds added to it."""
    cost, attempt = record.cost_usd, record.current_attempt
    if cost is None or not waited or attempt is None or attempt.vm_seconds is None:
        return cost
    lives = [a.vm_seconds for a in record.attempts if a.vm_seconds is not None]
    billed = sum(billed_vm_seconds(life) for life in lives)
    items = record.cost_items
    per_billed = sum(items.get(name, 0.0) for name in PER_BILLED_SECOND) / billed if billed else 0.0
    per_second = items.get("disk", 0.0) / sum(lives) if sum(lives) else 0.0
    life = attempt.vm_seconds
    left = max(0.0, life - waited)
    saved = (billed_vm_seconds(life) - billed_vm_seconds(left)) * per_billed + (life - left) * per_second
    return max(0.0, cost - saved)
