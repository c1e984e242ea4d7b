"""One place where deploy calls Google: exceptions translated, transient failures retried.

Retries are per API call, with capped exponential backoff and full jitter. A create whose
answer was lost is retried too; the second try then answers "already exists", and the
handler adopts the resource (see handlers.py), so a retry never duplicates anything.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from spotcron.core.errors import SpotcronError, Transient
from spotcron.gcp.errors import LOGIN_HINT, translate

T = TypeVar("T")

# What `spotcron deploy` needs enabled; docs/deploy.md and every "not enabled" error list it.
REQUIRED_APIS = (
    "compute.googleapis.com",
    "cloudscheduler.googleapis.com",
    "pubsub.googleapis.com",
    "cloudfunctions.googleapis.com",
    "run.googleapis.com",
    "cloudbuild.googleapis.com",
    "eventarc.googleapis.com",
    "storage.googleapis.com",
    "iam.googleapis.com",
    "artifactregistry.googleapis.com",
    "logging.googleapis.com",
    "cloudresourcemanager.googleapis.com",
)


class DeployError(SpotcronError):
    """Deploy cannot go on; the message says what failed and what to do about it."""


class MissingCredentials(DeployError):
    """No Application Default Credentials: how to log in, what the command needs them for, and
    what Google's library said."""

    def __init__(self, cause: str, needs: str):
        super().__init__(f"no Google credentials found: {LOGIN_HINT}. {needs}. ({cause})")
        self.cause = cause


def enable_command(project: str) -> str:
    return f"gcloud services enable {' '.join(REQUIRED_APIS)} --project {project}"


def _service_disabled(exc: BaseException) -> str | None:
    """The API's name when `exc` says the API is not enabled in the project, else None."""
    reason = str(getattr(exc, "reason", "") or "")
    message = str(getattr(exc, "message", "") or exc)
    if reason != "SERVICE_DISABLED" and "has not been used in project" not in message \
            and "it is disabled" not in message:
        return None
    metadata = getattr(exc, "metadata", None) or {}
    return str(metadata.get("service") or metadata.get("serviceTitle") or "a required API")


def translate_deploy_error(exc: BaseException, what: str, project: str) -> SpotcronError:
    """The spotcron error for any exception a Google call raised during deploy."""
    if isinstance(exc, SpotcronError):
        return exc
    from google.api_core import exceptions as gexc

    if isinstance(exc, gexc.PermissionDenied | gexc.Forbidden):
        service = _service_disabled(exc)
        if service:
            return DeployError(f"{what}: {service} is not enabled in project {project}. "
                               f"Enable every API deploy needs with:\n  {enable_command(project)}")
        return DeployError(f"{what}: permission denied: {getattr(exc, 'message', exc)}. The account running "
                           f"deploy needs roles/owner on {project} (or the admin roles listed in docs/deploy.md).")
    if isinstance(exc, gexc.Unauthenticated | gexc.Unauthorized):
        return DeployError(f"{what}: Google did not accept the credentials: {LOGIN_HINT}")
    mapped = translate(exc, what)
    if mapped is None:
        return DeployError(f"{what}: {type(exc).__name__}: {exc}")
    return mapped


class Caller:
    """Calls a Google method with translation and retries; counts the calls it made."""

    def __init__(self, project: str, *, attempts: int = 6, base_delay: float = 1.0, max_delay: float = 30.0,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None):
        self.project = project
        self.attempts = attempts
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self.calls = 0
        self.retries = 0

    def __call__(self, what: str, fn: Callable[..., T], *args: Any,
                 transient_if: Callable[[SpotcronError], bool] | None = None, **kwargs: Any) -> T:
        for attempt in range(1, self.attempts + 1):
            with self._lock:
                self.calls += 1
            try:
                return fn(*args, **kwargs)
            except Exception as exc:  # every Google failure is translated, then maybe retried
                error = translate_deploy_error(exc, what, self.project)
                retry = isinstance(error, Transient) or (transient_if is not None and transient_if(error))
                if not retry or attempt == self.attempts:
                    if retry:
                        error = type(error)(f"{error} (gave up after {attempt} attempts)") \
                            if isinstance(error, Transient) else error
                    if error is exc:
                        raise
                    raise error from exc
            with self._lock:
                self.retries += 1
                delay = self._rng.uniform(0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))
            self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover
