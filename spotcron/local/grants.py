"""Access grants for the local storage server: signed bearer tokens and the rule that checks them.

On Google Cloud the control plane (the functions, the CLI) holds a full-access credential and a
VM holds a Credential Access Boundary token that reaches only its own attempt's objects and its
job's checkpoint. Local mode keeps that rule instead of assuming it: every request to the local
storage server carries `Authorization: Bearer <token>`, and the token is one of these.

A token is `spotcron-local.<payload>.<signature>`: the payload is base64url JSON,
`{"exp": UNIX_SECONDS, "access": "full"}` or `{"exp": ..., "boundary": {"accessBoundaryRules":
[...]}}` with the rules in Google's own shape; the signature is HMAC-SHA256 over the payload
with the server's key. The rules are evaluated as Cloud Storage evaluates them, but only the
condition forms written below are understood; a rule whose condition cannot be read grants
nothing (deny what cannot be evaluated).

Pure: `now` is passed in; nothing here reads the clock, the environment or the network.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TOKEN_PREFIX = "spotcron-local"
RESOURCE_PREFIX = "//storage.googleapis.com/"

# The object permissions each predefined role carries (Cloud Storage IAM roles). Overwriting an
# existing object needs `delete` as well as `create`, so objectCreator can only add new names.
ROLE_PERMISSIONS: Mapping[str, frozenset[str]] = {
    "roles/storage.objectViewer": frozenset({"storage.objects.get", "storage.objects.list"}),
    "roles/storage.objectCreator": frozenset({"storage.objects.create"}),
    "roles/storage.objectUser": frozenset({"storage.objects.get", "storage.objects.list", "storage.objects.create",
                                           "storage.objects.delete", "storage.objects.update"}),
    "roles/storage.objectAdmin": frozenset({"storage.objects.get", "storage.objects.list", "storage.objects.create",
                                            "storage.objects.delete", "storage.objects.update"}),
    # Create, replace and delete, no get and no update (so no holds): the VMs' write role.
    "roles/storage.legacyBucketWriter": frozenset({"storage.buckets.get", "storage.objects.list",
                                                   "storage.objects.create", "storage.objects.delete"}),
}

_LITERAL = r"'([^'\\]*)'"
_NAME_STARTS = re.compile(r"resource\.name\.startsWith\(" + _LITERAL + r"\)")
_LIST_PREFIX_STARTS = re.compile(
    r"api\.getAttribute\('storage\.googleapis\.com/objectListPrefix',\s*''\)\.startsWith\(" + _LITERAL + r"\)")


class GrantError(Exception):
    """The token is missing, malformed, badly signed or expired: HTTP 401 with this message."""


@dataclass(frozen=True)
class Access:
    """What one request needs: a permission on a bucket, and for objects the object's name.

    A listing is a bucket-level request; its `list_prefix` is the prefix it asks for, which the
    objectListPrefix attribute of a condition sees."""

    permission: str
    bucket: str
    object_name: str | None = None
    list_prefix: str = ""

    @property
    def resource_name(self) -> str:
        bucket = f"projects/_/buckets/{self.bucket}"
        return bucket if self.object_name is None else f"{bucket}/objects/{self.object_name}"

    def describe(self) -> str:
        where = f"gs://{self.bucket}/{self.object_name}" if self.object_name is not None else \
            f"gs://{self.bucket} (prefix {self.list_prefix!r})"
        return f"{self.permission} on {where}"


@dataclass(frozen=True)
class Grant:
    """A checked token: full access, or the access boundary's rules."""

    expires_at: int
    rules: tuple[Mapping[str, Any], ...] | None  # None: full access (the control plane)

    @property
    def full(self) -> bool:
        return self.rules is None

    def allows(self, access: Access) -> bool:
        if self.rules is None:
            return True
        return any(_rule_allows(rule, access) for rule in self.rules)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Grants:
    """Mints and checks tokens with one HMAC key (the storage server's)."""

    def __init__(self, key: bytes | None = None):
        self.key = key or secrets.token_bytes(32)

    def mint_full(self, *, now: float, lifetime_s: int = 3600) -> str:
        """A control-plane token: every bucket, every object."""
        return self._sign({"exp": int(now) + lifetime_s, "access": "full"})

    def mint_downscoped(self, rules: Sequence[Mapping[str, Any]], *, now: float, lifetime_s: int = 3600) -> str:
        """A token limited to `rules`, each in Credential Access Boundary shape:
        {"availableResource": "//storage.googleapis.com/projects/_/buckets/B",
         "availablePermissions": ["inRole:roles/storage.objectViewer", ...],
         "availabilityCondition": {"expression": "resource.name.startsWith('projects/_/buckets/B/objects/P')"}}"""
        rules = [dict(rule) for rule in rules]
        if not rules:
            raise ValueError("an access boundary needs at least one rule (Google refuses an empty one too)")
        for index, rule in enumerate(rules):
            _check_rule_shape(rule, index)
        return self._sign({"exp": int(now) + lifetime_s, "boundary": {"accessBoundaryRules": rules}})

    def check(self, authorization: str | None, *, now: float) -> Grant:
        """The grant behind an `Authorization` header value; GrantError says what is wrong."""
        if not authorization:
            raise GrantError("no Authorization header: send `Authorization: Bearer TOKEN` with a token minted by "
                             "this storage server's grants (local mode hands one to every client)")
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise GrantError(f"Authorization scheme {scheme!r} is not accepted: use `Bearer TOKEN`")
        parts = token.strip().split(".")
        if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
            raise GrantError(f"the bearer token is not a local storage token (want {TOKEN_PREFIX}.PAYLOAD.SIGNATURE)")
        expected = hmac.new(self.key, parts[1].encode(), hashlib.sha256).digest()
        try:
            signature = _unb64(parts[2])
            payload = json.loads(_unb64(parts[1]))
        except (ValueError, json.JSONDecodeError) as exc:
            raise GrantError(f"the bearer token is malformed: {exc}") from None
        if not hmac.compare_digest(signature, expected):
            raise GrantError("the bearer token's signature is not this server's (minted by another server, "
                             "or altered)")
        expires_at = payload.get("exp")
        if not isinstance(expires_at, int):
            raise GrantError("the bearer token has no expiry")
        if now >= expires_at:
            raise GrantError(f"the bearer token expired {int(now) - expires_at} s ago; get a fresh one")
        if payload.get("access") == "full":
            return Grant(expires_at, None)
        boundary = payload.get("boundary")
        rules = boundary.get("accessBoundaryRules") if isinstance(boundary, dict) else None
        if not isinstance(rules, list):
            raise GrantError("the bearer token grants neither full access nor an access boundary")
        return Grant(expires_at, tuple(rule for rule in rules if isinstance(rule, dict)))

    def _sign(self, payload: Mapping[str, Any]) -> str:
        body = _b64(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
        signature = _b64(hmac.new(self.key, body.encode(), hashlib.sha256).digest())
        return f"{TOKEN_PREFIX}.{body}.{signature}"


def _check_rule_shape(rule: Mapping[str, Any], index: int) -> None:
    resource = rule.get("availableResource")
    if not isinstance(resource, str) or not resource.startswith(RESOURCE_PREFIX + "projects/_/buckets/"):
        raise ValueError(f"accessBoundaryRules[{index}].availableResource = {resource!r}: write "
                         f"'{RESOURCE_PREFIX}projects/_/buckets/BUCKET'")
    permissions = rule.get("availablePermissions")
    if not isinstance(permissions, list) or not permissions:
        raise ValueError(f"accessBoundaryRules[{index}].availablePermissions = {permissions!r}: list at least one "
                         f"'inRole:ROLE' (one of {', '.join(sorted(ROLE_PERMISSIONS))})")


def rule_permissions(rule: Mapping[str, Any]) -> frozenset[str]:
    """The permissions a rule's `availablePermissions` name; unknown roles add none."""
    granted: set[str] = set()
    for entry in rule.get("availablePermissions") or ():
        if isinstance(entry, str) and entry.startswith("inRole:"):
            granted |= ROLE_PERMISSIONS.get(entry.removeprefix("inRole:"), frozenset())
    return frozenset(granted)


def condition_holds(expression: str, access: Access) -> bool:
    """Evaluate the condition forms Cloud Storage documents for access boundaries, joined by `||`:
    `resource.name.startsWith('projects/_/buckets/B/objects/P')` and
    `api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('P')`.
    Anything else is unreadable here, so it holds for nothing."""
    terms = [term.strip() for term in expression.split("||")]
    readings = []
    for term in terms:
        while term.startswith("(") and term.endswith(")"):
            term = term[1:-1].strip()
        if match := _NAME_STARTS.fullmatch(term):
            readings.append(access.resource_name.startswith(match.group(1)))
        elif match := _LIST_PREFIX_STARTS.fullmatch(term):
            # Only a listing has the attribute; for object requests it is the default ''.
            value = access.list_prefix if access.object_name is None else ""
            readings.append(value.startswith(match.group(1)))
        else:
            return False
    return any(readings)


def _rule_allows(rule: Mapping[str, Any], access: Access) -> bool:
    if rule.get("availableResource") != f"{RESOURCE_PREFIX}projects/_/buckets/{access.bucket}":
        return False
    if access.permission not in rule_permissions(rule):
        return False
    condition = rule.get("availabilityCondition")
    if condition is None:
        return True
    expression = condition.get("expression") if isinstance(condition, dict) else None
    return isinstance(expression, str) and condition_holds(expression, access)


def prefix_rules(bucket: str, grants: Iterable[tuple[str, str]]) -> list[dict[str, Any]]:
    """Rules for (role, object-name prefix) pairs on one bucket, each also listing under its prefix.

    A convenience for local callers and tests; the broker builds its own rules in the same shape."""
    rules = []
    for role, prefix in grants:
        if "'" in prefix or "\\" in prefix:
            raise ValueError(f"prefix {prefix!r}: quotes and backslashes cannot appear in a condition")
        rules.append({
            "availableResource": f"{RESOURCE_PREFIX}projects/_/buckets/{bucket}",
            "availablePermissions": [f"inRole:{role}"],
            "availabilityCondition": {"expression": (
                f"resource.name.startsWith('projects/_/buckets/{bucket}/objects/{prefix}') || "
                f"api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('{prefix}')")},
        })
    return rules

