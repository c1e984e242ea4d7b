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
    # User credentials from `gcloud auth application-default login` carry no quota project,
    # and some APIs refuse such calls: bill them to the project being deployed.
    if getattr(credentials, "quota_project_id", None) is None and hasattr(credentials, "with_quota_project"):
        credentials = credentials.with_quota_project(project)
    return credentials
