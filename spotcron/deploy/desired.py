"""Desired state: what Settings and the job specs say should exist on Google Cloud. Pure."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from spotcron.core.images import SOURCE_PREFIX as BUILD_CONTEXT_PREFIX
from spotcron.core.layout import DIGESTS, LIMITS, RUNS, TOKENS, deployed_spec
from spotcron.core.overrides import KEEP_DAYS as OVERRIDES_KEEP_DAYS
from spotcron.core.overrides import PREFIX as OVERRIDES_PREFIX
from spotcron.core.settings import ENV_PREFIX, Settings
from spotcron.core.spec import JobSpec
from spotcron.deploy.alerts import alert_policies
from spotcron.deploy.iam import Binding, bindings, conditions, job_accounts
from spotcron.deploy.naming import DISPATCH_ENTRY, FUNCTIONS, SWEEP_ENTRY, Names, scheduler_entry
from spotcron.deploy.resources import (
    API,
    BUCKET,
    DEPLOYED_SPEC,
    FIREWALL,
    FUNCTION,
    IAM_POLICY,
    MANAGED_LABELS,
    POLICY_REPOSITORY,
    POLICY_SERVICE_ACCOUNT,
    REPOSITORY,
    SCHEDULER_JOB,
    SERVICE_ACCOUNT,
    SOURCE,
    SUBNETWORK,
    TOPIC,
    Inventory,
    Resource,
    index,
    policy_name,
)
from spotcron.engine.deployed import canonical, digest_of, specs_version, start_message
from spotcron.gcp.admin.calls import MONITORING_API, REQUIRED_APIS

RUNTIME = "python312"
PUBSUB_EVENT = "google.cloud.pubsub.topic.v1.messagePublished"
# Each function's memory: its measured peak RSS through a cold start and first request
# (bench/function_memory.py, BENCHMARKS.md "Function memory") with at least half again as headroom,
# rounded up to a size Cloud Run functions offer. Those that load Google's Compute Engine client peak
# near 195 MB, past what 256M leaves for the runtime and a second request's buffers.
MEMORY = {"start_job": "512M", "sweep": "512M", "job_done": "512M", "credentials": "512M", "dispatch": "256M"}
# start_job must answer well inside Cloud Scheduler's and Pub/Sub's deadlines; the sweep may
# walk many VMs and records; job_done deletes one VM.
# The dispatcher must be done well inside its minute; two may overlap, and its cursor's
# precondition keeps them from doubling a tick.
TIMEOUT_S = {"start_job": 120, "sweep": 300, "job_done": 120, "dispatch": 50, "credentials": 30}
MAX_INSTANCES = {"start_job": 20, "sweep": 1, "job_done": 20, "dispatch": 2, "credentials": 20}
# A failed start is retried by Pub/Sub (the run id makes it idempotent and starting_deadline
# bounds it); a failed sweep is not, the next tick comes anyway; nor a failed dispatch, whose
# cursor went back so that the next minute catches up.
RETRY_POLICY = {"start_job": "RETRY_POLICY_RETRY", "sweep": "RETRY_POLICY_DO_NOT_RETRY",
                "dispatch": "RETRY_POLICY_DO_NOT_RETRY"}
SWEEP_DATA = json.dumps({"sweep": True}, separators=(",", ":"))
# Settings only deploy reads: left out of the functions' environment, so that switching modes
# does not rebuild every function.
DEPLOY_ONLY_SETTINGS = frozenset({"scheduling", "dispatch_topic", "repository", "alerts", "image_versions_kept"})
# Cloud Scheduler does not retry a failed publish by default (retryCount 0), so one Pub/Sub hiccup
# would lose the tick. Retries stop at the entry's next fire time, so a retried message still
# maps to the same tick, and start_job's starting_deadline still bounds how late a run starts.
SCHEDULER_RETRY = {"retry_count": 3, "min_backoff_s": 10, "max_backoff_s": 60, "max_doublings": 3}
UTC = "Etc/UTC"


def function_environment(settings: Settings, job_done_url: str, credentials_url: str = "") -> dict[str, str]:
    """SPOTCRON_* variables that let the functions rebuild these Settings with load_settings."""
    env: dict[str, str] = {}
    for name in Settings.model_fields:
        if name in DEPLOY_ONLY_SETTINGS:
            continue
        value: Any = getattr(settings, name)
        if name == "job_done_url":
            value = job_done_url
        elif name == "credentials_url":
            value = credentials_url
        if isinstance(value, tuple):
            value = ",".join(value)
        elif isinstance(value, BaseModel):  # limits: JSON, read back by settings.env_overrides
            value = value.model_dump_json()
        if value is None or value == "":  # unset (notify: none): the functions' default
            continue
        env[ENV_PREFIX + name.upper()] = str(value)
    return env


def sweep_schedule(interval_s: int) -> str:
    """A cron line firing about every `interval_s` seconds (at least a minute; see validate)."""
    minutes = max(1, round(interval_s / 60))
    if minutes == 1:
        return "* * * * *"
    if minutes < 60:
        return f"*/{minutes} * * * *"
    hours = minutes // 60
    return f"0 */{hours} * * *" if hours < 24 else "0 0 * * *"


def scheduler_data(job: JobSpec) -> str:
    """The Pub/Sub message body Cloud Scheduler publishes for `job`: its name and spec digest only.

    start_job reads the spec itself from deployed/JOB.json, so an edited scheduler entry can at
    most ask for a run of a job that was deployed, as it was deployed.
    """
    return start_message(job).decode()


def _deployed_specs(jobs: list[JobSpec]) -> list[Resource]:
    """deployed/JOB.json per job: start_job runs only these specs, the dispatcher reads them.

    resources.phase writes them before any scheduler entry and deletes a removed job's spec only
    after its entry is gone.
    """
    return [deployed_spec_resource(job) for job in jobs]


def deployed_spec_resource(job: JobSpec) -> Resource:
    """deployed/JOB.json for `job`: its canonical bytes, their digest (compared), its account."""
    data = canonical(job)
    return Resource(DEPLOYED_SPEC, deployed_spec(job.name), {"digest": digest_of(data)},
                    meta={"data": data, "service_account": job.service_account})


def _bucket(settings: Settings) -> Resource:
    return Resource(BUCKET, settings.bucket, {
        "location": settings.region,
        "uniform_access": True,
        "public_access_prevention": "enforced",
        # A replay marker guards a token only while the token is valid (an hour at most); the
        # limits' admissions are written under every day a VM's admission reaches, so they must
        # outlast the longest VM as run records do (validate holds the retention to that); a
        # digest's marker is rewritten when its spec is replaced and serves starts published
        # before that, redelivered for 7 days at most. A manual run's overrides serve only the
        # start message that names them, redelivered for 7 days at most (core/overrides.py). A job
        # image's build context serves its build only (20 minutes at most, core/images.py); one an
        # interrupted deploy left goes a day later, and deploy deletes older ones before it builds.
        "lifecycle": (("Delete", settings.results_retention_days, (RUNS,)), ("Delete", 1, (TOKENS,)),
                      ("Delete", max(3, settings.results_retention_days), (LIMITS,)), ("Delete", 8, (DIGESTS,)),
                      ("Delete", OVERRIDES_KEEP_DAYS, (OVERRIDES_PREFIX,)), ("Delete", 1, (BUILD_CONTEXT_PREFIX,))),
        "labels": dict(MANAGED_LABELS),
    })


def _build_logs_bucket(settings: Settings, names: Names) -> Resource:
    """The job images' build logs, and nothing else (core/build_logs.py): the job build account holds
    Storage Admin on it, so a job's Dockerfile may change its settings; every deploy compares them
    all (every lifecycle rule, versioning) and puts them back. Deploy deletes each log once its build
    ended (gcp/admin/cloudbuild.py); the rule deletes whatever else is there a day later, one a
    deploy interrupted mid-build left behind or anything a build wrote."""
    return Resource(BUCKET, names.build_logs_bucket, {
        "location": settings.region,
        "uniform_access": True,
        "public_access_prevention": "enforced",
        "lifecycle": (("Delete", 1, ()),),
        # Versioning on would keep every deleted log as a noncurrent version.
        "versioning": False,
        "labels": dict(MANAGED_LABELS),
        # Soft delete (on by default, seven days, https://cloud.google.com/storage/docs/soft-delete)
        # would keep each deleted log restorable by the next build's Storage Admin; 0 turns it off
        # (https://cloud.google.com/storage/docs/disable-soft-delete). A retention policy or a
        # default event-based hold would stop deploy deleting logs, a KMS key or usage logs would
        # hand them or their access to the key's or log bucket's owner, requester pays would refuse
        # Cloud Build's write of the next log (https://cloud.google.com/storage/docs/json_api/v1/buckets).
        "soft_delete_s": 0,
        "retention_s": None,
        "event_based_hold": False,
        "kms_key": None,
        "usage_logs": None,
        "requester_pays": False,
    })


# Job VMs join the stack's `network:` (engine/attempts.instance_request) and carry this tag
# (gcp/compute.NETWORK_TAG; not imported: deploy does not load the Compute adapter).
VM_TAG = "spotcron-vm"
# Ahead of every allow rule of a default network (default-allow-ssh is 65534) and of most
# rules people add (1000 by default): a lower number wins.
DENY_PRIORITY = 100


def subnetwork_name(settings: Settings, region: str) -> str:
    """The full name of the VMs' subnet in `region`: what deploy reads and turns Private Google Access on."""
    return f"projects/{settings.project}/{settings.subnetwork_path(region)}"


def _network(settings: Settings, names: Names) -> list[Resource]:
    """No ingress to a job VM from anywhere (one rule per address family: Compute does not mix
    IPv4 and IPv6 ranges in one rule), and Private Google Access on the region's subnet, so that a
    VM without an external address still pulls its image and reaches Cloud Storage and the
    functions."""
    rules = [Resource(FIREWALL, f"spotcron-deny-ingress{suffix}", {
        "network": settings.network_path,
        "direction": "INGRESS",
        "priority": DENY_PRIORITY,
        "denied": ("all",),
        "source_ranges": (ranges,),
        "target_tags": (VM_TAG,),
        "description": "spotcron: job VMs take no connections; they only call out",
    }) for suffix, ranges in (("", "0.0.0.0/0"), ("-v6", "::/0"))]
    subnet = Resource(SUBNETWORK, subnetwork_name(settings, names.region), {"private_ip_google_access": True})
    return [*rules, subnet]


def _placement_subnets(settings: Settings, jobs: Iterable[JobSpec]) -> list[Resource]:
    """Private Google Access on the subnet of every other region placement may start a job in:
    a VM there without an external address reaches Google's APIs through its own region's subnet.
    The firewall rules are global and need nothing per region."""
    from spotcron.engine.placement import regions_for

    regions = {r for job in jobs for variant in job.variants() for r in regions_for(variant, settings)}
    return [Resource(SUBNETWORK, subnetwork_name(settings, region), {"private_ip_google_access": True})
            for region in sorted(regions - {settings.region})]


# Artifact Registry keeps every pushed version for ever (each job build and each function build
# adds one) unless cleanup policies say otherwise. A keep policy "only exempts matching artifacts
# from deletion": a delete policy must exist for it to act
# (https://cloud.google.com/artifact-registry/docs/repositories/cleanup-policy-overview). So:
# delete versions older than a month, except the most recent N of each package (image).
CLEANUP_DELETE_AFTER = "2592000s"  # 30 days: no deployed spec names an image older than its last deploy's build


def cleanup_policies(keep: int) -> tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...]:
    """The repository's cleanup policies as comparable data: (id, action, fields)."""
    return (("spotcron-delete-old", "DELETE", (("condition", (("olderThan", CLEANUP_DELETE_AFTER),
                                                                ("tagState", "ANY"))),)),
            ("spotcron-keep-recent", "KEEP", (("mostRecentVersions", (("keepCount", keep),)),)))


CLEANUP_PREFIX = "spotcron-"  # the policies deploy manages; others on the repository are left alone


def cleanup_body(policies: tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...]) -> dict[str, Any]:
    """`cleanup_policies` as the Repository's `cleanupPolicies` map (REST JSON)."""
    return {ident: {"id": ident, "action": action, **{key: dict(value) for key, value in fields}}
            for ident, action, fields in policies}


def cleanup_read(found: Any) -> tuple[tuple[str, str, tuple[tuple[str, Any], ...]], ...]:
    """The managed policies of a Repository's `cleanupPolicies`, in `cleanup_policies`' shape."""
    out = []
    for ident, policy in sorted(dict(found or {}).items()):
        if not ident.startswith(CLEANUP_PREFIX) or not isinstance(policy, dict):
            continue
        fields = tuple(sorted((key, tuple(sorted(dict(value).items())))
                              for key, value in policy.items() if key in ("condition", "mostRecentVersions")
                              and isinstance(value, dict)))
        out.append((ident, str(policy.get("action", "")), fields))
    return tuple(out)


def _repositories(names: Names, keep: int, accounts: Iterable[str] = ()) -> list[Resource]:
    """The functions' repository (their builds push to it), and per account the jobs run as (the VM
    account, each job's own) the owners' repository and the built one (core/job_repositories.py):
    apart, so that a job's build writes neither the functions' images nor a prebuilt image, and a
    job's VM reads no image of jobs that run as another account. The same cleanup policies on
    each. `meta["account"]`: the account an account's repository belongs to, which its
    description records (deploy/repository_owners.py)."""
    owners = {names.jobs_repository: None, names.built_repository: None}
    for account in sorted(set(accounts)):
        owners |= {names.account_repository(account): account, names.account_built_repository(account): account}
    ids = (names.repository, *owners)
    return [Resource(REPOSITORY, name, {"format": "DOCKER", "labels": dict(MANAGED_LABELS),
                                        "cleanup": cleanup_policies(keep), "cleanup_dry_run": False},
                     meta={"account": owners[name]} if owners.get(name) else {})
            for name in ids]


def _function(logical: str, names: Names, source_object: str, env: dict[str, str]) -> Resource:
    function_id, entry_point = FUNCTIONS[logical]
    trigger = None
    if logical in RETRY_POLICY:
        topic = {"start_job": names.start_topic, "sweep": names.sweep_topic, "dispatch": names.dispatch_topic}[logical]
        trigger = {
            "event_type": PUBSUB_EVENT,
            "pubsub_topic": names.topic_path(topic),
            "service_account": names.functions_account,
            "retry_policy": RETRY_POLICY[logical],
        }
    return Resource(FUNCTION, function_id, {
        "entry_point": entry_point,
        "runtime": RUNTIME,
        "source": f"gs://{names.bucket}/{source_object}",
        "build_account": names.build_account,
        # Our repository rather than the gcf-artifacts one Cloud Functions would create: the build
        # account's writer role sits on this repository only.
        "docker_repository": names.repository_path,
        "service_account": names.functions_account,
        "environment": dict(env),
        # Reachable from anywhere (VMs call job_done over the internet) but every request needs
        # an identity token with run.invoker: nobody holds that except the accounts in iam.py.
        "ingress": "ALLOW_ALL",
        "memory": MEMORY[logical],
        "timeout": TIMEOUT_S[logical],
        "max_instances": MAX_INSTANCES[logical],
        "trigger": trigger,
        "labels": dict(MANAGED_LABELS),
        "healthy": True,  # actual.py reports False for a function whose last deploy failed
    })


def _scheduler(entry: str, names: Names, *, description: str, schedule: str, time_zone: str,
               topic: str, data: str, paused: bool) -> Resource:
    return Resource(SCHEDULER_JOB, entry, {
        "description": description,
        "schedule": schedule,
        "time_zone": time_zone,
        "topic": names.topic_path(topic),
        "data": data,
        "paused": paused,
        "retry": dict(SCHEDULER_RETRY),
    })


def policies(granted: Iterable[Binding], known: dict[str, dict[str, str]] | None = None) -> list[Resource]:
    """One iam_policy resource per target: {role: sorted members}; `known`: the conditions a
    conditional binding is written with, by title (meta: the planner does not compare them)."""
    by_target: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for b in granted:
        by_target[b.target][b.key].add(b.member)
    meta = {"conditions": known} if known else {}
    return [Resource(IAM_POLICY, target, {role: tuple(sorted(members)) for role, members in sorted(roles.items())},
                     meta=meta)
            for target, roles in sorted(by_target.items())]


def retired_policies(names: Names, retired: Iterable[str]) -> list[Resource]:
    """For accounts deployed jobs named and no job names now: their own policy, wanting nothing of
    ours on it (the functions' serviceAccountUser goes). `meta["retired"]` tells the reader to
    compare their bindings everywhere, so that the invoker and reader bindings go too."""
    out = []
    for email in sorted(set(retired)):
        out.append(Resource(IAM_POLICY, policy_name(POLICY_SERVICE_ACCOUNT, email), {}, meta={"retired": email}))
        # Its repositories stay (with the images in them: REPOSITORY is never deleted), read by
        # nobody and written by nobody: the account's reader and the job build account's writer go.
        out += [Resource(IAM_POLICY, policy_name(POLICY_REPOSITORY, repository), {}, meta={"retired": email})
                for repository in (names.account_repository(email), names.account_built_repository(email))]
    return out


def uses_placement(settings: Settings, jobs: Iterable[JobSpec]) -> bool:
    """Whether some job may run outside the stack's region (and the sweep must ask for advice)."""
    from spotcron.engine.placement import placement_applies

    return any(placement_applies(variant, settings) for job in jobs for variant in job.variants())


def desired_state(settings: Settings, jobs: Iterable[JobSpec], source_object: str, job_done_url: str,
                  credentials_url: str = "", retired_accounts: Iterable[str] = (), *,
                  project_number: str = "") -> Inventory:
    """Everything that should exist. The URLs are "" until their functions have been deployed once.

    `retired_accounts`: jobs' own accounts that deployed specs named and no job names any more.
    `project_number`: the project's number once read (the build account's source-copy grant names it)."""
    names = Names.of(settings)
    env = function_environment(settings, job_done_url, credentials_url)
    jobs = list(jobs)
    resources = [Resource(API, api, {}) for api in REQUIRED_APIS]
    if settings.alerts.failed_runs:  # the alert policy lives in Cloud Monitoring
        resources.append(Resource(API, MONITORING_API, {}))
    resources += [_bucket(settings), _build_logs_bucket(settings, names), *_repositories(names, settings.image_versions_kept, job_accounts(jobs)),
                  *_network(settings, names), *_placement_subnets(settings, jobs)]
    topics = (*names.topics, names.dispatch_topic) if names.shared else names.topics
    resources += [Resource(TOPIC, topic, {"labels": dict(MANAGED_LABELS)}) for topic in topics]
    resources += [Resource(SERVICE_ACCOUNT, email, {"display_name": f"spotcron {email.split('@')[0]}"})
                  for email in names.accounts if names.own_account(email)]
    from spotcron.deploy.secret_grants import made_accounts, notify_secret_bindings, secret_bindings

    resources += made_accounts(jobs)
    granted = policies(bindings(names, job_accounts(jobs), advice=uses_placement(settings, jobs),
                                project_number=project_number) + secret_bindings(settings, jobs)
                       + notify_secret_bindings(settings, jobs),
                       conditions(names, project_number))
    resources += granted
    resources += [r for r in retired_policies(names, retired_accounts) if r.name not in {g.name for g in granted}]
    resources.append(Resource(SOURCE, source_object, {}))
    resources += [_function(logical, names, source_object, env) for logical in names.functions]
    resources += _deployed_specs(jobs)
    resources += _shared_entries(names, jobs) if names.shared else _per_job_entries(settings, names, jobs)
    resources += alert_policies(settings)
    return index(resources)


def _per_job_entries(settings: Settings, names: Names, jobs: Iterable[JobSpec]) -> list[Resource]:
    entries = [_scheduler(scheduler_entry(job.name), names, description=job.description or f"spotcron job {job.name}",
                          schedule=job.schedule, time_zone=job.time_zone, topic=names.start_topic,
                          data=scheduler_data(job), paused=job.paused)
               for job in jobs]
    entries.append(_scheduler(
        SWEEP_ENTRY, names, description="spotcron sweep: reaps leftover VMs and lost runs",
        schedule=sweep_schedule(settings.sweep_interval), time_zone=UTC, topic=names.sweep_topic,
        data=SWEEP_DATA, paused=False))
    return entries


def dispatch_data(jobs: Iterable[JobSpec]) -> str:
    """The dispatch entry's message: the deployed set's version, so that a warm dispatcher holding
    it reads no spec (engine/dispatch_specs.py). A deploy that changes a job changes the entry."""
    return json.dumps({"dispatch": True, "specs": specs_version(jobs)}, sort_keys=True, separators=(",", ":"))


def _shared_entries(names: Names, jobs: Iterable[JobSpec]) -> list[Resource]:
    """One entry every minute for every job and the sweep. A paused job stays deployed (the
    dispatcher skips it), so pausing needs no entry of its own."""
    return [dispatch_entry(names, jobs)]


def dispatch_entry(names: Names, jobs: Iterable[JobSpec]) -> Resource:
    """The dispatch entry of scheduling: shared, its message naming the version of `jobs`."""
    return _scheduler(DISPATCH_ENTRY, names,
                      description="spotcron dispatch: starts the jobs due each minute, and the sweep",
                      schedule="* * * * *", time_zone=UTC, topic=names.dispatch_topic, data=dispatch_data(jobs),
                      paused=False)
