"""IAM policies of six kinds of resource, read and written as one plain-dict shape.

The shape is the REST JSON of google.iam.v1.Policy: {"bindings": [{"role", "members",
"condition"?}], "etag", "version"}. Changes are applied read-modify-write on a fresh copy
with its etag, member by member, so bindings granted by anyone else survive, concurrent
writers are detected (the etag), and running the same change twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from spotcron.core.errors import AlreadyExists, SpotcronError
from spotcron.deploy.calls import Caller
from spotcron.deploy.clients import Clients
from spotcron.deploy.iam import CONDITION_SEPARATOR, PUBLIC_MEMBERS, conditions, split_key
from spotcron.deploy.naming import Names
from spotcron.deploy.resources import (
    POLICY_BUCKET,
    POLICY_FUNCTION,
    POLICY_PROJECT,
    POLICY_REPOSITORY,
    POLICY_SERVICE_ACCOUNT,
    POLICY_TOPIC,
    split_policy_name,
)

Policy = dict[str, Any]


def _pb_to_dict(message: Any) -> Policy:
    from google.protobuf import json_format

    return json_format.MessageToDict(message)


def _dict_to_pb(policy: Policy) -> Any:
    from google.iam.v1 import policy_pb2
    from google.protobuf import json_format

    return json_format.ParseDict(policy, policy_pb2.Policy(), ignore_unknown_fields=True)


def _options() -> Any:
    from google.iam.v1 import options_pb2

    return options_pb2.GetPolicyOptions(requested_policy_version=3)


def get_policy(clients: Clients, call: Caller, names: Names, target: str) -> Policy:
    """The current policy on `target` ("KIND:ID"); raises NotFound when the resource is missing."""
    from google.iam.v1 import iam_policy_pb2

    kind, ident = split_policy_name(target)
    what = f"read the IAM policy of {target}"
    if kind == POLICY_PROJECT:
        request = iam_policy_pb2.GetIamPolicyRequest(resource=f"projects/{ident}", options=_options())
        return _pb_to_dict(call(what, clients.projects.get_iam_policy, request=request, retry=None, timeout=clients.timeout))
    if kind == POLICY_TOPIC:
        request = iam_policy_pb2.GetIamPolicyRequest(resource=names.topic_path(ident), options=_options())
        return _pb_to_dict(call(what, clients.publisher.get_iam_policy, request=request, retry=None, timeout=clients.timeout))
    if kind == POLICY_SERVICE_ACCOUNT:
        request = iam_policy_pb2.GetIamPolicyRequest(resource=f"projects/{names.project}/serviceAccounts/{ident}",
                                                     options=_options())
        return _pb_to_dict(call(what, clients.iam.get_iam_policy, request=request, retry=None, timeout=clients.timeout))
    if kind == POLICY_BUCKET:
        bucket = clients.storage.bucket(ident)
        return dict(call(what, bucket.get_iam_policy, requested_policy_version=3, retry=None,
                              timeout=clients.timeout).to_api_repr())
    if kind == POLICY_FUNCTION:
        return call(what, clients.run_iam.get_iam_policy, names.run_service_path(ident))
    if kind == POLICY_REPOSITORY:
        return call(what, clients.registry.get_iam_policy, f"{names.location_path}/repositories/{ident}")
    raise ValueError(f"unknown policy target {target!r}")


def set_policy(clients: Clients, call: Caller, names: Names, target: str, policy: Policy) -> None:
    from google.iam.v1 import iam_policy_pb2

    kind, ident = split_policy_name(target)
    what = f"write the IAM policy of {target}"
    # A stale etag answers 409/ABORTED: the caller re-reads and re-applies. A brand-new service
    # account may not be visible to IAM for some seconds ("does not exist"): also worth a retry.
    if kind == POLICY_PROJECT:
        request = iam_policy_pb2.SetIamPolicyRequest(resource=f"projects/{ident}", policy=_dict_to_pb(policy))
        call(what, clients.projects.set_iam_policy, request=request, retry=None, timeout=clients.timeout,
             transient_if=_new_account_lag)
    elif kind == POLICY_TOPIC:
        request = iam_policy_pb2.SetIamPolicyRequest(resource=names.topic_path(ident), policy=_dict_to_pb(policy))
        call(what, clients.publisher.set_iam_policy, request=request, retry=None, timeout=clients.timeout,
             transient_if=_new_account_lag)
    elif kind == POLICY_SERVICE_ACCOUNT:
        request = iam_policy_pb2.SetIamPolicyRequest(
            resource=f"projects/{names.project}/serviceAccounts/{ident}", policy=_dict_to_pb(policy))
        call(what, clients.iam.set_iam_policy, request=request, retry=None, timeout=clients.timeout,
             transient_if=_new_account_lag)
    elif kind == POLICY_BUCKET:
        from google.api_core.iam import Policy as ApiPolicy

        bucket = clients.storage.bucket(ident)
        call(what, bucket.set_iam_policy, ApiPolicy.from_api_repr(policy), retry=None, timeout=clients.timeout,
             transient_if=_new_account_lag)
    elif kind == POLICY_FUNCTION:
        call(what, clients.run_iam.set_iam_policy, names.run_service_path(ident), policy,
             transient_if=_new_account_lag)
    elif kind == POLICY_REPOSITORY:
        call(what, clients.registry.set_iam_policy, f"{names.location_path}/repositories/{ident}", policy,
             transient_if=_new_account_lag)
    else:
        raise ValueError(f"unknown policy target {target!r}")


def _new_account_lag(error: SpotcronError) -> bool:
    # IAM answers "Service account X does not exist." for an account created seconds ago.
    text = str(error)
    return "does not exist" in text and "service account" in text.lower()


def managed_view(policy: Policy, members: frozenset[str], roles: frozenset[str],
                 titles: frozenset[str] = frozenset()) -> dict[str, tuple[str, ...]]:
    """{role: members} restricted to what deploy manages: our accounts in managed roles, and any
    public member (which deploy always removes). A conditional binding is ours only when its
    condition's title is one of `titles` (iam.conditions); it is keyed `ROLE|TITLE`."""
    view: dict[str, set[str]] = {}
    for binding in policy.get("bindings", []):
        role = binding.get("role", "")
        key = role
        if binding.get("condition"):
            title = binding["condition"].get("title", "")
            if title not in titles:
                continue
            key = f"{role}{CONDITION_SEPARATOR}{title}"
        for m in binding.get("members", []):
            if (role in roles and m in members) or m in PUBLIC_MEMBERS:
                view.setdefault(key, set()).add(m)
    return {key: tuple(sorted(ms)) for key, ms in sorted(view.items())}


def apply_changes(policy: Policy, changes: Mapping[str, tuple[Iterable[str] | None, Iterable[str] | None]],
                  known: Mapping[str, Mapping[str, str]] | None = None) -> bool:
    """Add and remove members in `policy` (in place) per `changes`; True when anything changed.

    A key `ROLE|TITLE` is the binding of ROLE under the condition of that title; `known` holds
    the conditions by title (iam.conditions), written with a new binding. A policy holding a
    conditional binding is written as version 3, which IAM requires for conditions."""
    bindings = policy.setdefault("bindings", [])
    changed = False
    for key, (old, new) in changes.items():
        role, title = split_key(key)
        old_set, new_set = set(old or ()), set(new or ())
        add, remove = new_set - old_set, old_set - new_set
        plain = [b for b in bindings if b.get("role") == role
                 and (b.get("condition") or {}).get("title") == title]
        present = {m for b in plain for m in b.get("members", [])}
        for binding in plain:
            kept = [m for m in binding.get("members", []) if m not in remove]
            if len(kept) != len(binding.get("members", [])):
                binding["members"], changed = kept, True
        missing = sorted(add - present)
        if missing:
            if plain:
                plain[0]["members"] = sorted(set(plain[0].get("members", [])) | set(missing))
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
                  changes: Mapping[str, tuple[Any, Any]], attempts: int = 5) -> bool:
    """Read-modify-write `changes` into the policy on `target`; True when a write happened."""
    for attempt in range(1, attempts + 1):
        policy = get_policy(clients, call, names, target)
        if not apply_changes(policy, changes, conditions(names)):
            return False
        try:
            set_policy(clients, call, names, target, policy)
            return True
        except AlreadyExists:  # REST answers a stale etag with 409; read again and re-apply
            if attempt == attempts:
                raise
    return False  # pragma: no cover
