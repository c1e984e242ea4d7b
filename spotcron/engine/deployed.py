"""The deployed job specs: the only job specs the functions act on.

deploy (and `spotcron up` in local mode) writes each job's validated spec as canonical JSON to
`deployed/JOB.json`; its digest is the sha256 of those bytes. A start message names only the job
and that digest, so whoever can publish on the start topic or edit a scheduler entry can ask for
a run of a job that was deployed, as it was deployed, and nothing else: a spec carried by the
message itself is never read (`SpecStore.resolve`). No VM credential can write under
`deployed/` (docs/security.md). The dispatcher reads the whole set (engine/dispatch_specs.py).

A deploy overtakes starts in flight: a scheduler entry or the dispatcher publishes the digest
deployed when its tick fired, and a deploy may replace the spec before that message is handled
(or before a failed first delivery comes back), or write the spec minutes before it rewrites the
entry that names it. Such a start is not refused: every digest ever deployed leaves a marker
(`layout.deployed_digest`, written before the spec and before an entry names it, holding that
spec's bytes), and a scheduled start naming a marked digest has its tick read by the schedule
that fired it (`SpecStore.fired_with`) and runs the spec deployed *now* at that tick, or is
recorded `skipped` when the deploy moved the schedule off it (engine/start_job.py). So a tick is
never dropped by a deploy, and a run only ever starts what is deployed now (a paused or removed
job starts nothing, and engine/still_deployed.py ends a waiting run whose job changed). A
publisher naming an old digest gains nothing the current one would not give it: the same
deployed spec, at a tick the schedule holds it to. Manual runs name the current digest exactly.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from spotcron.core import layout
from spotcron.core.errors import SpotcronError
from spotcron.core.spec import JobSpec
from spotcron.engine.ports import Blob, Blobs

log = logging.getLogger("spotcron.engine")



def canonical(spec: JobSpec) -> bytes:
    """The one byte form of a deployed spec: sorted keys, no spaces. Its sha256 is the spec's digest."""
    return json.dumps(spec.to_payload(), sort_keys=True, separators=(",", ":")).encode()


def digest(spec: JobSpec) -> str:
    return digest_of(canonical(spec))


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def start_body(spec: JobSpec) -> dict[str, str]:
    """What a start message says: the job's name and its deployed spec's digest, never the spec."""
    return {"job": spec.name, "digest": digest(spec)}


def start_message(spec: JobSpec) -> bytes:
    """The start topic's message body for `spec`, as bytes (scheduler entries, `spotcron run`)."""
    return start_message_of(spec.name, digest(spec))


def start_message_of(job: str, spec_digest: str) -> bytes:
    """The start message naming `spec_digest` as is: a stored spec's bytes' sha256, which start_job
    compares, when they may not be what canonical() writes today."""
    return json.dumps({"job": job, "digest": spec_digest}, sort_keys=True, separators=(",", ":")).encode()


class NotDeployed(SpotcronError):
    """A start message that names no deployed job, or a digest other than the deployed one.

    `fields` go into the structured security log line; the message is acknowledged, not retried.
    """

    def __init__(self, message: str, **fields: Any):
        super().__init__(message)
        self.fields = fields


@dataclass(frozen=True)
class Deployed:
    spec: JobSpec
    digest: str


class SpecStore:
    """`deployed/` in the results bucket: start_job resolves messages here; `up` and tests write it."""

    def __init__(self, blobs: Blobs):
        self.blobs = blobs

    def write(self, spec: JobSpec) -> str:
        """Store `spec` as deployed (unchanged bytes are not rewritten); returns its digest."""
        _write_spec(self.blobs, spec)
        return digest(spec)

    def deploy(self, specs: Iterable[JobSpec]) -> None:
        """Make exactly `specs` the deployed ones: what deploy does, for local mode."""
        write_deployed(self.blobs, specs)

    def jobs(self) -> list[str]:
        """Every job with a spec object under deployed/."""
        names = []
        for name in self.blobs.list(layout.DEPLOYED):
            rest = name[len(layout.DEPLOYED):]
            if rest.endswith(".json") and "/" not in rest:
                names.append(rest[: -len(".json")])
        return names

    def _once_deployed(self, job: str, wanted: str) -> bool:
        if len(wanted) != 64 or any(c not in "0123456789abcdef" for c in wanted):
            return False
        return self.blobs.read(layout.deployed_digest(job, wanted)) is not None

    def fired_with(self, job: str, wanted: str) -> JobSpec | None:
        """The spec an older deployed digest named, from its marker, when the marker holds bytes
        whose sha256 is that digest (a marker written empty names no schedule); else None."""
        if len(wanted) != 64 or any(c not in "0123456789abcdef" for c in wanted):
            return None
        blob = self.blobs.read(layout.deployed_digest(job, wanted))
        if blob is None or not blob.data or digest_of(blob.data) != wanted:
            return None
        try:
            spec = JobSpec.from_payload(json.loads(blob.data))
        except (ValueError, ValidationError):
            return None  # deployed by a version whose spec this one no longer reads
        return spec if spec.name == job else None

    def read(self, job: str) -> Deployed | None:
        """The deployed spec of `job`, or None when there is none (or it does not load)."""
        blob = self.blobs.read(layout.deployed_spec(job))
        if blob is None:
            return None
        try:
            spec = JobSpec.from_payload(json.loads(blob.data))
        except (ValueError, ValidationError):
            log.error("deployed spec of %s does not load; no run of it can start", job)
            return None
        if spec.name != job:
            return None
        return Deployed(spec=spec, digest=digest_of(blob.data))

    def resolve(self, job: Any, wanted: Any, *, scheduled: bool = False) -> JobSpec:
        """The spec a start message may run; NotDeployed when `job` or `wanted` is not what is deployed.

        `scheduled`: a scheduled start (not a manual one) naming a digest that was deployed before
        runs the current spec (see the module's docstring)."""
        if not isinstance(job, str) or not isinstance(wanted, str):
            raise NotDeployed("the message must name a job and its spec digest as strings",
                          job=_short(job), digest=_short(wanted))
        if "/" in job or not job or len(job) > 64 or job.startswith("_"):
            raise NotDeployed(f"{_short(job)!r} is not a job name", job=_short(job), digest=_short(wanted))
        deployed = self.read(job)
        if deployed is None:
            raise NotDeployed(f"no job {job!r} is deployed", job=job, digest=_short(wanted))
        if wanted != deployed.digest and scheduled and self._once_deployed(job, wanted):
            log.info("job %s: a start naming digest %s... was overtaken by a deploy; it runs the spec deployed "
                     "now (%s...)", job, wanted[:12], deployed.digest[:12])
            return deployed.spec
        if wanted != deployed.digest:
            raise NotDeployed(f"job {job!r}: digest {_short(wanted)!r} is not the deployed spec's "
                          f"({deployed.digest[:12]}...); only the deployed spec runs: run `spotcron deploy` "
                          f"to deploy a changed job",
                          job=job, digest=_short(wanted), deployed_digest=deployed.digest)
        return deployed.spec


def specs_version(specs: Iterable[JobSpec]) -> str:
    """A digest of the whole deployed set: each job's name and the sha256 of its canonical JSON."""
    pairs = sorted((spec.name, hashlib.sha256(canonical(spec)).hexdigest()) for spec in specs)
    return hashlib.sha256(json.dumps(pairs, separators=(",", ":")).encode()).hexdigest()


def write_deployed(blobs: Blobs, specs: Iterable[JobSpec]) -> str:
    """Store `specs` as the deployed set (deleting others); returns the set's version.

    An unchanged spec is not written again: its object's time is when the job was deployed as it
    is, and the dispatcher's catch-up for it starts there."""
    specs = list(specs)
    keep = {layout.deployed_spec(spec.name) for spec in specs}
    for name in blobs.list(layout.DEPLOYED):
        if name not in keep and name.endswith(".json"):
            blobs.delete(name)
    for spec in specs:
        _write_spec(blobs, spec)
    return specs_version(specs)


def timing(spec: JobSpec) -> tuple[str, str, bool]:
    """What decides which ticks a job has: a deploy that changes none of it owns no new ticks."""
    return (spec.schedule, spec.time_zone, spec.paused)


REPLACED = "replaced="  # a since object's second line: the digest whose schedule this one replaced


@dataclass(frozen=True)
class Replaced:
    """The spec whose schedule a deploy replaced, and since when it had held (None: not known)."""

    spec: JobSpec
    since: datetime | None


@dataclass(frozen=True)
class Since:
    at: datetime | None  # since when the job has had this schedule
    replaced: str | None  # the digest of the spec whose schedule it replaced then, if known


def read_since(blobs: Blobs, job: str, spec_digest: str, updated: datetime | None) -> Since:
    """Since when `job` has had the schedule of its deployed spec `spec_digest` (whose object's time
    is `updated`), and what it replaced: from `layout.deployed_since`, else `updated`."""
    blob = blobs.read(layout.deployed_since(job, spec_digest))
    if blob is None:
        return Since(updated, None)
    lines = blob.data.decode(errors="replace").splitlines()
    first = lines[0].strip() if lines else ""
    replaced = next((line[len(REPLACED):].strip() for line in lines[1:] if line.startswith(REPLACED)), None)
    if not first:
        return Since(blob.updated or updated, replaced)
    try:
        since = datetime.fromisoformat(first)
    except ValueError:
        return Since(updated, replaced)
    if since.tzinfo is None:
        return Since(updated, replaced)
    # Never later than the object: a since object written after its spec by a deploy that died.
    return Since(min(since, updated) if updated is not None else since, replaced)


def scheduled_since(blobs: Blobs, job: str, spec_digest: str, updated: datetime | None) -> datetime | None:
    return read_since(blobs, job, spec_digest, updated).at


def since_body(since: Since | None, replaced_digest: str | None) -> bytes:
    """A since object's bytes: `since` carried forward (the schedule unchanged), or empty with the
    digest whose schedule this deploy replaced (the object's own time, now, is the since)."""
    if since is not None:
        first = since.at.isoformat() if since.at is not None else ""
        return (first + (f"\n{REPLACED}{since.replaced}" if since.replaced else "")).encode()
    return f"\n{REPLACED}{replaced_digest}".encode() if replaced_digest else b""


def _since_body(blobs: Blobs, spec: JobSpec, current: Blob | None) -> bytes:
    """What `spec`'s since object says: the replaced spec's since when the schedule is unchanged,
    else its own time, naming the spec it replaced."""
    if current is None:
        return b""
    try:
        replaced = JobSpec.from_payload(json.loads(current.data))
    except (ValueError, ValidationError):
        return b""
    if timing(replaced) != timing(spec):
        return since_body(None, digest_of(current.data))
    return since_body(read_since(blobs, spec.name, digest_of(current.data), current.updated), None)


def _write_spec(blobs: Blobs, spec: JobSpec) -> None:
    """Write `spec` as deployed unless it is so already; its digest's marker first, so a start that
    names it is recognised from the moment it can be published."""
    name, data = layout.deployed_spec(spec.name), canonical(spec)
    current = blobs.read(name)
    if current is not None and current.data == data:
        return
    blobs.write(layout.deployed_since(spec.name, digest_of(data)), _since_body(blobs, spec, current),
                content_type="text/plain")
    blobs.write(layout.deployed_digest(spec.name, digest_of(data)), data, content_type="application/json")
    if current is not None:
        # The spec it replaces may have been written before markers were: mark it too, holding its
        # bytes, so a tick it fired is read by its own schedule (SpecStore.fired_with).
        blobs.write(layout.deployed_digest(spec.name, digest_of(current.data)), current.data,
                    content_type="application/json")
    blobs.write(name, data, content_type="application/json")


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
