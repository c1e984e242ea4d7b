"""The deployed job specs, as the functions read them from the results bucket.

deploy writes each job's validated spec as canonical JSON to `deployed/JOB.json`, then
`deployed/_index.json`: {job: sha256 of that JSON}. Readers go by the index. The dispatcher runs
every minute, so what it costs matters: one small read (a Class B operation) tells it whether
anything changed, and a spec is read, and its digest checked, only when its digest is new to the
process. A spec whose bytes do not match the index (a deploy half-way through) is left out until
they do, keeping the copy read before if there is one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterable
from typing import Protocol

from pydantic import ValidationError

from spotcron.core import layout
from spotcron.core.spec import JobSpec
from spotcron.engine.ports import Blobs

log = logging.getLogger("spotcron.engine")


class DeployedSpecs(Protocol):
    def current(self) -> list[JobSpec]:
        """Every deployed job, paused ones included, as deploy validated it."""
        ...


def canonical(spec: JobSpec) -> bytes:
    """The one serialisation a digest is taken of: compact JSON, keys sorted."""
    return json.dumps(spec.to_payload(), sort_keys=True, separators=(",", ":")).encode()


def digest(spec: JobSpec) -> str:
    return hashlib.sha256(canonical(spec)).hexdigest()


def write_deployed(blobs: Blobs, specs: Iterable[JobSpec]) -> dict[str, str]:
    """Write every spec, then the index naming exactly these jobs; returns the index.

    Specs first: a reader that sees the new index finds the bytes it names.
    """
    index = {}
    for spec in specs:
        blobs.write(layout.deployed_spec(spec.name), canonical(spec), content_type="application/json")
        index[spec.name] = digest(spec)
    blobs.write(layout.DEPLOYED_INDEX, json.dumps(index, sort_keys=True).encode(), content_type="application/json")
    return index


class BucketSpecs:
    """DeployedSpecs from the bucket, cached by digest for as long as the process lives."""

    def __init__(self, blobs: Blobs):
        self.blobs = blobs
        self._by_digest: dict[str, JobSpec] = {}
        self._last: dict[str, JobSpec] = {}  # job -> the spec used last time, for a deploy in progress
        self._lock = threading.Lock()

    def current(self) -> list[JobSpec]:
        blob = self.blobs.read(layout.DEPLOYED_INDEX)
        if blob is None:
            return []
        try:
            index = json.loads(blob.data)
        except ValueError:
            log.error("%s is not JSON; no job is deployed as far as the dispatcher can tell", layout.DEPLOYED_INDEX)
            return []
        if not isinstance(index, dict):
            log.error("%s is not a JSON object of job: digest", layout.DEPLOYED_INDEX)
            return []
        with self._lock:
            specs = []
            for job, wanted in sorted(index.items()):
                spec = self._by_digest.get(wanted) if isinstance(wanted, str) else None
                if spec is None:
                    spec = self._load(job, wanted)
                if spec is None:
                    spec = self._last.get(job)
                if spec is not None:
                    self._last[job] = spec
                    specs.append(spec)
            for gone in set(self._last) - set(index):
                del self._last[gone]
            return specs

    def _load(self, job: str, wanted: object) -> JobSpec | None:
        blob = self.blobs.read(layout.deployed_spec(job))
        if blob is None or hashlib.sha256(blob.data).hexdigest() != wanted:
            log.warning("deployed spec of %s does not match its digest in %s yet; skipping it this time",
                        job, layout.DEPLOYED_INDEX)
            return None
        try:
            spec = JobSpec.from_payload(json.loads(blob.data))
        except (ValueError, ValidationError) as exc:
            log.error("deployed spec of %s does not load: %s", job, str(exc).splitlines()[0])
            return None
        if spec.name != job:
            log.error("%s names job %r; skipping it", layout.deployed_spec(job), spec.name)
            return None
        self._by_digest[str(wanted)] = spec
        return spec


class FixedSpecs:
    """DeployedSpecs that are given, for tests and the simulation."""

    def __init__(self, specs: Iterable[JobSpec] = ()):
        self.specs = list(specs)

    def current(self) -> list[JobSpec]:
        return list(self.specs)
