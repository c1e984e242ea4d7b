"""Whether a start message may stand for a scheduled tick: only for a tick the job's schedule gave
while deployed as it is now, published when the dispatcher or Cloud Scheduler would have.

Anyone who may publish on the start topic writes a message's body and attributes, the `tick`
attribute included; Pub/Sub alone sets a message's `publishTime`, when it receives the publish, and
keeps it across redeliveries. So a tick is trusted only on what no publisher can write:

- The deploy floor. A tick before the minute the job's schedule was deployed as it is now
  (created, its schedule or time zone edited, paused or unpaused; an edit that keeps the
  schedule keeps its time: deployed.scheduled_since) was never due: the dispatcher and the missed-tick pass never count from earlier,
  and a paused job's ticks never fire. A message Pub/Sub received before that deploy is exempt:
  it was published under the spec deployed then, and a deploy never drops a tick in flight
  (engine/deployed.py).
- The publish lag. The dispatcher publishes a minute's ticks in that minute, Cloud Scheduler at
  the fire time. A named tick published later than `ON_TIME` after it is trusted only when the
  dispatcher vouched for it: its catch-up after a minute that failed (or that no dispatcher ran)
  writes `dispatch/late/JOB/TICK` before it publishes such a tick, and no publisher can write
  the bucket (docs/security.md).

Anything else is refused (BadTrigger: acknowledged, logged as a security event, no record), so
a publisher cannot plant a run, a missed record or a "fail" ping for a tick nobody scheduled,
nor have an older tick take a newer one's place under `replace` or `forbid`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from spotcron.core import layout
from spotcron.core.runs import scheduled_run_id, utc_minute
from spotcron.core.spec import JobSpec
from spotcron.engine.deployed import digest, digest_of, scheduled_since
from spotcron.engine.deps import Deps
from spotcron.engine.ports import Blobs
from spotcron.engine.ticks import STALE_TICK_MARGIN, TICK_TOLERANCE, BadTrigger

log = logging.getLogger("spotcron.engine")

LATE_PREFIX = "dispatch/late/"
# The dispatcher publishes a minute's ticks within that minute, a few seconds after it starts;
# one more minute covers a slow invocation, and TICK_TOLERANCE a clock that is off.
ON_TIME = timedelta(minutes=1) + TICK_TOLERANCE
# A marker is of no use once its tick is older than any start may name (the longest
# starting_deadline a spec may have, a day, plus STALE_TICK_MARGIN).
MARKER_LIFE = timedelta(days=1) + STALE_TICK_MARGIN
PRUNE_PAGE = 100


class UntrustedTick(BadTrigger):
    """A named or inferred tick the deployed schedule never gave, or one no dispatcher published late."""


def late_marker(job: str, tick: datetime) -> str:
    """The object by which the dispatcher vouches for a tick it publishes after its minute."""
    return f"{LATE_PREFIX}{job}/{scheduled_run_id(tick)}"


def vouch_late(deps: Deps, due: Iterable[tuple[str, datetime]], minute: datetime) -> None:
    """Before publishing: mark each (job, tick) older than the dispatch `minute` as published late
    on purpose (catch-up), so start_job trusts it. Only a catch-up writes: one object per tick,
    and it deletes the job's markers no start can use any more."""
    jobs: set[str] = set()
    for job, tick in due:
        if tick < minute:
            deps.blobs.write(late_marker(job, tick), b"", content_type="text/plain")
            jobs.add(job)
    for job in sorted(jobs):
        _forget_stale(deps, job, minute)


def _forget_stale(deps: Deps, job: str, minute: datetime) -> None:
    """Delete `job`'s oldest markers (a bounded page) for ticks exact_tick refuses anyway: older
    than the longest starting_deadline plus STALE_TICK_MARGIN."""
    prefix = f"{LATE_PREFIX}{job}/"
    oldest = scheduled_run_id(minute - MARKER_LIFE)
    for name in deps.blobs.list_some(prefix, PRUNE_PAGE):
        if name[len(prefix):] >= oldest:
            break  # names sort by tick
        deps.blobs.delete(name)


def deployed_since(blobs: Blobs, job: str) -> datetime | None:
    """Since when `job`'s schedule has been deployed as it is now (a pause or an unpause counts, an
    edit that keeps the schedule does not: deployed.scheduled_since); None when unknown."""
    blob = blobs.read(layout.deployed_spec(job))
    if blob is None:
        return None
    return scheduled_since(blobs, job, digest_of(blob.data), blob.updated)


def check_tick(deps: Deps, spec: JobSpec, tick: datetime, *, published: datetime, named: bool,
               fired_with: JobSpec | None = None) -> datetime:
    """`tick` when a message Pub/Sub received at `published` may stand for it; UntrustedTick
    otherwise. `named`: the message named the tick (else it was read from `published`).
    `fired_with`: the replaced spec the message named; its tick counts from that spec's schedule."""
    if fired_with is not None:
        since = scheduled_since(deps.blobs, spec.name, digest(fired_with), None)
    else:
        since = deployed_since(deps.blobs, spec.name)
    if since is not None and published >= since and tick < utc_minute(since):
        raise UntrustedTick(
            f"job {spec.name}: refused tick {tick:%Y-%m-%dT%H:%M}Z: it falls before {since:%Y-%m-%dT%H:%M:%S}Z, "
            f"when the job's spec was deployed as it is now (or unpaused), so its schedule never fired it; the "
            f"message was published at {published:%Y-%m-%dT%H:%M:%S}Z, after that deploy: not by the dispatcher "
            f"or the job's scheduler entry")
    lag = published - tick
    if named and lag > ON_TIME and deps.blobs.read(late_marker(spec.name, tick)) is None:
        raise UntrustedTick(
            f"job {spec.name}: refused tick {tick:%Y-%m-%dT%H:%M}Z: the message was published at "
            f"{published:%Y-%m-%dT%H:%M:%S}Z, {lag.total_seconds():.0f}s after it, and the dispatcher publishes a "
            f"tick that late only in a catch-up it records ({late_marker(spec.name, tick)} is absent): not "
            f"published by the dispatcher")
    return tick
