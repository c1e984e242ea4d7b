"""IAM policies of six kinds of resource, read and written as one plain-dict shape
(gcp/admin/iam_calls.py talks to each API).

The shape is the REST JSON of google.iam.v1.Policy: {"bindings": [{"role", "members",
"condition"?}], "etag", "version"}. Changes are applied read-modify-write on a fresh copy
with its etag, member by member, so bindings granted by anyone else survive, concurrent
writers are detected (the etag), and running the same change twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from spotcron.core.errors import AlreadyExists
from spotcron.deploy.iam import PUBLIC_MEMBERS, condition_key, conditions, split_key
from spotcron.deploy.naming import Names
from spotcron.deploy.resources import (
    POLICY_BUCKET,
    POLICY_FUNCTION,
    POLICY_PROJECT,
    POLICY_REPOSITORY,
    POLICY_SECRET,
    POLICY_SERVICE_ACCOUNT,
    POLICY_TOPIC,
    split_policy_name,
)
from spotcron.gcp.admin import iam_calls as gpolicies
from spotcron.gcp.admin.calls import Caller
from spotcron.gcp.admin.clients import Clients
from spotcron.gcp.admin.iam_calls import Policy


def _where(names: Names, target: str) -> tuple[str, str]:
    """(the API holding `target`'s policy, the resource's path there) for a "KIND:ID" target."""
    kind, ident = split_policy_name(target)
    if kind == POLICY_PROJECT:
        return gpolicies.PROJECTS, f"projects/{ident}"
    if kind == POLICY_TOPIC:
        return gpolicies.TOPICS, names.topic_path(ident)
    if kind == POLICY_SERVICE_ACCOUNT:
        return gpolicies.SERVICE_ACCOUNTS, f"projects/{names.project}/serviceAccounts/{ident}"
    if kind == POLICY_BUCKET:
        return gpolicies.BUCKETS, ident
    if kind == POLICY_FUNCTION:
        return gpolicies.RUN_SERVICES, names.run_service_path(ident)
    if kind == POLICY_REPOSITORY:
        return gpolicies.REPOSITORIES, f"{names.location_path}/repositories/{ident}"
    if kind == POLICY_SECRET:
        return gpolicies.SECRETS, ident
    raise ValueError(f"unknown policy target {target!r}")


def get_policy(clients: Clients, call: Caller, names: Names, target: str) -> Policy:
    """The current policy on `target` ("KIND:ID"); raises NotFound when the resource is missing."""
    api, resource = _where(names, target)
    return gpolicies.get_policy(clients, call, f"read the IAM policy of {target}", api, resource)


def set_policy(clients: Clients, call: Caller, names: Names, target: str, policy: Policy) -> None:
    api, resource = _where(names, target)
    gpolicies.set_policy(clients, call, f"write the IAM policy of {target}", api, resource, policy)


def _same_condition(condition: Mapping[str, str], wanted: Mapping[str, str] | None) -> bool:
    """Whether a binding's condition is the one deploy writes under its title: the expression and
    the description compared too, so that a grant whose expression changed (the stack moved to
    another region, say) is replaced instead of kept. Unknown (`wanted` None): the title decides."""
    if wanted is None:
        return True
    return all((condition.get(part) or "") == (wanted.get(part) or "") for part in ("expression", "description"))


def _title(binding: Mapping[str, Any]) -> str | None:
    """The title of a binding's condition ("" when it has none), None for an unconditional binding."""
    condition = binding.get("condition")
    return str(condition.get("title") or "") if condition else None


def _key(binding: Mapping[str, Any], wanted: Mapping[str, Mapping[str, str] | None]) -> str:
    """The binding's policy key (iam.condition_key): a condition of one of `wanted`'s titles that
    is not the one deploy writes is marked outdated; any other title is kept as written, so that
    its members, never wanted, are revoked."""
    role, title = str(binding.get("role", "")), _title(binding)
    outdated = title is not None and title in wanted and not _same_condition(binding["condition"], wanted[title])
    return condition_key(role, title, outdated)


def managed_view(policy: Policy, members: frozenset[str], roles: frozenset[str],
                 known: Mapping[str, Mapping[str, str]] | frozenset[str] = frozenset()) -> dict[str, tuple[str, ...]]:
    """{key: members} restricted to what deploy manages: our accounts in managed roles, and any
    public member (which deploy always removes), under any condition or none. A conditional
    binding is keyed `ROLE|TITLE` (iam.condition_key), `ROLE|TITLE|outdated` when its title is one
    of `known` (iam.conditions, by title) and its condition is not the one deploy writes (so that
    the planner shows it replaced). Deploy wants no binding under a title it does not write, so a
    managed role held under any such condition (`request.time < ...` holds for years) is drift."""
    view: dict[str, set[str]] = {}
    wanted = known if isinstance(known, Mapping) else dict.fromkeys(known)
    for binding in policy.get("bindings", []):
        role = binding.get("role", "")
        key = _key(binding, wanted)
        for m in binding.get("members", []):
            if (role in roles and m in members) or m in PUBLIC_MEMBERS:
                view.setdefault(key, set()).add(m)
    return {key: tuple(sorted(ms)) for key, ms in sorted(view.items())}


def bucket_defaults(project: str) -> frozenset[tuple[str, str]]:
    """(role, member) of the bindings Cloud Storage puts on a new bucket of `project`: its
    convenience values (https://cloud.google.com/storage/docs/access-control/iam#convenience-values)
    in the legacy roles that mirror the default "project-private" ACL, owners and editors as
    owners, viewers as readers (https://cloud.google.com/storage/docs/access-control/iam-roles,
    "Legacy roles"; https://cloud.google.com/storage/docs/access-control/lists#predefined-acl).
    Another project's members, or these members in any other role, are grants like any other."""
    owners, viewers = (f"projectOwner:{project}", f"projectEditor:{project}"), (f"projectViewer:{project}",)
    return frozenset({*((role, m) for role in ("roles/storage.legacyBucketOwner", "roles/storage.legacyObjectOwner")
                        for m in owners),
                      *((role, m) for role in ("roles/storage.legacyBucketReader", "roles/storage.legacyObjectReader")
                        for m in viewers)})


def whole_view(policy: Policy, project: str,
               known: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, tuple[str, ...]]:
    """{key: members} of every binding on a resource that is deploy's alone (the bucket of build
    logs, whose Storage Admin a job's build holds and may grant on): any grant deploy did not make
    shows up, and goes, under any condition. Only the bindings Cloud Storage makes on a new bucket
    of the stack's `project` stay out of it (bucket_defaults); keys as managed_view's."""
    view: dict[str, set[str]] = {}
    defaults, wanted = bucket_defaults(project), dict(known or {})
    for binding in policy.get("bindings", []):
        role, key = str(binding.get("role", "")), _key(binding, wanted)
        for m in binding.get("members", []):
            if binding.get("condition") or (role, m) not in defaults:
                view.setdefault(key, set()).add(m)
    return {key: tuple(sorted(ms)) for key, ms in sorted(view.items())}


def apply_changes(policy: Policy, changes: Mapping[str, tuple[Iterable[str] | None, Iterable[str] | None]],
                  known: Mapping[str, Mapping[str, str]] | None = None) -> bool:
    """Add and remove members in `policy` (in place) per `changes`; True when anything changed.

    A key `ROLE|TITLE` (iam.condition_key) is the binding of ROLE under the condition of that title
    as `known` holds it (iam.conditions, by title: written with a new binding), or under any
    condition of that title when `known` has none; `ROLE|TITLE|outdated` the bindings of ROLE
    under a condition of that title that differs from it (managed_view). A policy holding
    a conditional binding is written as version 3, which IAM requires for conditions."""
    bindings = policy.setdefault("bindings", [])
    changed = False
    for key, (old, new) in changes.items():
        role, title, outdated = split_key(key)
        old_set, new_set = set(old or ()), set(new or ())
        add, remove = new_set - old_set, old_set - new_set
        wanted = (known or {}).get(title) if title is not None else None
        plain = [b for b in bindings if b.get("role") == role and _title(b) == title
                 and (title is None or _same_condition(b["condition"], wanted) != outdated)]
        present = {m for b in plain for m in b.get("members", [])}
        for binding in plain:
            kept = [m for m in binding.get("members", []) if m not in remove]
            if len(kept) != len(binding.get("members", [])):
                binding["members"], changed = kept, True
        missing = sorted(add - present)
        if missing:
            if plain:
                plain[0]["members"] = sorted(set(plain[0].get("members", [])) | set(missing))
            elif outdated:
                continue  # never written: an outdated condition only loses members
            elif title is not None:
                bindings.append({"role": role, "members": missing, "condition": dict((known or {})[title])})
            else:
                bindings.append({"role": role, "members": missing})
            changed = True
    policy["bindings"] = [b for b in bindings if b.get("members")]
    if any(b.get("condition") for b in policy["bindings"]):
        policy["version"] = 3
    return changed


def update_policy(clients: Clients, call: Caller, names: Names, target: str,
                  changes: Mapping[str, tuple[Any, Any]], attempts: int = 5,
                  known: Mapping[str, Mapping[str, str]] | None = None) -> bool:
    """Read-modify-write `changes` into the policy on `target`; True when a write happened.
    `known`: the conditions new conditional bindings are written with (default: iam.conditions,
    with the project's number once read, as the read compared them)."""
    for attempt in range(1, attempts + 1):
        policy = get_policy(clients, call, names, target)
        if not apply_changes(policy, changes, known or conditions(names, call.project_number)):
            return False
        try:
            set_policy(clients, call, names, target, policy)
            return True
        except AlreadyExists:  # REST answers a stale etag with 409; read again and re-apply
            if attempt == attempts:
                raise
    return False  # pragma: no cover
