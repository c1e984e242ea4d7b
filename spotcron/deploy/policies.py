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
from spotcron.deploy.iam import CONDITION_SEPARATOR, OUTDATED, PUBLIC_MEMBERS, conditions, split_key
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


def managed_view(policy: Policy, members: frozenset[str], roles: frozenset[str],
                 known: Mapping[str, Mapping[str, str]] | frozenset[str] = frozenset()) -> dict[str, tuple[str, ...]]:
    """{role: members} restricted to what deploy manages: our accounts in managed roles, and any
    public member (which deploy always removes). A conditional binding is ours only when its
    condition's title is one of `known` (iam.conditions, by title); it is keyed `ROLE|TITLE` when
    its condition is the one deploy writes, `ROLE|TITLE|outdated` when not (so that the planner
    shows it replaced)."""
    view: dict[str, set[str]] = {}
    wanted = known if isinstance(known, Mapping) else dict.fromkeys(known)
    for binding in policy.get("bindings", []):
        role = binding.get("role", "")
        key = role
        if binding.get("condition"):
            title = binding["condition"].get("title", "")
            if title not in wanted:
                continue
            key = f"{role}{CONDITION_SEPARATOR}{title}"
            if not _same_condition(binding["condition"], wanted[title]):
                key += f"{CONDITION_SEPARATOR}{OUTDATED}"
        for m in binding.get("members", []):
            if (role in roles and m in members) or m in PUBLIC_MEMBERS:
                view.setdefault(key, set()).add(m)
    return {key: tuple(sorted(ms)) for key, ms in sorted(view.items())}


# Who Cloud Storage names on a new bucket's policy by default: the holders of the project's basic
# roles, who reach the bucket through those roles anyway.
PROJECT_CONVENIENCE = ("projectOwner:", "projectEditor:", "projectViewer:")


def whole_view(policy: Policy) -> dict[str, tuple[str, ...]]:
    """{role: members} of every binding on a resource that is deploy's alone (the bucket of build
    logs, whose Storage Admin a job's build holds and may grant on): any grant deploy did not make
    shows up, and goes. A conditional binding is keyed `ROLE|TITLE`; the project's convenience
    members stay out of it."""
    view: dict[str, set[str]] = {}
    for binding in policy.get("bindings", []):
        role = binding.get("role", "")
        title = (binding.get("condition") or {}).get("title")
        key = f"{role}{CONDITION_SEPARATOR}{title}" if binding.get("condition") else role
        for m in binding.get("members", []):
            if not m.startswith(PROJECT_CONVENIENCE):
                view.setdefault(key, set()).add(m)
    return {key: tuple(sorted(ms)) for key, ms in sorted(view.items())}


def apply_changes(policy: Policy, changes: Mapping[str, tuple[Iterable[str] | None, Iterable[str] | None]],
                  known: Mapping[str, Mapping[str, str]] | None = None) -> bool:
    """Add and remove members in `policy` (in place) per `changes`; True when anything changed.

    A key `ROLE|TITLE` is the binding of ROLE under the condition of that title as `known` holds
    it (iam.conditions, by title: written with a new binding); `ROLE|TITLE|outdated` the bindings
    of ROLE under a condition of that title that differs from it (managed_view). A policy holding
    a conditional binding is written as version 3, which IAM requires for conditions."""
    bindings = policy.setdefault("bindings", [])
    changed = False
    for key, (old, new) in changes.items():
        role, title, outdated = split_key(key)
        old_set, new_set = set(old or ()), set(new or ())
        add, remove = new_set - old_set, old_set - new_set
        wanted = (known or {}).get(title) if title is not None else None
        plain = [b for b in bindings if b.get("role") == role
                 and (b.get("condition") or {}).get("title") == title
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
