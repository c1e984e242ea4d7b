"""Google's exceptions, translated into spotcron's.

Google's client libraries raise `google.api_core.exceptions` (and, over REST, sometimes raw
`requests` errors); nothing outside `spotcron.gcp` should ever see either. The imports stay
inside the functions: `google.api_core.exceptions` pulls grpc in, and a cold function start
should pay for that only when a call has actually failed.

The create-error classifier is pure (codes and messages in, a `CreateFailed` out) so that the
decision "try the next zone or give up" is tested without any Google library.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from spotcron.core.errors import (
    AlreadyExists,
    CreateFailed,
    EncodedObject,
    NotFound,
    PreconditionFailed,
    SpotcronError,
    Transient,
)

# Operation error codes that mean "this zone has no capacity for this shape right now";
# another zone (or a later try) may work. ZONE_RESOURCE_POOL_EXHAUSTED(_WITH_DETAILS) are the
# documented ones (Compute Engine "Troubleshoot resource availability errors").
# UNSUPPORTED_OPERATION is what a Spot VM reclaimed while it is still being created reports,
# and insufficientCapacity is the older camel-case spelling; both are seen in the wild.
STOCKOUT_CODES = frozenset({
    "ZONE_RESOURCE_POOL_EXHAUSTED",
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
    "UNSUPPORTED_OPERATION",
    "insufficientCapacity",
})
# The errorInfo reason Compute Engine attaches to every resource-availability error.
STOCKOUT_REASONS = frozenset({"resource_availability"})
QUOTA_CODES = frozenset({"QUOTA_EXCEEDED", "quotaExceeded"})
PERMISSION_CODES = frozenset({"IAM_PERMISSION_DENIED", "PERMISSION_DENIED", "forbidden", "SERVICE_ACCOUNT_ACCESS_DENIED"})
ALREADY_EXISTS_CODES = frozenset({"RESOURCE_ALREADY_EXISTS", "alreadyExists", "ALREADY_EXISTS"})
# Rate limits and server trouble: the insert did not happen or may still happen; retry.
TRANSIENT_CODES = frozenset({"RATE_LIMIT_EXCEEDED", "rateLimitExceeded", "RESOURCE_OPERATION_RATE_EXCEEDED",
                             "INTERNAL_ERROR", "backendError", "SERVICE_UNAVAILABLE"})
LOGIN_HINT = "run `gcloud auth application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS)"


class ApiError(SpotcronError):
    """Google refused a call for a reason no more specific spotcron error describes.

    `status` is the HTTP status (0 when there was none), `reason` Google's message.
    """

    def __init__(self, what: str, status: int, reason: str):
        self.what = what
        self.status = status
        self.reason = reason
        super().__init__(f"{what}: HTTP {status}: {reason}" if status else f"{what}: {reason}")


def _is_image_problem(message: str) -> bool:
    # "The resource 'projects/cos-cloud/global/images/family/cos-nope' was not found";
    # a family looked up per zone reads ".../zones/Z/imageFamilyViews/F' was not found".
    lowered = message.lower()
    return ("/images/" in lowered or "imagefamilyviews" in lowered or "sourceimage" in lowered) and (
        "not found" in lowered or "does not exist" in lowered or "not ready" in lowered
    )


def classify_create_error(code: str, message: str, *, http_status: int = 0,
                          reasons: Iterable[str] = ()) -> SpotcronError:
    """What an instance insert refused with means for the caller.

    `code` is the operation error code (or the HTTP error's reason), `message` Google's text,
    `reasons` any errorInfo reasons. Returns the exception to raise: AlreadyExists,
    CreateFailed(kind) or Transient.
    """
    reasons = set(reasons)
    text = f"{code}: {message}" if code else message
    lowered = message.lower()
    if code in ALREADY_EXISTS_CODES or http_status == 409:
        return AlreadyExists(text)
    if code in STOCKOUT_CODES or reasons & STOCKOUT_REASONS:
        return CreateFailed(CreateFailed.STOCKOUT, text)
    if code in QUOTA_CODES or (lowered.startswith("quota '") and "exceeded" in lowered):
        return CreateFailed(CreateFailed.QUOTA, text)
    if code in TRANSIENT_CODES or http_status == 429 or http_status >= 500:
        return Transient(text)
    if _is_image_problem(message):
        return CreateFailed(CreateFailed.IMAGE, text)
    if code in PERMISSION_CODES or http_status in (401, 403):
        return CreateFailed(CreateFailed.PERMISSION, text)
    return CreateFailed(CreateFailed.INVALID, text)


def _status_and_reasons(exc: BaseException) -> tuple[int, str, list[str]]:
    """(HTTP status, first error reason, every reason) of a google.api_core exception."""
    code = getattr(exc, "code", None)
    status = code if isinstance(code, int) else 0
    reasons: list[str] = []
    for error in getattr(exc, "errors", None) or []:
        if isinstance(error, dict) and error.get("reason"):
            reasons.append(str(error["reason"]))
    reason = getattr(exc, "reason", None)
    if reason:
        reasons.append(str(reason))
    return status, (reasons[0] if reasons else ""), reasons


def _message(exc: BaseException) -> str:
    return str(getattr(exc, "message", "") or exc)


def create_error(exc: BaseException, what: str) -> SpotcronError | None:
    """The spotcron error for an exception raised by an instance insert call; None if unknown."""
    from google.api_core import exceptions as gexc

    if isinstance(exc, gexc.GoogleAPICallError) and not isinstance(exc, gexc.RetryError):
        status, code, reasons = _status_and_reasons(exc)
        mapped = classify_create_error(code, _message(exc), http_status=status, reasons=reasons)
        return _prefixed(mapped, what)
    return translate(exc, what)


def _prefixed(error: SpotcronError, what: str) -> SpotcronError:
    if isinstance(error, CreateFailed):
        return CreateFailed(error.kind, f"{what}: {error.reason}")
    return type(error)(f"{what}: {error}")


def translate(exc: BaseException, what: str) -> SpotcronError | None:
    """The spotcron error for a Google client exception, or None when it is not one of those.

    `what` says which call failed ("get instance sc-x in us-central1-a") and leads the message.
    """
    if isinstance(exc, SpotcronError):
        return exc
    if isinstance(exc, concurrent.futures.TimeoutError | TimeoutError):
        detail = f" ({exc})" if str(exc) else ""
        return Transient(f"{what}: no answer in time{detail}; it may still have happened")
    try:
        import requests
    except ImportError:  # pragma: no cover - requests comes with google-auth
        requests = None
    if requests is not None and isinstance(exc, requests.exceptions.ContentDecodingError):
        # A body whose Content-Encoding does not decode: what the object holds, not a network fault.
        return EncodedObject(f"{what}: its stored encoding could not be decoded ({type(exc).__name__})")
    if requests is not None and isinstance(exc, requests.exceptions.Timeout | requests.exceptions.ConnectionError):
        return Transient(f"{what}: {type(exc).__name__}: {exc}; it may still have happened")

    from google.auth import exceptions as auth_exc

    # Raised when a client is made or first refreshes its token: the user's setup, not the call.
    if isinstance(exc, auth_exc.DefaultCredentialsError):
        return SpotcronError(f"{what}: no Google credentials found: {LOGIN_HINT}")
    if isinstance(exc, auth_exc.RefreshError):
        return SpotcronError(f"{what}: Google did not accept the credentials ({exc}): {LOGIN_HINT}")

    from google.api_core import exceptions as gexc

    if isinstance(exc, gexc.RetryError | gexc.DeadlineExceeded):
        return Transient(f"{what}: deadline exceeded ({_message(exc)}); it may still have happened")
    if not isinstance(exc, gexc.GoogleAPICallError):
        return None
    status, _, _ = _status_and_reasons(exc)
    message = _message(exc)
    if isinstance(exc, gexc.NotFound):
        return NotFound(f"{what}: not found: {message}")
    if isinstance(exc, gexc.Conflict | gexc.AlreadyExists):
        return AlreadyExists(f"{what}: already exists: {message}")
    if isinstance(exc, gexc.PreconditionFailed):
        return PreconditionFailed(f"{what}: precondition failed: {message}")
    if isinstance(exc, gexc.ServerError | gexc.TooManyRequests | gexc.ResourceExhausted
                  | gexc.ServiceUnavailable | gexc.Aborted):
        return Transient(f"{what}: HTTP {status or '?'}: {message}; safe to retry")
    return ApiError(what, status, message)


@contextmanager
def translated(what: str) -> Iterator[None]:
    """Re-raise Google client exceptions inside the block as spotcron errors."""
    try:
        yield
    except SpotcronError:
        raise
    except Exception as exc:
        mapped = translate(exc, what)
        if mapped is None:
            raise
        raise mapped from exc


def kept_by_policy(message: str) -> bool:
    """Whether a 403 is Cloud Storage refusing to delete a held or retained object, not a missing
    permission: "Object '...' is under active Temporary hold and cannot be deleted, overwritten or
    archived until hold is removed." (or "Event-Based hold"), "... is subject to bucket's retention
    policy or object retention and cannot be deleted or overwritten until ..."
    (https://cloud.google.com/storage/docs/object-holds, /docs/bucket-lock)."""
    lowered = message.lower()
    return "cannot be deleted" in lowered and ("hold" in lowered or "retention" in lowered)
