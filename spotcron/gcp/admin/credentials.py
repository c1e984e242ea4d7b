"""Deploy's credentials: Application Default Credentials, or a clear word on how to log in."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spotcron.gcp.admin.calls import REQUIRED_APIS, MissingCredentials
from spotcron.gcp.admin.clients import SCOPES

CredentialsProvider = Callable[[str], Any]


def apis_hint() -> str:
    return "Deploy needs these APIs enabled: " + ", ".join(REQUIRED_APIS)


def default_credentials(project: str) -> Any:
    """Application Default Credentials, billed to `project`; DeployError says how to log in."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        credentials, _ = google.auth.default(scopes=list(SCOPES))
    except DefaultCredentialsError as exc:
        raise MissingCredentials(str(exc), apis_hint()) from None
    return with_stack_quota_project(credentials, project)


def with_stack_quota_project(credentials: Any, project: str) -> Any:
    """`credentials` checked and billed against `project`, whatever quota project they carry.

    `gcloud auth application-default login` writes gcloud's current project as the quota project
    (https://cloud.google.com/sdk/gcloud/reference/auth/application-default/login), which need not
    be the stack's: Google would then check every call against that other project's enabled APIs
    and quota (https://cloud.google.com/docs/quotas/set-quota-project), and bill it. The request's
    own quota project takes precedence over the credentials' file, so deploy names the stack's.
    """
    if getattr(credentials, "quota_project_id", None) != project and hasattr(credentials, "with_quota_project"):
        credentials = credentials.with_quota_project(project)
    return credentials
