"""The deployed job specs: the only job specs the functions act on.

deploy (and `spotcron up` in local mode) writes each job's validated spec as canonical JSON to
`deployed/JOB.json`; its digest is the sha256 of those bytes. A start message names only the job
and that digest, so whoever can publish on the start topic or edit a scheduler entry can ask for
a run of a job that was deployed, as it was deployed, and nothing else: a spec carried by the
message itself is never read (`SpecStore.resolve`). No VM credential can write under
`deployed/` (docs/security.md). The dispatcher reads the whole set (engine/dispatch_specs.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from spotcron.core import layout
from spotcron.core.errors import SpotcronError
from spotcron.core.spec import JobSpec
from spotcron.engine.ports import Blobs

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
        data = canonical(spec)
        name = layout.deployed_spec(spec.name)
        current = self.blobs.read(name)
        if current is None or current.data != data:
            self.blobs.write(name, data, content_type="application/json")
        return digest_of(data)

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

    def resolve(self, job: Any, wanted: Any) -> JobSpec:
        """The spec a start message may run; NotDeployed when `job` or `wanted` is not what is deployed."""
        if not isinstance(job, str) or not isinstance(wanted, str):
            raise NotDeployed("the message must name a job and its spec digest as strings",
                          job=_short(job), digest=_short(wanted))
        if "/" in job or not job or len(job) > 64 or job.startswith("_"):
            raise NotDeployed(f"{_short(job)!r} is not a job name", job=_short(job), digest=_short(wanted))
        deployed = self.read(job)
        if deployed is None:
            raise NotDeployed(f"no job {job!r} is deployed", job=job, digest=_short(wanted))
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
        name, data = layout.deployed_spec(spec.name), canonical(spec)
        current = blobs.read(name)
        if current is None or current.data != data:
            blobs.write(name, data, content_type="application/json")
    return specs_version(specs)


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
