"""Parsing what arrives at the functions: Pub/Sub push envelopes inside CloudEvents."""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from spotcron.core.jobdata import JobDataProblem, load_job_json
from spotcron.engine.ticks import BadTrigger

MAX_MESSAGE_BYTES = 4 * 1024  # a job name and a digest; anything bigger is not ours
# A manual run's nonce becomes part of its run id, object names and VM name: lowercase hex only.
NONCE = re.compile(r"^[0-9a-f]{4,32}$")
DIGEST = re.compile(r"^[0-9a-f]{64}$")
# The dispatcher (scheduling: shared) names the exact tick; Cloud Scheduler's own messages carry none.
TICK_ATTRIBUTE = "tick"


@dataclass(frozen=True)
class StartRequest:
    """What a start message asks for. The spec itself comes from the deployed specs, never from here."""

    job: str
    digest: str
    requested_at: datetime
    manual: bool
    nonce: str | None
    tick: datetime | None = None  # exact, from the dispatcher; else inferred from requested_at
    # A manual run's overrides: the sha256 of overrides/DIGEST.json, which the CLI wrote (core/overrides.py).
    overrides: str | None = None


def parse_start(event_data: Any, event_time: datetime | None) -> StartRequest:
    """The start request in a Pub/Sub CloudEvent; BadTrigger (ack, don't retry) when it is not one."""
    message = event_data.get("message") if isinstance(event_data, dict) else None
    if not isinstance(message, dict):
        raise BadTrigger("not a Pub/Sub message: no 'message' object in the event data")
    raw = message.get("data")
    if not isinstance(raw, str):
        raise BadTrigger("the Pub/Sub message has no data")
    if len(raw) > MAX_MESSAGE_BYTES * 4 // 3 + 4:
        raise BadTrigger(f"the message is {len(raw)} bytes of base64; a start message is never that big")
    try:
        # Anyone who may publish wrote it: bounded like a file a job wrote (no recursion, no overflow).
        payload = load_job_json(base64.b64decode(raw, validate=True), "the message data", max_bytes=MAX_MESSAGE_BYTES)
    except (binascii.Error, ValueError, JobDataProblem) as exc:
        raise BadTrigger(f"the message data is not base64 JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise BadTrigger('the message data is not a JSON object like {"job": NAME, "digest": SHA256}')
    job, digest = payload.get("job"), payload.get("digest")
    if not isinstance(job, str) or not isinstance(digest, str):
        # A spec in a message is never trusted: only a deployed spec runs (engine/deployed.py).
        raise BadTrigger('the message does not name a deployed job: expected {"job": NAME, "digest": SHA256}, '
                         f"got the keys {sorted(payload)[:10]}")
    attributes = message.get("attributes") or {}
    requested_at = _timestamp(message.get("publishTime")) or event_time
    if requested_at is None:
        raise BadTrigger("the message has no publishTime")
    manual = attributes.get("trigger") == "manual" if isinstance(attributes, dict) else False
    nonce = _nonce(attributes, message) if manual else None
    tick = None
    if isinstance(attributes, dict) and TICK_ATTRIBUTE in attributes and not manual:
        tick = _timestamp(attributes[TICK_ATTRIBUTE])
        if tick is None or tick != tick.replace(second=0, microsecond=0):
            raise BadTrigger(f"the message's {TICK_ATTRIBUTE} attribute {attributes[TICK_ATTRIBUTE]!r} is not a "
                             "whole UTC minute like 2026-11-22T10:00:00Z")
        tick = tick.astimezone(UTC)
    overrides = payload.get("overrides")
    if overrides is not None and (not manual or not isinstance(overrides, str) or not DIGEST.match(overrides)):
        raise BadTrigger("the message's overrides must be the sha256 (64 lowercase hex digits) of an overrides "
                         "object, and only a manual run may have them")
    return StartRequest(job=job, digest=digest, requested_at=requested_at, manual=manual, nonce=nonce, tick=tick,
                        overrides=overrides)


def _nonce(attributes: dict[str, Any], message: dict[str, Any]) -> str:
    """The manual run's nonce: the sender's, checked; else one derived from the message itself.

    Pub/Sub keeps a message's id and publish time across redeliveries, so a derived nonce names the
    same run on every delivery, where a random one would start a second run.
    """
    if "nonce" not in attributes:
        seed = f"{message.get('messageId', '')}|{message.get('publishTime', '')}"
        return hashlib.sha256(seed.encode()).hexdigest()[:8]
    nonce = attributes["nonce"]
    if not isinstance(nonce, str) or not NONCE.match(nonce):
        raise BadTrigger(f"the manual run's nonce {nonce!r} is not 4 to 32 lowercase hex digits "
                         "(it names the run, its objects and its VM); `spotcron run` sends one like 'ab12'")
    return nonce


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None


def format_tick(tick: datetime) -> str:
    """A tick as the dispatcher writes it: `2026-11-22T10:00:00Z`."""
    return tick.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


