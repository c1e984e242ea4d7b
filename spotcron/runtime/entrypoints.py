"""The Cloud Functions, as plain handlers over a `Deps` chosen once per process.

functions/main.py only registers these with functions-framework. Tests and local mode call
`use(deps)` to run the same code on in-memory or local backends; on Google Cloud the deps are
built from the function's SPOTCRON_* environment on first use.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime
from typing import Any

from spotcron.core.errors import Transient
from spotcron.engine.broker import grant
from spotcron.engine.deployed import NotDeployed, SpecStore, digest
from spotcron.engine.deps import Deps
from spotcron.engine.dispatch import DispatchState, dispatch, read_cursor
from spotcron.engine.dispatch_specs import BucketSpecs, SpecSource
from spotcron.engine.job_done import MAX_CALLBACK_BYTES, handle_callback, parse_callback_body
from spotcron.engine.messages import format_tick, parse_start
from spotcron.engine.missed import missed_reason, pass_due, record_missed
from spotcron.engine.run_overrides import read_overrides
from spotcron.engine.start_job import launch
from spotcron.engine.store import RecordConflict
from spotcron.engine.sweep import sweep
from spotcron.engine.ticks import BadTrigger

log = logging.getLogger("spotcron.functions")
_deps: Deps | None = None
# The dispatcher's reader of the deployed specs and its state, kept for as long as the process
# (a warm function instance) lives, so that a quiet minute reads nothing; reset with the deps.
_dispatcher: tuple[Deps, SpecSource, DispatchState] | None = None
# Why a tick was missed when the scheduling mode cannot say better (local mode: `up` was not running).
_missed_reason: str | None = None


def use(deps: Deps | None, specs: SpecSource | None = None, *, missed_reason: str | None = None) -> None:
    """Choose the backends the handlers run on (None: build Google's from the environment).

    `specs`: where the dispatcher reads the deployed specs; default the deps' bucket.
    `missed_reason`: what a missed tick's record says happened (default: from the scheduling mode).
    """
    global _deps, _dispatcher, _missed_reason
    _deps = deps
    _dispatcher = (deps, specs, DispatchState()) if deps is not None and specs is not None else None
    _missed_reason = missed_reason


def current() -> Deps:
    global _deps
    if _deps is None:
        from spotcron.runtime.google import google_deps

        _deps = google_deps(os.environ)
    return _deps


def _dispatcher_for(deps: Deps) -> tuple[Deps, SpecSource, DispatchState]:
    global _dispatcher
    if _dispatcher is None or _dispatcher[0] is not deps:
        _dispatcher = (deps, BucketSpecs(deps.blobs), DispatchState())
    return _dispatcher


def handle_start(event_data: Any, event_time: datetime | None) -> None:
    """start_job. Returns normally to acknowledge; raises only for errors worth a redelivery."""
    try:
        request = parse_start(event_data, event_time)
        deps = current()
        specs = SpecStore(deps.blobs)
        spec = specs.resolve(request.job, request.digest, scheduled=not request.manual)
        # A scheduled start overtaken by a deploy is read by the schedule that fired it.
        fired_with = (specs.fired_with(request.job, request.digest)
                      if not request.manual and request.digest != digest(spec) else None)
        overrides = (read_overrides(deps.blobs, request.overrides, job=request.job, nonce=request.nonce,
                                    requested_at=request.requested_at, spec=spec) if request.overrides else None)
        outcomes = launch(deps, spec, requested_at=request.requested_at, manual=request.manual,
                          nonce=request.nonce, tick=request.tick, overrides=overrides,
                          fired_with=fired_with)
    except NotDeployed as exc:
        # Acknowledged: a message for a job or spec that was never deployed is someone else's doing
        # (a rogue publisher, an edited scheduler entry) or a stale one; it never starts anything.
        log.warning("start_job: refused a start message: %s", exc,
                    extra={"fields": {"event": "start_refused", "security": True, **exc.fields, "reason": str(exc)}})
        return
    except BadTrigger as exc:
        # Acknowledged on purpose: a malformed message would fail the same way on every retry.
        # Marked as a security event too: a message in another shape may be an attempt to start
        # something that was never deployed (a message carrying a spec of its own, say).
        log.error("start_job: dropped a bad message: %s", exc,
                  extra={"fields": {"event": "bad_message", "security": True, "reason": str(exc)}})
        return
    except (Transient, RecordConflict):
        raise  # Google's services did not answer, or a record kept changing: worth a redelivery
    except Exception as exc:  # noqa: BLE001 - anything else fails the same way on every redelivery
        # Acknowledged: a redelivery would meet the same input and fail again, for a day. What was
        # written before the failure (a run record, an attempt) is driven on by the sweep.
        log.error("start_job: dropped a message that could not be handled: %s: %s", type(exc).__name__, exc,
                  exc_info=exc, extra={"fields": {"event": "bad_message", "security": True,
                                                  "reason": f"{type(exc).__name__}: {exc}"[:500]}})
        return
    for outcome in outcomes:
        log.info("start_job: %s/%s is %s%s", outcome.job, outcome.run_id, outcome.state,
                 " (duplicate delivery)" if outcome.duplicate else "",
                 extra={"fields": {"job": outcome.job, "run_id": outcome.run_id, "state": outcome.state,
                                   "duplicate": outcome.duplicate, "reason": outcome.reason}})


def callback_body(stream: Any) -> Any:
    """job_done's request body, read up to its cap (one byte more, so a longer one is refused) and
    parsed by the bounded parser: 100,000 `[` are a 4xx after the token check, never a RecursionError."""
    return parse_callback_body(stream.read(MAX_CALLBACK_BYTES + 1) or b"")


def handle_job_done(authorization: str | None, body: Any) -> tuple[dict[str, Any], int]:
    try:
        reply = handle_callback(current(), authorization, body)
    except (Transient, RecordConflict) as exc:
        # Google's certs, Compute Engine or Cloud Storage did not answer: the runner retries.
        log.warning("job_done: try again later: %s", exc)
        return {"error": f"temporarily unavailable: {exc}", "retry": True}, 503
    level = logging.INFO if reply.status < 400 else logging.WARNING
    log.log(level, "job_done: %s %s", reply.status, reply.body.get("error") or reply.body.get("state"),
            extra={"fields": {"status": reply.status, **{k: v for k, v in reply.body.items() if k != "details"}}})
    return reply.body, reply.status


def handle_credentials(authorization: str | None) -> tuple[dict[str, Any], int]:
    """credentials: the broker. 200 {access_token, expires_in} for the live attempt's VM, else 4xx."""
    try:
        reply = grant(current(), authorization)
    except (Transient, RecordConflict) as exc:
        log.warning("credentials: try again later: %s", exc)
        return {"error": f"temporarily unavailable: {exc}", "retry": True}, 503
    if reply.status >= 400:
        log.warning("credentials: refused (%s): %s", reply.status, reply.body.get("error"),
                    extra={"fields": {"event": "credentials_refused", "security": True, "status": reply.status,
                                      "reason": reply.body.get("error")}})
    return reply.body, reply.status


def handle_dispatch(event_data: Any) -> dict[str, object]:
    """dispatch (scheduling: shared). Raises when start messages could not be published; the
    cursor went back, so the next minute starts them."""
    deps = current()
    _, specs, state = _dispatcher_for(deps)
    report = dispatch(deps, specs, version=dispatch_version(event_data), state=state)
    summary = report.summary()

    log.info("dispatch: %s", summary, extra={"fields": {**summary, "ticks": [
        f"{job}@{format_tick(tick)}" for job, tick in report.started]}})
    return summary


def dispatch_version(event_data: Any) -> str | None:
    """The deployed set's version in the dispatch entry's message ({"dispatch": true, "specs": V}),
    or None (then the deployed specs are read again)."""
    import base64
    import json

    try:
        body = json.loads(base64.b64decode(event_data["message"]["data"]))
    except (KeyError, TypeError, ValueError):
        return None
    version = body.get("specs") if isinstance(body, dict) else None
    return version if isinstance(version, str) else None


def _record_missed(deps: Deps, specs: SpecSource, reason) -> int:
    if _missed_reason is not None:
        reason = (lambda text: lambda tick: text)(_missed_reason)
    try:
        found = record_missed(deps, specs.current(), specs.deployed_at(), reason=reason,
                              replaced=specs.replaced())
    except Exception as exc:  # noqa: BLE001 - the next pass checks the same ticks again
        log.warning("missed ticks not checked this time: %s", exc)
        return 0
    for item in found:
        log.warning("missed: %s/%s, %d tick(s)%s", item.job, item.run_id, item.ticks,
                    " (added to the open record)" if item.extended else "",
                    extra={"fields": {"event": "ticks_missed", "job": item.job, "run_id": item.run_id,
                                      "ticks": item.ticks}})
    return len(found)


def handle_sweep() -> dict[str, int]:
    deps = current()
    report = sweep(deps)
    summary = report.summary()
    # Ticks that never started (engine/missed.py), in both scheduling modes. In shared mode the
    # dispatcher's cursor says which of them it published, so a record can say whose fault it was.
    if pass_due(deps.clock.now(), deps.settings.sweep_interval):
        _, specs, _ = _dispatcher_for(deps)
        through = read_cursor(deps).through if deps.settings.scheduling == "shared" else None
        summary["missed"] = _record_missed(deps, specs, missed_reason(deps.settings.scheduling, through))
    log.info("sweep: %s", summary, extra={"fields": {**summary, "deleted": report.deleted_vms}})
    return summary
