"""Parsing what arrives at the functions: Pub/Sub push envelopes inside CloudEvents."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from spotcron.core.spec import JobSpec
from spotcron.engine.launch import BadTrigger

MAX_MESSAGE_BYTES = 64 * 1024  # a job spec is a few KB; anything bigger is not ours
# The dispatcher (scheduling: shared) names the exact tick; Cloud Scheduler's own messages carry none.
TICK_ATTRIBUTE = "tick"


@dataclass(frozen=True)
class StartRequest:
    spec: JobSpec
    requested_at: datetime
    manual: bool
    nonce: str | None
    tick: datetime | None = None  # exact, from the dispatcher; else inferred from requested_at


def parse_start(event_data: Any, event_time: datetime | None) -> StartRequest:
    """The start request in a Pub/Sub CloudEvent; BadTrigger (ack, don't retry) when it is not one."""
    message = event_data.get("message") if isinstance(event_data, dict) else None
    if not isinstance(message, dict):
        raise BadTrigger("not a Pub/Sub message: no 'message' object in the event data")
    raw = message.get("data")
    if not isinstance(raw, str):
        raise BadTrigger("the Pub/Sub message has no data")
    if len(raw) > MAX_MESSAGE_BYTES * 4 // 3 + 4:
        raise BadTrigger(f"the message is {len(raw)} bytes of base64; a job spec is never that big")
    try:
        payload = json.loads(base64.b64decode(raw, validate=True))
    except (binascii.Error, ValueError) as exc:
        raise BadTrigger(f"the message data is not base64 JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise BadTrigger("the message data is not a JSON object (a job spec)")
    try:
        spec = JobSpec.from_payload(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "spec"
        raise BadTrigger(f"the message is not a valid job spec: {where}: {first['msg']}") from None
    attributes = message.get("attributes") or {}
    requested_at = _timestamp(message.get("publishTime")) or event_time
    if requested_at is None:
        raise BadTrigger("the message has no publishTime")
    manual = attributes.get("trigger") == "manual" if isinstance(attributes, dict) else False
    nonce = attributes.get("nonce") if manual else None
    tick = None
    if isinstance(attributes, dict) and TICK_ATTRIBUTE in attributes and not manual:
        tick = _timestamp(attributes[TICK_ATTRIBUTE])
        if tick is None or tick != tick.replace(second=0, microsecond=0):
            raise BadTrigger(f"the message's {TICK_ATTRIBUTE} attribute {attributes[TICK_ATTRIBUTE]!r} is not a "
                             "whole UTC minute like 2026-11-22T10:00:00Z")
        tick = tick.astimezone(UTC)
    return StartRequest(spec=spec, requested_at=requested_at, manual=manual, nonce=nonce, tick=tick)


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


def encode_start(spec: JobSpec) -> bytes:
    """The message body a scheduler entry (or `spotcron run`) publishes for `spec`."""
    return json.dumps(spec.to_payload(), separators=(",", ":")).encode()
