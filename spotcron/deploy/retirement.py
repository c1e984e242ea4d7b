"""An account no job names any more is remembered until what deploy granted it is revoked.

Deploy learns which jobs' own accounts it granted from the deployed specs (their listing's
ACCOUNT_KEY). The spec that named an account is rewritten in phase 1; the account's invoker
bindings on job_done and the credentials function are function policies, applied in phase 3,
after the functions. A deploy that stops between the two (a function that fails to build, a quota)
would leave the next deploy with no spec naming the account, and the account with its invoker
bindings for good. So before the spec changes, deploy records the account: an empty object
`deploy/retired/EMAIL` in the results bucket, created in phase 0 of any plan that still revokes
something of it. A later deploy reads the record with the specs (one listing) and keeps revoking;
once nothing of the account is left to revoke, the record is deleted (a follow-up pass of the same
deploy, apply.py). A record, not a later spec write: the spec must change in phase 1, before the
functions and the scheduler entries read it.
"""

from __future__ import annotations

from collections.abc import Iterable

from spotcron.deploy.naming import Names, member
from spotcron.deploy.planner import Action
from spotcron.deploy.resources import (
    IAM_POLICY,
    POLICY_REPOSITORY,
    POLICY_SERVICE_ACCOUNT,
    RETIRED_ACCOUNT,
    Resource,
    policy_name,
)

PREFIX = "deploy/retired/"


def record_name(email: str) -> str:
    return f"{PREFIX}{email}"


def recorded(object_names: Iterable[str]) -> frozenset[str]:
    """The accounts recorded as retired, from the names of the bucket's objects."""
    return frozenset(name[len(PREFIX):] for name in object_names if name.startswith(PREFIX) and len(name) > len(PREFIX))


def pending(names: Names, retired: Iterable[str], actions: Iterable[Action]) -> frozenset[str]:
    """The retired accounts that `actions` still revoke something of: a binding on the account
    itself or its repository, or the account as a member anywhere."""
    actions = [a for a in actions if a.resource_type == IAM_POLICY]
    out = set()
    for email in retired:
        own = {policy_name(POLICY_SERVICE_ACCOUNT, email), policy_name(POLICY_REPOSITORY, names.account_repository(email))}
        who = member(email)
        for action in actions:
            if action.name in own or any(who in set(old or ()) - set(new or ())
                                         for old, new in action.changes.values()):
                out.add(email)
                break
    return frozenset(out)


def records(accounts: Iterable[str]) -> list[Resource]:
    """The records of `accounts`, as deploy wants them to exist."""
    return [Resource(RETIRED_ACCOUNT, record_name(email), {}) for email in sorted(set(accounts))]
