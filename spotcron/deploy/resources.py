"""What deploy manages, as plain data: one `Resource` per Google Cloud object.

Desired and actual state are both `Inventory` (a dict keyed by (type, name)) holding `Resource`s
whose `fields` are plain comparable values (str, int, bool, tuples, dicts of those). The
planner compares fields and nothing else; `meta` carries what the executor needs but the
planner must ignore (server-assigned names, URLs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spotcron.core.images import BUILD_LOGS_PREFIX
from spotcron.core.images import SOURCE_PREFIX as BUILD_CONTEXT_PREFIX
from spotcron.core.layout import DIGESTS, LIMITS, RUNS, TOKENS
from spotcron.core.names import MANAGED_LABEL
from spotcron.core.overrides import PREFIX as OVERRIDES_PREFIX

MANAGED_LABELS = {MANAGED_LABEL: "1"}
NAME_PREFIX = "spotcron-"  # scheduler entries carry no labels: this prefix marks ours
SOURCE_PREFIX = "deploy/source-"  # function source archives in the results bucket

BUCKET = "bucket"
TOPIC = "topic"
SERVICE_ACCOUNT = "service_account"
IAM_POLICY = "iam_policy"
SOURCE = "source"
FUNCTION = "function"
SCHEDULER_JOB = "scheduler_job"
REPOSITORY = "repository"  # the Artifact Registry repository (Docker) of function and job images
FIREWALL = "firewall"  # the rule that denies all ingress to job VMs (their network tag)
SUBNETWORK = "subnetwork"  # the region's subnet of the VMs' network: Private Google Access on
API = "api"  # a Google API the stack calls, enabled through Service Usage
DEPLOYED_SPEC = "deployed_spec"  # deployed/JOB.json: the spec start_job runs (engine/deployed.py)
DIGEST_KEY = "spotcron-digest"  # a deployed spec's custom metadata: its sha256, read back from listings
# ... and the job's own service account, if it names one: a later deploy that no longer names it
# learns from the listing whose bindings to revoke.
ACCOUNT_KEY = "spotcron-account"

# deploy/retired/EMAIL: a job's own account no job names any more, until deploy has revoked what
# it granted it (deploy/retirement.py).
RETIRED_ACCOUNT = "retired_account"
ALERT_POLICY = "alert_policy"  # Cloud Monitoring's log-based policy on failed runs (`alerts:`, deploy/alerts.py)

TYPES = (API, BUCKET, TOPIC, SERVICE_ACCOUNT, REPOSITORY, FIREWALL, SUBNETWORK, IAM_POLICY, SOURCE, FUNCTION, SCHEDULER_JOB,
         DEPLOYED_SPEC, ALERT_POLICY, RETIRED_ACCOUNT)

# Object prefixes whose lifecycle Delete rules deploy writes on the results bucket; every other rule
# there is someone else's and is neither compared nor replaced. build-logs/ is an earlier deploy's
# (the job builds' logs have a bucket of their own now): known, so that its rule is removed.
LIFECYCLE_PREFIXES = frozenset({RUNS, TOKENS, LIMITS, DIGESTS, BUILD_LOGS_PREFIX, OVERRIDES_PREFIX, BUILD_CONTEXT_PREFIX})


def managed_lifecycle_rule(rule: Mapping[str, Any], whole: bool = False) -> bool:
    """True for a bucket lifecycle rule (REST JSON) that deploy manages: Delete on our prefixes only,
    or any rule at all on a bucket that is wholly deploy's (`whole`: the bucket of build logs,
    whose settings a job's build may change and deploy puts back)."""
    if whole:
        return True
    prefixes = rule.get("condition", {}).get("matchesPrefix") or []
    return rule.get("action", {}).get("type") == "Delete" and bool(prefixes) \
        and set(prefixes) <= LIFECYCLE_PREFIXES


# Fields used when a resource is created but never compared afterwards: Google cannot change
# them in place (bucket location) or they are cosmetic (service account display name).
CREATE_ONLY: Mapping[str, frozenset[str]] = {
    BUCKET: frozenset({"location"}),
    SERVICE_ACCOUNT: frozenset({"display_name"}),
    REPOSITORY: frozenset({"format"}),
}

# Deploy never deletes these even when nothing wants them any more: the bucket holds every
# run's results, the repository the job images, and a deleted service account's name cannot
# be reused cleanly (bindings follow the account's unique id, not its email).
# The subnet is the network's, not ours: deploy only turns Private Google Access on.
# An API stays enabled: others in the project may use it.
NEVER_DELETED = frozenset({API, BUCKET, SERVICE_ACCOUNT, REPOSITORY, IAM_POLICY, SUBNETWORK})


@dataclass(frozen=True)
class Resource:
    type: str
    name: str
    fields: Mapping[str, Any]
    # Actual state only: True when the resource carries our label or prefix, so deploy may
    # delete it once no job or setting wants it. Desired resources leave it False.
    owned: bool = False
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.type, self.name)


Inventory = dict[tuple[str, str], Resource]


def index(resources: Iterable[Resource]) -> Inventory:
    """The Inventory for `resources`; a duplicate key is a bug in the caller, so it raises."""
    state: Inventory = {}
    for resource in resources:
        if resource.key in state:
            raise ValueError(f"two resources named {resource.type} {resource.name}")
        state[resource.key] = resource
    return state


# IAM policy resources are named "KIND:ID" after the object the policy sits on.
POLICY_PROJECT = "project"
POLICY_BUCKET = "bucket"
POLICY_TOPIC = "topic"
POLICY_SERVICE_ACCOUNT = "service_account"
POLICY_FUNCTION = "function"  # the Cloud Run service behind a 2nd gen function
POLICY_REPOSITORY = "repository"  # an Artifact Registry repository
POLICY_SECRET = "secret"  # a Secret Manager secret, by its full name projects/P/secrets/S


def policy_name(kind: str, ident: str) -> str:
    return f"{kind}:{ident}"


def split_policy_name(name: str) -> tuple[str, str]:
    kind, _, ident = name.partition(":")
    return kind, ident


def phase(resource_type: str, name: str, kind: str) -> int:
    """When an action runs: everything in phase N finishes before phase N+1 starts.

    Creates and updates go APIs (phase -1, before anything that needs them) →
    bucket/topics/accounts/repository → IAM, source and deployed specs → functions →
    invoker bindings and scheduler entries (so no tick fires before its function and its spec can
    take it); deletions run last, scheduler entries and functions before topics, old sources and
    the deployed specs of removed jobs.
    """
    if kind == "delete":
        return 4 if resource_type in (SCHEDULER_JOB, FUNCTION) else 5
    if resource_type == API:
        return -1
    if resource_type in (BUCKET, TOPIC, SERVICE_ACCOUNT, REPOSITORY, FIREWALL, SUBNETWORK, RETIRED_ACCOUNT):
        return 0
    if resource_type == IAM_POLICY:
        return 3 if split_policy_name(name)[0] == POLICY_FUNCTION else 1
    if resource_type in (SOURCE, DEPLOYED_SPEC):
        return 1
    if resource_type == FUNCTION:
        return 2
    return 3
