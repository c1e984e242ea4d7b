"""job_done: the VM's callback. Verify who is calling, delete the VM, record the outcome.

The VM is deleted before the outcome is recorded: the job has ended, and a VM left running while
the record is written would bill for nothing. A crash between the two leaves a running record
whose VM is gone, which the sweep ends from the attempt's manifest (engine/sweep.py `_vm_gone`).

The instance to act on comes from the verified token's claims, never from the body; the body
must name the same run and attempt (the VM name is derived from them). Who is calling is
checked by engine/callers.py, the same check the credentials broker makes. A token is
accepted once.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from spotcron.core import layout
from spotcron.core.errors import PreconditionFailed, Transient
from spotcron.core.jobdata import JobDataProblem, load_job_json
from spotcron.core.runs import RunRecord, RunState, vm_name
from spotcron.engine import transitions
from spotcron.engine.attempts import create_attempt
from spotcron.engine.callers import CallerRefused, attempt_problem, vm_caller
from spotcron.engine.deps import Deps
from spotcron.engine.queue import start_queued
from spotcron.engine.results import manifest_present, metrics_changes
from spotcron.engine.token_claims import decode_unverified
from spotcron.engine.writer import step

log = logging.getLogger("spotcron.engine")
_SECRET_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_VERSION_ID = re.compile(r"[A-Za-z0-9_-]{1,40}")


class CallbackBody(BaseModel):
    """What vm_images/runner/runner.sh posts when the container has ended and uploads are done."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    job: str = Field(max_length=64)
    run_id: str = Field(max_length=64)
    attempt: int = Field(ge=1, le=100)
    # unavailable: local mode's host lacks the hardware the configuration names; the job never ran
    status: Literal["exited", "preempted", "unavailable"]
    exit_code: int | None = None
    timed_out: bool = False
    uploaded: bool = False
    # The container's start and end as the runner saw them: aware times only (a naive one cannot be
    # compared with any other), read as UTC; handle_callback() also holds them to the attempt's lifetime.
    started_at: AwareDatetime | None = None
    finished_at: AwareDatetime | None = None
    # Why the job did not start (the runner's words: no host GPU, the driver failed); the run's reason.
    problem: str | None = Field(None, max_length=500)
    # The version each secret resolved to ({"BOT_TOKEN": "12"}): names and numbers, never values.
    secret_versions: dict[str, str] = {}

    @field_validator("secret_versions", mode="before")
    @classmethod
    def _versions(cls, value: Any) -> dict[str, str]:
        # The runner's own words, but kept only when they look like what it sends: anything else is dropped.
        if not isinstance(value, dict):
            return {}
        return {k: v for k, v in list(value.items())[:64] if isinstance(k, str) and isinstance(v, str)
                and _SECRET_VAR.fullmatch(k) and _VERSION_ID.fullmatch(v)}

    @field_validator("started_at", "finished_at")
    @classmethod
    def _in_utc(cls, value: datetime | None) -> datetime | None:
        if value is None:
            return None
        try:
            return value.astimezone(UTC)
        except OverflowError:
            raise PydanticCustomError("time_range", "a time outside the calendar once read as UTC") from None


# How far the runner's reported times may lie outside the attempt's life: its VM's clock may be a
# little ahead of ours, and the VM is created before its container starts.
CLOCK_TOLERANCE = timedelta(minutes=10)
BEFORE_VM = timedelta(days=1)


def times_problem(callback: CallbackBody, record: RunRecord, now: datetime) -> str | None:
    """Why the callback's times cannot be the attempt's, or None: each must lie between a day before
    the attempt's VM was created and now (plus a little clock skew)."""
    attempt = next((a for a in record.attempts if a.number == callback.attempt), None)
    created = (attempt.created_at if attempt and attempt.created_at else None) or record.created_at
    earliest, latest = created - BEFORE_VM, now + CLOCK_TOLERANCE
    for field in ("started_at", "finished_at"):
        value = getattr(callback, field)
        if value is not None and not earliest <= value <= latest:
            return (f"{field} {value.isoformat()} is outside the attempt's life: it must lie between "
                    f"{earliest.isoformat()} (a day before its VM was created) and {latest.isoformat()} (now)")
    return None


# The runner's body is a few hundred bytes; anything a caller sends is parsed as hostile input.
MAX_CALLBACK_BYTES = 16 << 10
UNPARSABLE = {"_unparsable": True}  # what a body that is no JSON object validates as: a 400 after the token


def parse_callback_body(data: bytes) -> Any:
    """The callback's JSON, parsed by the bounded parser (depth, digits, bytes: core/jobdata.py), or
    UNPARSABLE. Never raises: whatever the body, the token is checked first and the answer is a 4xx."""
    try:
        return load_job_json(data, "the callback body", max_bytes=MAX_CALLBACK_BYTES)
    except JobDataProblem:
        return UNPARSABLE


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict[str, Any]


def handle_callback(deps: Deps, authorization: str | None, body: Any) -> Reply:
    """Handle one callback. 2xx only when the callback was genuine and is now recorded."""
    try:
        caller = vm_caller(deps, authorization, deps.settings.job_done_url)
    except CallerRefused as exc:
        return Reply(exc.status, {"error": exc.message})
    try:
        callback = CallbackBody.model_validate(body)
    except ValidationError as exc:
        return Reply(400, {"error": "malformed callback body", "details": exc.errors(include_url=False,
                                                                                      include_input=False)})
    instance_name, zone = caller.instance_name, caller.zone
    if vm_name(callback.job, callback.run_id, callback.attempt) != instance_name:
        return Reply(403, {"error": f"the token belongs to VM {instance_name}, which does not run "
                                    f"{callback.job}/{callback.run_id} attempt {callback.attempt}"})
    instance = deps.compute.get_instance(zone, instance_name)
    if instance is not None and not (instance.managed and instance.labels.get("job") == callback.job
                                     and instance.labels.get("run") == callback.run_id):
        return Reply(403, {"error": f"VM {instance_name} is not a spotcron VM of this run; left alone"})
    if instance is not None and caller.instance_id != str(instance.instance_id):
        # The record may not hold the instance id yet (its start died right after the insert), so
        # the live VM of that name is compared too, as the broker does.
        return Reply(403, {"error": f"the token's instance id is not that of VM {instance_name} (a new VM of the "
                                    f"same name?); left alone"})
    digest = _replay_key(caller.token)
    if deps.blobs.read(layout.accepted_token(digest)) is not None:
        return Reply(409, {"error": "this token was already used", "replay": True})
    record = deps.store.read(callback.job, callback.run_id)
    if record is None:
        return Reply(404, {"error": f"no run {callback.job}/{callback.run_id}"})
    mismatch = attempt_problem(deps, caller, record, callback.attempt, live=False)
    if mismatch:
        if mismatch.same_vm and instance is not None and instance.instance_id == caller.instance_id:
            # The caller is a stray of this run (re-created after its attempt ended, or left in a
            # zone the attempt moved away from): it must not run the attempt a second time.
            deps.compute.delete_instance(zone, instance_name)
        return Reply(403, {"error": mismatch.message})

    problem = times_problem(callback, record, deps.clock.now())
    if problem:
        return Reply(400, {"error": "malformed callback body", "details": [problem]})

    deleted = deps.compute.delete_instance(zone, instance_name)  # first: see the module's docstring
    created = instance.created_at if instance is not None else _claimed_creation(caller.claims)
    record = _record_outcome(deps, record, callback, zone, vm_created_at=created, instance_id=caller.instance_id)
    # A concurrent copy of the same callback may get here first; both saw the same outcome.
    with contextlib.suppress(PreconditionFailed):
        deps.blobs.write(layout.accepted_token(digest), instance_name.encode(), if_generation_match=0)
    if record.terminal:
        _room_freed(deps)
    return Reply(200, {"job": record.job, "run_id": record.run_id, "state": record.state,
                       "vm_deleted": deleted})


def _room_freed(deps: Deps) -> None:
    """This run's VM is gone: start the runs queued for room (the sweep does it too)."""
    try:
        start_queued(deps)
    except Exception as exc:  # noqa: BLE001 - the callback is recorded; the next sweep starts them
        log.warning("job_done: starting queued runs: %s", exc)


def _replay_key(token: str) -> str:
    """The same verified token however it is spelled.

    Base64url decoders (ours and google-auth's) skip characters outside the alphabet, so junk
    added to the signature segment still verifies; hashing the raw text would let such a copy
    past the replay guard. The signed segments cannot change without breaking the signature.
    """
    _, _, signed, signature = decode_unverified(token)
    return hashlib.sha256(signed + b"." + signature).hexdigest()


def _claimed_creation(claims: dict[str, Any]) -> datetime | None:
    """The VM's creation time as Google signed it into the identity token (format=full)."""
    engine = (claims.get("google") or {}).get("compute_engine") or {}
    stamp = engine.get("instance_creation_timestamp")
    if not isinstance(stamp, int) or isinstance(stamp, bool):
        return None
    try:
        return datetime.fromtimestamp(stamp, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _record_outcome(deps: Deps, record: RunRecord, callback: CallbackBody, zone: str, *,
                    vm_created_at: datetime | None = None, instance_id: str | None = None) -> RunRecord:
    """Store what the attempt did; start the next attempt when it should be retried."""
    complete = manifest_present(deps, callback.job, callback.run_id, callback.attempt)
    metrics: dict = {}
    if callback.status == "exited" and callback.uploaded and complete:
        metrics = metrics_changes(deps, callback.job, callback.run_id, callback.attempt, transitions.spec_of(record))
    event = transitions.AttemptReported(
        number=callback.attempt, status=callback.status, exit_code=callback.exit_code,
        timed_out=callback.timed_out, uploaded=callback.uploaded, manifest_present=complete,
        started_at=callback.started_at, finished_at=callback.finished_at, zone=zone, zones=deps.settings.zones,
        metrics=tuple(metrics.items()), problem=callback.problem, vm_created_at=vm_created_at,
        instance_id=instance_id or None, secret_versions=tuple(sorted(callback.secret_versions.items())))
    stepped = step(deps, record.job, record.run_id, event)
    if stepped.record is None:
        return record
    if stepped.changed and stepped.record.state == RunState.STARTING:
        try:
            return create_attempt(deps, stepped.record)
        except Transient as exc:
            # The callback itself is recorded: answering 5xx would only make the runner repeat a
            # report that now changes nothing. The sweep inserts the next attempt's VM instead.
            log.warning("job_done: the next attempt of %s/%s could not be created yet (%s); the sweep retries",
                        record.job, record.run_id, exc)
    return stepped.record
