"""A manual run's overrides, as start_job reads them: `overrides/DIGEST.json`, checked against the
digest its start message names (core/overrides.py says why they never travel in a message)."""

from __future__ import annotations

import hashlib
import json

from pydantic import ValidationError

from spotcron.core.jobdata import JobDataProblem, load_job_json
from spotcron.core.overrides import MAX_BYTES, Overrides, object_name
from spotcron.engine.ports import Blobs
from spotcron.engine.start_job import BadTrigger


def write_overrides(blobs: Blobs, overrides: Overrides) -> str:
    """Store `overrides` (the CLI, as the control plane); its digest, for the start message."""
    blobs.write(object_name(overrides.digest), overrides.canonical(), content_type="application/json")
    return overrides.digest


def read_overrides(blobs: Blobs, digest: str) -> Overrides:
    """The overrides a start message names; BadTrigger (acknowledged) when they are not there as named."""
    blob = blobs.read(object_name(digest))
    if blob is None:
        raise BadTrigger(f"the overrides {digest[:12]}… the message names are not in the bucket "
                         f"({object_name(digest)}); `spotcron run --env/--args` writes them before it publishes")
    if hashlib.sha256(blob.data).hexdigest() != digest:
        raise BadTrigger(f"{object_name(digest)} does not hash to its name: refused")
    try:
        return Overrides.model_validate(load_job_json(blob.data, object_name(digest), max_bytes=MAX_BYTES))
    except (JobDataProblem, ValidationError) as exc:
        raise BadTrigger(f"{object_name(digest)} holds no overrides: {exc}") from None


def start_message_with(message: bytes, digest: str) -> bytes:
    """A start message (engine/deployed.start_message) that also names overrides `digest`."""
    body = json.loads(message)
    body["overrides"] = digest
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
