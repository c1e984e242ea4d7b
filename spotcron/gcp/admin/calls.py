"""How deploy's calls to Google fail: errors.translate, refined for an administrator (an API
not enabled, a missing role, rejected credentials), on the one retry loop of retry.py.
"""

from __future__ import annotations

import re
from typing import Any

from spotcron.core.errors import SpotcronError
from spotcron.gcp import retry
from spotcron.gcp.error_map import LOGIN_HINT, translate

# What spotcron calls, which deploy enables (Service Usage) as its plan's first step; docs/deploy.md
# lists them. sts: the credentials broker mints every upload token with the Security Token Service
# (https://cloud.google.com/iam/docs/create-downscoped-short-lived-credentials: "Enable the IAM and
# Security Token Service APIs"); serviceusage: deploy's own list and enable calls.
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
    "sts.googleapis.com",
    "serviceusage.googleapis.com",
    "secretmanager.googleapis.com",
)
# Only with `alerts:` in the stack file: its alert policy lives in Cloud Monitoring.
MONITORING_API = "monitoring.googleapis.com"


class DeployError(SpotcronError):
    """Deploy cannot go on; the message says what failed and what to do about it."""


class AccessDenied(DeployError):
    """Google refused the call for the account's permissions (not for an API left disabled)."""


class ServiceDisabled(DeployError):
    """Google refused the call because `service` (an API) is not enabled in the project."""

    def __init__(self, message: str, service: str):
        super().__init__(message)
        self.service = service


class MissingCredentials(DeployError):
    """No Application Default Credentials: how to log in, what the command needs them for, and
    what Google's library said."""

    def __init__(self, cause: str, needs: str):
        super().__init__(f"no Google credentials found: {LOGIN_HINT}. {needs}. ({cause})")
        self.cause = cause


class ForeignQuotaProject(DeployError):
    """Google refused a call for an API disabled in another project than the stack's: the one the
    credentials name as their quota project, which Google checks and bills instead
    (https://cloud.google.com/docs/quotas/set-quota-project). Enabling APIs in the stack's project
    does not help, so nothing waits for it."""


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


def _consumer(exc: BaseException) -> str:
    """The project SERVICE_DISABLED names (its ErrorInfo's `consumer`, `projects/ID_OR_NUMBER`, or
    "… in project X before …" in the text), "" when it names none."""
    consumer = str((getattr(exc, "metadata", None) or {}).get("consumer") or "")
    if consumer.startswith("projects/"):
        return consumer.split("/", 1)[1]
    found = re.search(r"in project ([a-z0-9][a-z0-9.:-]*[a-z0-9]) before", str(getattr(exc, "message", "") or exc))
    return found.group(1) if found else ""


def translate_deploy_error(exc: BaseException, what: str, project: str, number: str = "") -> SpotcronError:
    """The spotcron error for any exception a Google call raised during deploy. `number`: the
    project's number when known, as SERVICE_DISABLED names the project by number."""
    if isinstance(exc, SpotcronError):
        return exc
    from google.api_core import exceptions as gexc

    if isinstance(exc, gexc.PermissionDenied | gexc.Forbidden):
        service = _service_disabled(exc)
        consumer = _consumer(exc) if service else ""
        # A number is comparable only once the stack's own is known.
        if consumer and consumer not in (project, number) and (number or not consumer.isdigit()):
            return ForeignQuotaProject(
                f"{what}: {service} is refused as disabled in project {consumer}, not the stack's project "
                f"{project}: Google checked the call against the quota project of your credentials. Make "
                f"{project} their quota project:\n  gcloud auth application-default set-quota-project {project}")
        if service:
            return ServiceDisabled(f"{what}: {service} is not enabled in project {project}. "
                                   f"Enable every API deploy needs with:\n  {enable_command(project)}", service)
        return AccessDenied(f"{what}: permission denied: {getattr(exc, 'message', exc)}. The account running "
                           f"deploy needs roles/owner on {project} (or the admin roles listed in docs/deploy.md).")
    if isinstance(exc, gexc.Unauthenticated | gexc.Unauthorized):
        return DeployError(f"{what}: Google did not accept the credentials: {LOGIN_HINT}")
    mapped = translate(exc, what)
    if mapped is None:
        return DeployError(f"{what}: {type(exc).__name__}: {exc}")
    return mapped


class Caller(retry.Caller):
    """retry.Caller with deploy's translation (translate_deploy_error) for one project."""

    def __init__(self, project: str, **policy: Any):
        super().__init__(lambda exc, what: translate_deploy_error(exc, what, project, self.project_number), **policy)
        self.project = project
        self.project_number = ""  # learnt from the first read (Service Usage's names)
