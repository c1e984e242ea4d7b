"""Actual state: what exists on Google Cloud, read with one LIST per kind of resource.

Scheduler entries, topics, functions and service accounts are each one paged list call (never
a get per job); the bucket, the source archives and the IAM policies of the resources deploy
manages add a fixed handful. The number of calls does not grow with the number of jobs beyond
list pages (500 scheduler entries per page).

Each API object is turned into the same plain fields that desired.py produces, keeping only
what deploy manages (our label key, the lifecycle rule on runs/, our accounts' bindings), so
that anything else on the object never shows up as a difference.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from spotcron.core.errors import NotFound, SpotcronError
from spotcron.core.layout import DEPLOYED
from spotcron.deploy.desired import cleanup_read
from spotcron.deploy.iam import conditions, managed_members, managed_roles
from spotcron.deploy.naming import Names, function_id, member
from spotcron.deploy.policies import get_policy, managed_view, whole_view
from spotcron.deploy.repository_owners import owner_problem
from spotcron.deploy.resources import (
    ACCOUNT_KEY,
    ALERT_POLICY,
    API,
    BUCKET,
    DEPLOYED_SPEC,
    DIGEST_KEY,
    FIREWALL,
    FUNCTION,
    IAM_POLICY,
    MANAGED_LABEL,
    NAME_PREFIX,
    POLICY_BUCKET,
    POLICY_FUNCTION,
    POLICY_PROJECT,
    POLICY_REPOSITORY,
    POLICY_SECRET,
    POLICY_SERVICE_ACCOUNT,
    POLICY_TOPIC,
    REPOSITORY,
    RETIRED_ACCOUNT,
    SCHEDULER_JOB,
    SERVICE_ACCOUNT,
    SOURCE,
    SOURCE_PREFIX,
    SUBNETWORK,
    TOPIC,
    Inventory,
    Resource,
    index,
    managed_lifecycle_rule,
    policy_name,
    split_policy_name,
)
from spotcron.deploy.retirement import PREFIX as RETIRED_PREFIX
from spotcron.deploy.retirement import recorded
from spotcron.gcp.admin.calls import AccessDenied, Caller, DeployError
from spotcron.gcp.admin.clients import Clients
from spotcron.gcp.admin.iam_calls import Policy

# Variables Google adds to every 2nd gen function; not ours, never a difference.
SERVER_ADDED_ENV = frozenset({"LOG_EXECUTION_ID"})
SCHEDULER_PAGE = 500  # the API's maximum


@dataclass(frozen=True)
class Actual:
    state: Inventory
    job_done_url: str  # the deployed job_done's URL, "" while it does not exist
    credentials_url: str = ""  # the same for the credentials broker
    accounts: frozenset[str] = frozenset()  # every service account of the project (emails)
    # The jobs' own accounts the deployed specs name, and those a record of retirement keeps
    # until deploy has revoked what it granted them (deploy/retirement.py).
    deployed_accounts: frozenset[str] = frozenset()
    project_number: str = ""  # from Service Usage's names; "" if it could not tell
    apis: frozenset[str] = frozenset()  # the APIs enabled in the project
    # Every role the jobs' own accounts (and ours) hold on the project, whoever granted it, by
    # member: deploy refuses a job that runs as an account holding the project (account_breadth.py).
    project_roles: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # The same on each of spotcron's accounts' own policies, by account (email), then member: a job
    # whose account may act as one of them is refused too (account_breadth.py).
    account_roles: Mapping[str, Mapping[str, frozenset[str]]] = field(default_factory=dict)


# The API each reader calls: while it is not enabled, nothing of that kind can exist yet, so the
# reader is skipped (reading would fail with SERVICE_DISABLED) and deploy enables it first.
READER_APIS = {"bucket": "storage.googleapis.com", "objects": "storage.googleapis.com",
               "topics": "pubsub.googleapis.com", "accounts": "iam.googleapis.com",
               "functions": "cloudfunctions.googleapis.com", "scheduler": "cloudscheduler.googleapis.com",
               "repository": "artifactregistry.googleapis.com", "network": "compute.googleapis.com"}
POLICY_APIS = {"project": "cloudresourcemanager.googleapis.com", POLICY_BUCKET: "storage.googleapis.com",
               POLICY_TOPIC: "pubsub.googleapis.com", POLICY_SERVICE_ACCOUNT: "iam.googleapis.com",
               POLICY_FUNCTION: "run.googleapis.com", POLICY_REPOSITORY: "artifactregistry.googleapis.com",
               POLICY_SECRET: "secretmanager.googleapis.com"}


def _labels(labels: Any) -> dict[str, str]:
    return {k: v for k, v in dict(labels or {}).items() if k == MANAGED_LABEL}


def _owned(labels: Any) -> bool:
    return dict(labels or {}).get(MANAGED_LABEL) == "1"


def bucket_fields(bucket: Any, whole: bool = False) -> dict[str, Any]:
    """The bucket's managed settings; `whole`: every lifecycle rule is deploy's (the build logs' bucket)."""
    rules = [dict(r) for r in bucket.lifecycle_rules if managed_lifecycle_rule(dict(r), whole)]
    return {
        "location": (bucket.location or "").lower(),
        "uniform_access": bool(bucket.iam_configuration.uniform_bucket_level_access_enabled),
        "public_access_prevention": bucket.iam_configuration.public_access_prevention,
        # Any other condition a rule has makes it differ from ours: it is replaced.
        "lifecycle": tuple(_lifecycle_rule(r) for r in rules),
        "versioning": bool(bucket.versioning_enabled),
        "labels": _labels(bucket.labels),
        **(_logs_bucket_fields(bucket) if whole else {}),
    }


def _logs_bucket_fields(bucket: Any) -> dict[str, Any]:
    """The settings of the build logs' bucket a build's Storage Admin may change to keep or divert
    logs (docs/security.md, "Limits of what is built" (3)); deploy puts each back."""
    logging = bucket.get_logging() or {}
    return {
        "soft_delete_s": bucket.soft_delete_policy.retention_duration_seconds,
        "retention_s": bucket.retention_period,
        "event_based_hold": bool(bucket.default_event_based_hold),
        "kms_key": bucket.default_kms_key_name or None,
        "usage_logs": logging.get("logBucket") or None,
        "requester_pays": bool(bucket.requester_pays),
    }



def _check_bucket_project(bucket: Any, project_number: str, logs: bool) -> None:
    """Refuse a bucket of another project, and a logs bucket whose logs can no longer be deleted.

    Bucket names are global: the job build account's Storage Admin may delete the logs bucket and
    its author create one of that name in a project of theirs; the bucket's `projectNumber`
    (https://cloud.google.com/storage/docs/json_api/v1/buckets) tells. A locked retention policy
    cannot be removed or shortened (https://cloud.google.com/storage/docs/bucket-lock)."""
    owner = str(bucket.project_number or "")
    if project_number and owner and owner != project_number:
        raise DeployError(
            f"bucket {bucket.name!r} belongs to project number {owner}, not to this stack's project "
            f"({project_number}); deploy never uses another project's bucket"
            f"{' for build logs (a job build may have deleted the bucket and someone re-created its name)' if logs else ''}: "
            f"set another `bucket:` in the stack file")
    if logs and bucket.retention_policy_locked:
        raise DeployError(
            f"bucket {bucket.name!r} (the job images' build logs) has a locked retention policy of "
            f"{bucket.retention_period}s: its logs can no longer be deleted, so deploy builds no image "
            f"with it; set another `bucket:` in the stack file (docs/security.md, Limits of what is built)")


def _lifecycle_rule(rule: dict[str, Any]) -> tuple[Any, ...]:
    """(action, age, prefixes) of a Delete-by-age rule; any other rule as its JSON, which matches none of ours."""
    action, condition = dict(rule.get("action") or {}), dict(rule.get("condition") or {})
    if set(action) == {"type"} and set(condition) <= {"age", "matchesPrefix"}:
        return (action["type"], condition.get("age"), tuple(condition.get("matchesPrefix") or ()))
    return ("other", json.dumps(rule, sort_keys=True, default=str), ())


def function_fields(fn: Any) -> dict[str, Any]:
    build, service, trigger = fn.build_config, fn.service_config, fn.event_trigger
    storage = build.source.storage_source
    return {
        "entry_point": build.entry_point,
        "runtime": build.runtime,
        "source": f"gs://{storage.bucket}/{storage.object_}",
        "build_account": build.service_account.rsplit("/", 1)[-1],
        "docker_repository": build.docker_repository,
        "service_account": service.service_account_email,
        "environment": {k: v for k, v in service.environment_variables.items() if k not in SERVER_ADDED_ENV},
        "ingress": service.ingress_settings.name,
        "memory": service.available_memory,
        "timeout": service.timeout_seconds,
        "max_instances": service.max_instance_count,
        "trigger": {
            "event_type": trigger.event_type,
            "pubsub_topic": trigger.pubsub_topic,
            "service_account": trigger.service_account_email,
            "retry_policy": trigger.retry_policy.name,
        } if trigger.event_type else None,
        "labels": _labels(fn.labels),
    }


def _relative(url: str) -> str:
    """`https://www.googleapis.com/compute/v1/projects/P/global/networks/default` → `global/networks/default`."""
    return url[url.index("global/"):] if "global/" in url else url


def firewall_fields(rule: dict[str, Any]) -> dict[str, Any]:
    """A Firewall (REST JSON) as desired.py spells a rule."""
    return {
        "network": _relative(rule.get("network", "")),
        "direction": rule.get("direction", "INGRESS"),
        "priority": int(rule.get("priority", 1000)),
        "denied": tuple(d.get("IPProtocol", "") for d in rule.get("denied") or ()),
        "source_ranges": tuple(rule.get("sourceRanges") or ()),
        "target_tags": tuple(rule.get("targetTags") or ()),
        "description": rule.get("description", ""),
    }


def scheduler_fields(job: Any) -> dict[str, Any]:
    target, retry = job.pubsub_target, job.retry_config
    return {
        "description": job.description,
        "schedule": job.schedule,
        "time_zone": job.time_zone,
        "topic": target.topic_name,
        "data": bytes(target.data).decode("utf-8", "replace"),
        "paused": job.state.name == "PAUSED",
        "retry": {
            "retry_count": retry.retry_count,
            "min_backoff_s": int(retry.min_backoff_duration.total_seconds()),
            "max_backoff_s": int(retry.max_backoff_duration.total_seconds()),
            "max_doublings": retry.max_doublings,
        },
    }


class _Reader:
    def __init__(self, clients: Clients, call: Caller, names: Names, desired: Inventory):
        self.clients, self.call, self.names, self.desired = clients, call, names, desired
        self.timeout = clients.timeout
        self.listed_accounts: frozenset[str] = frozenset()
        # The jobs' own accounts: their bindings in managed roles are compared like ours.
        self.members = managed_members(names) | {m for (kind, _), r in desired.items() if kind == IAM_POLICY
                                                  for ms in r.fields.values() for m in ms} \
            | {member(r.meta["retired"]) for (kind, _), r in desired.items() if kind == IAM_POLICY
               and r.meta.get("retired")}
        self.deployed_accounts: frozenset[str] = frozenset()
        self.project_number = ""  # once apis() has read it: the source-copy condition names it
        self.project_roles: dict[str, frozenset[str]] = {}
        self.account_roles: dict[str, dict[str, frozenset[str]]] = {}

    def apis(self) -> tuple[list[Resource], frozenset[str], str]:
        """The wanted APIs that are enabled, every enabled API, and the project's number."""
        services = self.call("list the enabled APIs", self.clients.serviceusage.enabled, self.names.project)
        enabled = frozenset(str((s.get("config") or {}).get("name") or s.get("name", "").rsplit("/", 1)[-1])
                            for s in services)
        number = next((s["name"].split("/")[1] for s in services
                       if str(s.get("name", "")).startswith("projects/") and s["name"].split("/")[1].isdigit()), "")
        found = [Resource(API, name, {}) for (kind, name) in self.desired if kind == API and name in enabled]
        return found, enabled, number

    def bucket(self) -> list[Resource]:
        """The results bucket and the bucket of build logs (when the desired state has one)."""
        wanted = [self.names.bucket] + [name for (kind, name) in self.desired
                                        if kind == BUCKET and name == self.names.build_logs_bucket]
        return [found for name in wanted for found in self._one_bucket(name)]

    def _one_bucket(self, name: str) -> list[Resource]:
        try:
            bucket = self.call(f"read bucket {name}", self.clients.storage.get_bucket,
                               name, retry=None, timeout=self.timeout)
        except NotFound:
            return []
        except AccessDenied as exc:
            raise DeployError(
                f"bucket {name!r} exists but this account cannot read it; bucket names are "
                f"global, so it probably belongs to another project: set another `bucket:` in the "
                f"stack file") from exc
        whole = name == self.names.build_logs_bucket
        _check_bucket_project(bucket, self.project_number, whole)
        return [Resource(BUCKET, bucket.name, bucket_fields(bucket, whole), owned=_owned(bucket.labels))]

    def objects(self) -> list[Resource]:
        """Source archives (deploy/source-*) and deployed specs (deployed/*), in one listing.

        A deployed spec's digest rides in its custom metadata, which listings return: no read per job.
        """
        prefix = _common_prefix(SOURCE_PREFIX, DEPLOYED)
        blobs = self.call("list source archives and deployed specs", lambda: list(self.clients.storage.list_blobs(
            self.names.bucket, prefix=prefix, retry=None, timeout=self.timeout)))
        out = [Resource(SOURCE, b.name, {}, owned=True) for b in blobs if b.name.startswith(SOURCE_PREFIX)]
        out += [Resource(DEPLOYED_SPEC, b.name, {"digest": (b.metadata or {}).get(DIGEST_KEY)}, owned=True)
                for b in blobs if b.name.startswith(DEPLOYED)]
        out += [Resource(RETIRED_ACCOUNT, b.name, {}, owned=True) for b in blobs if b.name.startswith(RETIRED_PREFIX)]
        self.deployed_accounts = frozenset(str((b.metadata or {})[ACCOUNT_KEY]) for b in blobs
                                           if b.name.startswith(DEPLOYED) and (b.metadata or {}).get(ACCOUNT_KEY)) \
            | recorded(b.name for b in blobs)
        return out

    def topics(self) -> list[Resource]:
        project = f"projects/{self.names.project}"
        topics = self.call("list topics", lambda: list(self.clients.publisher.list_topics(
            project=project, retry=None, timeout=self.timeout)))
        out = []
        for topic in topics:
            ident = topic.name.rsplit("/", 1)[-1]
            if _owned(topic.labels) or (TOPIC, ident) in self.desired:
                out.append(Resource(TOPIC, ident, {"labels": _labels(topic.labels)}, owned=_owned(topic.labels)))
        return out

    def accounts(self) -> list[Resource]:
        accounts = self.call("list service accounts", lambda: list(self.clients.iam.list_service_accounts(
            name=f"projects/{self.names.project}", retry=None, timeout=self.timeout)))
        self.listed_accounts = frozenset(a.email for a in accounts)  # jobs' own accounts must be among them
        return [Resource(SERVICE_ACCOUNT, a.email, {"display_name": a.display_name})
                for a in accounts if (SERVICE_ACCOUNT, a.email) in self.desired]

    def repository(self) -> list[Resource]:
        """The repositories deploy wants, and those whose policy it must see (an account no job
        names any more: its repository's bindings go, the repository stays), one get each."""
        wanted = {self.names.repository, self.names.jobs_repository, self.names.built_repository}
        wanted |= {name for kind, name in self.desired if kind == REPOSITORY}
        wanted |= {split_policy_name(name)[1] for kind, name in self.desired
                   if kind == IAM_POLICY and split_policy_name(name)[0] == POLICY_REPOSITORY}
        out = []
        for name in sorted(wanted):
            path = f"{self.names.location_path}/repositories/{name}"
            try:
                repo = self.call(f"read repository {name}", self.clients.registry.get_repository, path)
            except NotFound:
                continue
            if repo.get("format", "DOCKER") != "DOCKER":
                raise DeployError(f"repository {path} exists but holds {repo.get('format')} packages, not container "
                                  f"images; set another `repository:` in the stack file")
            desired = self.desired.get((REPOSITORY, name))
            account = desired.meta.get("account") if desired is not None else None
            problem = owner_problem(path, repo.get("description"), account) if account else None
            if problem:
                raise DeployError(problem)
            out.append(Resource(REPOSITORY, name, {
                "format": "DOCKER", "labels": _labels(repo.get("labels")),
                "cleanup": cleanup_read(repo.get("cleanupPolicies")),
                "cleanup_dry_run": bool(repo.get("cleanupPolicyDryRun", False))}, owned=_owned(repo.get("labels"))))
        return out

    def network(self) -> list[Resource]:
        """The firewall rules and the subnet deploy wants, one get each (two rules, one subnet)."""
        found = []
        project = self.names.project
        for kind, name in self.desired:
            if kind not in (FIREWALL, SUBNETWORK):
                continue
            path = f"projects/{project}/global/firewalls/{name}" if kind == FIREWALL else name
            try:
                got = self.call(f"read {kind} {name}", self.clients.network.get, path)
            except NotFound:
                if kind == SUBNETWORK:
                    region = name.split("/regions/", 1)[-1].split("/", 1)[0]
                    raise MissingSubnet(f"{name} does not exist: job VMs join the stack's network (`network:` and "
                                      f"`subnetwork:` in the stack file), which needs that subnet in region "
                                      f"{region}; create it, name another network or subnet, or remove {region} "
                                      f"from the stack's `region:` or `placement.regions` (spotcron doctor "
                                      f"checks this before deploy)" + (
                                          "; if Compute Engine's API was enabled minutes ago, Google may still be "
                                          "creating the default network: run deploy again in a few minutes"
                                          if "/subnetworks/default" in name else "")) from None
                continue
            if kind == FIREWALL:
                found.append(Resource(FIREWALL, name, firewall_fields(got), owned=name.startswith(NAME_PREFIX)))
            else:
                found.append(Resource(SUBNETWORK, name, {"private_ip_google_access": bool(
                    got.get("privateIpGoogleAccess"))}, meta={"fingerprint": got.get("fingerprint")}))
        return found

    def alert_policies(self) -> list[Resource]:
        """spotcron's alert policies; read only when one is wanted or may exist (a project
        without the Monitoring API enabled, and no `alerts:`, is never asked)."""
        from spotcron.deploy.alerts import actual_policies

        wanted = any(kind == ALERT_POLICY for kind, _ in self.desired)
        try:
            policies = self.call("list alert policies",
                                 lambda: self.clients.monitoring.list_alert_policies(self.names.project))
        except SpotcronError:
            if wanted:
                raise
            # Nothing wanted, and Monitoring does not answer (its API not enabled, no permission):
            # deploy goes on; a policy of ours left there is deleted by the first deploy that can see it.
            return []
        return actual_policies(policies)

    def functions(self) -> list[Resource]:
        functions = self.call("list functions", lambda: list(self.clients.functions.list_functions(
            parent=self.names.location_path, retry=None, timeout=self.timeout)))
        out = []
        for fn in functions:
            ident = fn.name.rsplit("/", 1)[-1]
            if _owned(fn.labels) or (FUNCTION, ident) in self.desired:
                fields = function_fields(fn)
                # A function whose last deploy failed must be deployed again even if its fields match.
                fields["healthy"] = fn.state.name != "FAILED"
                out.append(Resource(FUNCTION, ident, fields, owned=_owned(fn.labels),
                                    meta={"url": fn.service_config.uri or fn.url, "state": fn.state.name}))
        return out

    def scheduler(self) -> list[Resource]:
        jobs = self.call("list scheduler jobs", lambda: list(self.clients.scheduler.list_jobs(
            request={"parent": self.names.location_path, "page_size": SCHEDULER_PAGE},
            retry=None, timeout=self.timeout)))
        out = []
        for job in jobs:
            ident = job.name.rsplit("/", 1)[-1]
            if ident.startswith(NAME_PREFIX):
                out.append(Resource(SCHEDULER_JOB, ident, scheduler_fields(job), owned=True))
        return out

    def policy(self, target: str) -> list[Resource]:
        try:
            policy = get_policy(self.clients, self.call, self.names, target)
        except NotFound:
            return []
        kind, ident = split_policy_name(target)
        if kind == POLICY_PROJECT:
            self.project_roles = self._held(policy)
        elif kind == POLICY_SERVICE_ACCOUNT and ident in self.names.accounts:
            self.account_roles[ident] = self._held(policy)
        if target == policy_name(POLICY_BUCKET, self.names.build_logs_bucket):
            return [Resource(IAM_POLICY, target, whole_view(policy, self.names.project,
                                                               conditions(self.names, self.project_number)))]
        view = managed_view(policy, frozenset(self.members), managed_roles(self.names),
                            conditions(self.names, self.project_number))
        return [Resource(IAM_POLICY, target, view)]


    def _held(self, policy: Policy) -> dict[str, frozenset[str]]:
        """The roles each of our and the jobs' accounts holds on `policy`, under any condition."""
        held: dict[str, set[str]] = {}
        for binding in policy.get("bindings", []):
            for m in binding.get("members", []):
                if m in self.members:
                    held.setdefault(m, set()).add(str(binding.get("role", "")))
        return {m: frozenset(roles) for m, roles in held.items()}

    def account_policy(self, email: str) -> list[Resource]:
        """Reads one of spotcron's accounts' policy for account_roles only (deploy grants nothing
        there, so nothing of it is compared)."""
        target = policy_name(POLICY_SERVICE_ACCOUNT, email)
        with contextlib.suppress(NotFound):  # deleted since it was listed: nothing to act as
            self.account_roles[email] = self._held(get_policy(self.clients, self.call, self.names, target))
        return []


def _common_prefix(a: str, b: str) -> str:
    size = 0
    while size < min(len(a), len(b)) and a[size] == b[size]:
        size += 1
    return a[:size]


def _parent_exists(target: str, found: Inventory, names: Names, accounts: frozenset[str] = frozenset()) -> bool:
    """Whether the resource a policy sits on exists (else reading its policy is a wasted call)."""
    kind, ident = split_policy_name(target)
    if kind == POLICY_BUCKET:
        return (BUCKET, ident) in found
    if kind == POLICY_TOPIC:
        return (TOPIC, ident) in found
    if kind == POLICY_SERVICE_ACCOUNT:
        return (SERVICE_ACCOUNT, ident) in found or ident in accounts or not names.own_account(ident)
    if kind == POLICY_REPOSITORY:
        return (REPOSITORY, ident) in found
    if kind == POLICY_FUNCTION:
        return (FUNCTION, ident) in found
    return True


class MissingSubnet(DeployError):
    """A subnet job VMs need does not exist (or not yet: Google makes the `default` network when
    Compute Engine's API is enabled)."""


def read_actual(clients: Clients, call: Caller, names: Names, desired: Inventory, pool: ThreadPoolExecutor) -> Actual:
    """Everything deploy manages that exists now: the enabled APIs, then two parallel waves of
    the kinds whose API is enabled."""
    reader = _Reader(clients, call, names, desired)
    apis, enabled, number = reader.apis()
    reader.project_number = number
    call.project_number = call.project_number or number  # SERVICE_DISABLED names a project by number
    targets = [name for (kind, name) in desired if kind == IAM_POLICY]
    first: list[Callable[[], list[Resource]]] = [
        f for f in (reader.bucket, reader.topics, reader.accounts, reader.functions, reader.scheduler,
                    reader.repository, reader.network) if READER_APIS[f.__name__] in enabled]
    first.append(reader.alert_policies)  # asks Monitoring only when a policy is wanted (or answers nothing)
    found = index([*apis, *(r for batch in pool.map(lambda f: f(), first) for r in batch)])
    second: list[Callable[[], list[Resource]]] = []
    if (BUCKET, names.bucket) in found:
        second.append(reader.objects)
    second += [lambda t=t: reader.policy(t) for t in targets
               if POLICY_APIS[split_policy_name(t)[0]] in enabled
               and _parent_exists(t, found, names, reader.listed_accounts)]
    # With a job running as an account of its own, spotcron's accounts' policies are read too,
    # those deploy grants nothing on included: one that lets the job's account act as them is refused.
    if any(split_policy_name(t)[0] == POLICY_SERVICE_ACCOUNT and split_policy_name(t)[1] not in names.accounts
           for t in targets) and POLICY_APIS[POLICY_SERVICE_ACCOUNT] in enabled:
        second += [lambda e=e: reader.account_policy(e) for e in names.accounts
                   if (SERVICE_ACCOUNT, e) in found and policy_name(POLICY_SERVICE_ACCOUNT, e) not in targets]
    for batch in pool.map(lambda f: f(), second):
        for resource in batch:
            found[resource.key] = resource
    job_done = found.get((FUNCTION, function_id("job_done")))
    broker = found.get((FUNCTION, function_id("credentials")))
    return Actual(found, str(job_done.meta.get("url", "")) if job_done else "",
                  str(broker.meta.get("url", "")) if broker else "", reader.listed_accounts, reader.deployed_accounts,
                  number, enabled, reader.project_roles, reader.account_roles)

