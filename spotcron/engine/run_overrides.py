"""A manual run's overrides, as start_job reads them: `overrides/DIGEST.json`, checked against the
digest its start message names (core/overrides.py says why they never travel in a message), and
consumed by the one run they serve (`overrides/DIGEST.used`)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta

from pydantic import ValidationError

from spotcron.core.errors import PreconditionFailed
from spotcron.core.jobdata import JobDataProblem, load_job_json
from spotcron.core.overrides import KEEP_DAYS, MAX_BYTES, Overrides, object_name, used_name
from spotcron.core.runs import manual_run_id
from spotcron.core.spec import JobSpec
from spotcron.engine.ports import Blobs
from spotcron.engine.start_job import BadTrigger


def write_overrides(blobs: Blobs, overrides: Overrides) -> str:
    """Store `overrides` (the CLI, as the control plane); its digest, for the start message."""
    blobs.write(object_name(overrides.digest), overrides.canonical(), content_type="application/json")
    return overrides.digest


def read_overrides(blobs: Blobs, digest: str, *, job: str, nonce: str | None,
                   requested_at: datetime | None = None, spec: JobSpec | None = None) -> Overrides:
    """The overrides a start message for `job` with `nonce`, published at `requested_at`, names;
    BadTrigger (acknowledged) when they are not there as named, were written for another job or
    request, are past KEEP_DAYS, cannot run `spec` (the deployed spec the message names: a variable
    the job declares in `secrets:`, or a copy that breaks another rule of the spec), or already
    served another run. With `requested_at` they are consumed by this request's run (claim)."""
    blob = blobs.read(object_name(digest))
    if blob is None:
        raise BadTrigger(f"the overrides {digest[:12]}… the message names are not in the bucket "
                         f"({object_name(digest)}); `spotcron run --env/--args` writes them before it publishes")
    if hashlib.sha256(blob.data).hexdigest() != digest:
        raise BadTrigger(f"{object_name(digest)} does not hash to its name: refused")
    try:
        overrides = Overrides.model_validate(load_job_json(blob.data, object_name(digest), max_bytes=MAX_BYTES))
    except (JobDataProblem, ValidationError) as exc:
        raise BadTrigger(f"{object_name(digest)} holds no overrides: {exc}") from None
    problem = overrides.binding_problem(job, nonce)
    if problem:
        raise BadTrigger(f"refused the manual start of job {job}: the overrides it names ({object_name(digest)}) "
                         f"are not for it: {problem}; `spotcron run {job} --env/--args` writes overrides for "
                         f"its own request")
    if requested_at is not None and blob.updated is not None and requested_at - blob.updated > timedelta(days=KEEP_DAYS):
        raise BadTrigger(f"refused the manual start of job {job}: the overrides it names ({object_name(digest)}) "
                         f"were written more than {KEEP_DAYS} days before it was published; run `spotcron run` again")
    problem = overrides.problem(spec) if spec is not None else None
    if problem:
        # Written for this request alone (the binding above), and never usable by it: deleted at
        # once, so that a secret's value written there does not wait KEEP_DAYS for the lifecycle rule.
        gone = blobs.delete(object_name(digest))
        raise BadTrigger(f"refused the manual start of job {job}: its overrides ({object_name(digest)}, "
                         f"{'deleted' if gone else 'not deleted'}) cannot run the deployed spec: {problem}")
    if requested_at is not None and nonce is not None:
        claim(blobs, digest, job=job, run=manual_run_id(requested_at, nonce))
    return overrides


def claim(blobs: Blobs, digest: str, *, job: str, run: str) -> None:
    """Consume overrides `digest` for manual run `run` (its id before any matrix entry), before its
    record exists: `overrides/DIGEST.used` is created only if absent and names the run. A message
    that names the same run (a redelivery: Pub/Sub keeps a message's publish time, and the nonce is
    the message's) goes on, and finds the run already started if it was; any other is refused
    (BadTrigger, acknowledged), however well it copies the job, the digest and the nonce."""
    mark = used_name(digest)
    body = json.dumps({"job": job, "run": run}, sort_keys=True).encode()
    try:
        blobs.write(mark, body, if_generation_match=0, content_type="application/json")
        return
    except PreconditionFailed:
        pass
    blob = blobs.read(mark)
    try:
        used = load_job_json(blob.data, mark, max_bytes=MAX_BYTES) if blob is not None else None
    except JobDataProblem:
        used = None
    served = used.get("run") if isinstance(used, dict) else None
    if served == run:
        return
    which = f"run {served}" if isinstance(served, str) else "another run"
    raise BadTrigger(f"refused the manual start of job {job} (run {run}): the overrides it names "
                     f"({object_name(digest)}) already served {which} ({mark}); overrides serve one run, "
                     f"so a replayed start message runs nothing. `spotcron run {job} --env/--args` writes new "
                     f"overrides for each run")


def start_message_with(message: bytes, digest: str) -> bytes:
    """A start message (engine/deployed.start_message) that also names overrides `digest`."""
    body = json.loads(message)
    body["overrides"] = digest
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
