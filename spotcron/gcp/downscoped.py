"""The broker's Minter on Google Cloud: Credential Access Boundary tokens from Google's STS.

The source credential is the functions' own (it holds objectAdmin on the results bucket); the
downscoped token can never exceed it, and the boundary narrows it to one attempt's prefixes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from spotcron.core.errors import Transient

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)


class DownscopedMinter:
    def __init__(self, source_credentials: Any = None):
        self._source = source_credentials

    def _source_credentials(self) -> Any:
        if self._source is None:
            import google.auth

            self._source, _ = google.auth.default(scopes=list(SCOPES))
        return self._source

    def mint(self, rules: Sequence[Mapping[str, Any]]) -> tuple[str, int]:
        from google.auth import downscoped, exceptions
        from google.auth.transport.requests import Request

        boundary = downscoped.CredentialAccessBoundary(rules=[
            downscoped.AccessBoundaryRule(
                available_resource=rule["availableResource"],
                available_permissions=list(rule["availablePermissions"]),
                availability_condition=downscoped.AvailabilityCondition(
                    expression=rule["availabilityCondition"]["expression"],
                    title=rule["availabilityCondition"].get("title")) if rule.get("availabilityCondition") else None,
            ) for rule in rules])
        credentials = downscoped.Credentials(source_credentials=self._source_credentials(),
                                             credential_access_boundary=boundary)
        try:
            credentials.refresh(Request())
        except (exceptions.RefreshError, exceptions.TransportError, exceptions.OAuthError) as exc:
            raise Transient(f"Google's token service did not mint a downscoped token: {exc}") from exc
        expiry = credentials.expiry.replace(tzinfo=UTC) if credentials.expiry.tzinfo is None else credentials.expiry
        return credentials.token, max(0, int((expiry - datetime.now(UTC)).total_seconds()))
