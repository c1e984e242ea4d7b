"""The part of Secret Manager v1's published REST surface that the runner and deploy use.

From Google's REST reference (https://cloud.google.com/secret-manager/docs/reference/rest/v1/
projects.secrets.versions/access and the SecretPayload / AccessSecretVersionResponse messages of
google/cloud/secretmanager/v1/resources.proto and service.proto):

- `GET https://secretmanager.googleapis.com/v1/{name=projects/*/secrets/*/versions/*}:access`,
  empty request body, OAuth scope cloud-platform, IAM permission `secretmanager.versions.access`
  on the resource; `projects/*/secrets/*/versions/latest` is an alias of the newest version.
- The answer: `{"name": string, "payload": {"data": string (bytes, base64), "dataCrc32c": string
  (int64, as JSON carries int64)}}`; `name` is the version actually read (`.../versions/N`).
- Errors: `{"error": {"code": int, "message": string, "status": string}}` (Google's JSON error
  shape; NOT_FOUND for a missing secret or version, PERMISSION_DENIED for a caller without the
  permission, FAILED_PRECONDITION for a disabled or destroyed version).
"""

from __future__ import annotations

import re
from typing import Any

ACCESS_METHOD = "GET"
ACCESS_PATH = re.compile(r"^/v1/projects/[^/]+/secrets/[^/]+/versions/[^/:]+:access$")
RESPONSE = {"name": str, "payload": {"data": str, "dataCrc32c": str}}
ERROR = {"error": {"code": int, "message": str, "status": str}}


def request_problems(method: str, path: str, headers: dict[str, str], body: bytes) -> list[str]:
    """What in one request does not match the published method; empty when it matches."""
    problems = []
    if method != ACCESS_METHOD:
        problems.append(f"method {method}, not {ACCESS_METHOD}")
    if not ACCESS_PATH.match(path):
        problems.append(f"path {path!r} is not /v1/projects/*/secrets/*/versions/*:access (no query either)")
    if body:
        problems.append("the request body must be empty")
    auth = next((v for k, v in headers.items() if k.lower() == "authorization"), "")
    if not auth.startswith("Bearer ") or len(auth) < 8:
        problems.append("no Authorization: Bearer header")
    return problems


def shape_problems(value: Any, schema: dict[str, Any], where: str = "") -> list[str]:
    """Members of `value` missing from `schema`, or of another JSON type."""
    if not isinstance(value, dict):
        return [f"{where or 'body'} is not an object"]
    problems = []
    for key, item in value.items():
        if key not in schema:
            problems.append(f"{where}{key} is not in the published message")
        elif isinstance(schema[key], dict):
            problems += shape_problems(item, schema[key], f"{where}{key}.")
        elif not isinstance(item, schema[key]):
            problems.append(f"{where}{key} is {type(item).__name__}, not {schema[key].__name__}")
    return problems
