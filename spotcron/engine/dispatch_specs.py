"""The deployed job specs as the dispatcher reads them (`scheduling: shared`), cheaply.

deploy writes each job's validated spec as canonical JSON to `deployed/JOB.json` (core/layout.py).
The dispatcher runs every minute, so what it reads matters: a listing is a Class A operation and
each read a Class B one. Deploy therefore puts a version of the whole set, `specs_version`, in the
dispatch entry's message; a warm dispatcher that already holds that version reads nothing, and
one that does not (a cold start, a new deploy) lists `deployed/` and reads each spec once.

Each spec comes with since when the job has had its schedule: the time of the deploy that
created the job, changed its schedule or time zone, paused or unpaused it
(`digests/JOB/SHA256.since`, carried forward by a deploy that changes anything else: an image
edited the minute after a failed dispatch must not hide that minute's tick), else the spec
object's `updated` time. Catch-up for a job, and the missed-tick pass, start no earlier than
that (engine/dispatch.py, engine/missed.py) for the spec deployed now; the ticks before it within
reach are those of the spec it replaced (`replaced()`, from that digest's marker), published
naming that spec, so a schedule edited the minute after a failed dispatch leaves the old
schedule's tick a run or a `skipped` record. It costs a read per job when the set is read, and
one more per job whose schedule changed in the last 8 days (the markers' lifecycle).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Protocol

from pydantic import ValidationError

from spotcron.core import layout
from spotcron.core.spec import JobSpec
from spotcron.engine.deployed import Replaced, SpecStore, digest_of, read_since, specs_version
from spotcron.engine.ports import Blobs

log = logging.getLogger("spotcron.engine")


class SpecSource(Protocol):
    def current(self, version: str | None = None) -> list[JobSpec]:
        """Every deployed job, paused ones included. `version` (from the dispatch message) lets a
        source skip reading when it already holds that version of the set."""
        ...

    def deployed_at(self) -> Mapping[str, datetime]:
        """Since when each job of the last `current()` has had its schedule as it is now; a job
        missing here has no known time (its catch-up is bounded by its starting_deadline only)."""
        ...

    def replaced(self) -> Mapping[str, Replaced]:
        """The spec whose schedule each job's replaced at its `deployed_at`, where still known: its
        ticks before then are still published (or recorded missed), naming it."""
        ...


class BucketSpecs:
    """SpecSource over `deployed/` in the bucket, held for as long as the process lives."""

    def __init__(self, blobs: Blobs):
        self.blobs = blobs
        self._held: tuple[str, list[JobSpec]] | None = None  # (version, specs) last read
        self._deployed_at: dict[str, datetime] = {}
        self._replaced: dict[str, Replaced] = {}
        self._lock = threading.Lock()

    def current(self, version: str | None = None) -> list[JobSpec]:
        with self._lock:
            if version is not None and self._held is not None and self._held[0] == version:
                return list(self._held[1])
            specs = self._read_all()
            read_version = specs_version(specs)
            if version is not None and read_version != version:
                # A deploy half-way through (specs written, entry not yet, or the other way round):
                # use what is there, and read again next time.
                log.warning("dispatch: the deployed specs are version %s, the dispatch message names %s; "
                            "reading them again next minute", read_version[:12], version[:12])
            self._held = (read_version, specs)
            return list(specs)

    def deployed_at(self) -> Mapping[str, datetime]:
        return dict(self._deployed_at)

    def replaced(self) -> Mapping[str, Replaced]:
        return dict(self._replaced)

    def _read_all(self) -> list[JobSpec]:
        specs, self._deployed_at, self._replaced = [], {}, {}
        for name in self.blobs.list(layout.DEPLOYED):
            job = name[len(layout.DEPLOYED):].removesuffix(".json")
            if not name.endswith(".json") or "/" in job:
                continue
            blob = self.blobs.read(name)
            if blob is None:
                continue  # deleted since the listing
            try:
                spec = JobSpec.from_payload(json.loads(blob.data))
            except (ValueError, ValidationError) as exc:
                log.error("dispatch: %s does not load, so %s is left out: %s", name, job, str(exc).splitlines()[0])
                continue
            if spec.name != job:
                log.error("dispatch: %s names job %r; left out", name, spec.name)
                continue
            specs.append(spec)
            since = read_since(self.blobs, job, digest_of(blob.data), blob.updated)
            if since.at is not None:
                self._deployed_at[job] = since.at
            if since.replaced and (before := SpecStore(self.blobs).fired_with(job, since.replaced)) is not None:
                self._replaced[job] = Replaced(before, read_since(self.blobs, job, since.replaced, None).at)
        return specs


class FixedSpecs:
    """A SpecSource that is given, for tests and the bench."""

    def __init__(self, specs: Iterable[JobSpec] = (), deployed_at: Mapping[str, datetime] | None = None,
                 replaced: Mapping[str, Replaced] | None = None):
        self.specs = list(specs)
        self.times = dict(deployed_at or {})
        self.before = dict(replaced or {})

    def current(self, version: str | None = None) -> list[JobSpec]:
        return list(self.specs)

    def deployed_at(self) -> Mapping[str, datetime]:
        return dict(self.times)

    def replaced(self) -> Mapping[str, Replaced]:
        return dict(self.before)
