"""Who may do what, as data: every IAM binding deploy grants, each with the reason it exists.

Least privilege, one account per job to do:
- functions account: runs start_job/sweep/job_done, and is the identity Eventarc uses to push
  Pub/Sub messages to start_job and sweep.
- VM account: what a job's VM runs as.
- build account: what Cloud Build runs the functions' builds as (so the default compute
  account never needs a role).
- job build account: what Cloud Build runs the job images' builds as. A job's Dockerfile runs
  with its token, so it writes only the built repositories and reads only the build contexts
  (deploy/build-*): it cannot overwrite the functions' images, their build cache, or a prebuilt
  image an owner pushed to an owners' repository.
- a job's own account (`service_account:` in its spec): what that job's VM runs as instead of
  the VM account. Its owner grants it what the job needs; deploy grants it only what spotcron's
  runner needs (pull the image, call job_done and the broker) and lets the functions account
  attach it to VMs, on that one account.

No storage or registry role is project-wide: storage roles sit on the results bucket, registry
roles on the repositories: `repository:` in the stack file holds the functions' images (only the
build account writes it, nobody else reads it); per account the jobs run as (the VM account, and
each job's own account by HASH), `repository:`-jobs[-HASH] holds the images owners push (no
spotcron account writes it, that account alone reads it) and `repository:`-built[-HASH] the images
deploy builds (only the job build account writes it, that account alone reads it; deployed specs
name them by digest). See core/job_repositories.py.

roles/compute.instanceAdmin.v1 is granted on the project rather than a custom role: it is the
narrowest predefined role that can create Spot VMs with a service account attached, and a
custom role would have to track every permission Compute Engine adds to an insert (disks,
subnetworks, images, metadata) or break VM creation silently. The functions still delete only
VMs carrying our label (nothing else is ever touched), and no one but deployers can act as the
account.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spotcron.core.images import BUILD_LOGS_PREFIX, SOURCE_PREFIX
from spotcron.deploy.naming import Names, function_id, member
from spotcron.deploy.resources import (
    POLICY_BUCKET,
    POLICY_FUNCTION,
    POLICY_PROJECT,
    POLICY_REPOSITORY,
    POLICY_SERVICE_ACCOUNT,
    POLICY_TOPIC,
    policy_name,
)

PRIMITIVE_ROLES = frozenset({"roles/owner", "roles/editor", "roles/viewer"})
PUBLIC_MEMBERS = frozenset({"allUsers", "allAuthenticatedUsers"})
# Roles that reach every bucket or every repository of the project when granted on it.
PROJECT_WIDE_FORBIDDEN = ("roles/storage.", "roles/artifactregistry.")
# The accounts Google creates by default; granting them anything widens every workload using them.
_DEFAULT_ACCOUNT = re.compile(r"^serviceAccount:(\d+-compute@developer|[^@]+@appspot)\.gserviceaccount\.com$")


# Placement's advice calls (engine/spot_advice.py, from the sweep): regions.advice.capacity and
# regions.advice.capacityHistory need these two permissions on the project. Compute Viewer is the
# narrowest predefined role that holds both; it is read-only and is granted only while placement
# is on (a custom role with just the two would be narrower, at the cost of deploy managing roles).
ADVICE_ROLE = "roles/compute.viewer"
ADVICE_PERMISSIONS = ("compute.advice.capacity", "compute.advice.capacityHistory")
# A job's account reads each of its secrets through this role, granted on the secret alone.
SECRET_ACCESSOR = "roles/secretmanager.secretAccessor"


@dataclass(frozen=True)
class Binding:
    target: str  # the policy's resource name, "KIND:ID" (see resources.policy_name)
    role: str
    member: str
    why: str
    condition: str | None = None  # the title of one of CONDITIONS: the role holds only where it is true

    @property
    def key(self) -> str:
        """How the policy resource spells it: the role, with `|TITLE` for a conditional binding."""
        return condition_key(self.role, self.condition)


CONDITION_SEPARATOR = "|"  # in no role name
# Marks the bindings under a condition of one of our titles whose expression or description is not
# the one deploy writes now (policies.managed_view): they are replaced, never kept.
OUTDATED = "outdated"
DEPLOY_SOURCE = "spotcron-deploy-source-only"
BUILD_CONTEXTS = "spotcron-build-contexts-only"
BUILD_CONTEXT_PREFIX = SOURCE_PREFIX  # deploy/build-TAG.tar.gz
# What Google's page asks of a build's own account on a user-created logs bucket: "grant the
# Storage Admin role (roles/storage.admin) to the service account used for the build" ("Store
# build logs in a user-created bucket",
# https://cloud.google.com/build/docs/securing-builds/store-view-build-logs; Cloud Build checks
# the bucket when the build is created). Granted on the bucket of build logs only, which holds
# nothing else (core/build_logs.py); deploy compares that bucket's whole policy and its settings.
BUILD_LOGS_ROLE = "roles/storage.admin"
# What earlier deploys granted the job build account for its logs in the results bucket: an
# Object Creator conditioned on the build-logs/ prefix. The title stays known and the role
# managed, so that deploy reads that binding and revokes it.
BUILD_LOGS = "spotcron-build-logs-only"
RETIRED_ROLES = frozenset({"roles/storage.objectCreator"})
SOURCE_COPY = "spotcron-functions-source-copy"
SOURCE_COPY_ROLE = "roles/storage.objectAdmin"


def source_copy_bucket(project_number: str, region: str) -> str:
    """Where Cloud Functions (2nd gen) copies a function's source before building it
    (https://cloud.google.com/functions/docs/building): one bucket per project and region,
    created by Google on the first deploy there."""
    return f"gcf-v2-sources-{project_number}-{region}"


def conditions(names: Names, project_number: str = "") -> dict[str, dict[str, str]]:
    """The IAM conditions deploy writes, by title (Google's `Expr`: title, description, expression).

    The build account reads the functions' source archives and nothing else of the results
    bucket: a Cloud Storage object's resource name is projects/_/buckets/BUCKET/objects/NAME
    (https://cloud.google.com/iam/docs/conditions-resource-attributes#resource-name).
    It also reads Cloud Functions' copy of that source, and nothing else of the project's storage:
    the one bucket of this project and region (the bucket itself, for a listing, and its objects).
    The titles are fixed; the copy's expression needs the project's number ("" when unknown).
    """
    copy = f"projects/_/buckets/{source_copy_bucket(project_number or 'PROJECT_NUMBER', names.region)}"
    return {
        DEPLOY_SOURCE: {
            "title": DEPLOY_SOURCE,
            "description": "spotcron: only the functions' source archives (deploy/)",
            "expression": f'resource.name.startsWith("projects/_/buckets/{names.bucket}/objects/deploy/")',
        },
        BUILD_CONTEXTS: {
            "title": BUILD_CONTEXTS,
            "description": "spotcron: only the job images' build contexts (deploy/build-*)",
            "expression": f'resource.name.startsWith("projects/_/buckets/{names.bucket}/objects/{BUILD_CONTEXT_PREFIX}")',
        },
        BUILD_LOGS: {
            "title": BUILD_LOGS,
            "description": "spotcron: only the job images' build logs (build-logs/); no longer granted",
            "expression": f'resource.name.startsWith("projects/_/buckets/{names.bucket}/objects/{BUILD_LOGS_PREFIX}")',
        },
        SOURCE_COPY: {
            "title": SOURCE_COPY,
            "description": "spotcron: only Cloud Functions' copy of the functions' source, which their build reads",
            "expression": f'resource.name == "{copy}" || resource.name.startsWith("{copy}/objects/")',
        },
    }


def _escape(title: str) -> str:
    return title.replace("\\", "\\\\").replace(CONDITION_SEPARATOR, "\\" + CONDITION_SEPARATOR)


def condition_key(role: str, title: str | None, outdated: bool = False) -> str:
    """The policy key of ROLE's bindings: `ROLE`, or `ROLE|TITLE` under a condition of that title,
    `ROLE|TITLE|outdated` under one of that title deploy does not write. A title is free text
    (whoever writes the binding picks it), so its `|` and `\\` are escaped with `\\`: every title,
    the empty one included, reads back as written (split_key)."""
    if title is None:
        return role
    key = f"{role}{CONDITION_SEPARATOR}{_escape(title)}"
    return f"{key}{CONDITION_SEPARATOR}{OUTDATED}" if outdated else key


def split_key(key: str) -> tuple[str, str | None, bool]:
    """(role, condition title or None, whether the key names the bindings under an outdated
    condition of that title) of a key condition_key wrote."""
    role, separator, rest = key.partition(CONDITION_SEPARATOR)
    if not separator:
        return role, None, False
    title, i = [], 0
    while i < len(rest) and rest[i] != CONDITION_SEPARATOR:
        if rest[i] == "\\" and i + 1 < len(rest):
            i += 1
        title.append(rest[i])
        i += 1
    return role, "".join(title), rest[i + 1:] == OUTDATED


def bindings(names: Names, job_accounts: Iterable[str] = (), *, advice: bool = False,
             project_number: str = "") -> list[Binding]:
    """Every binding deploy keeps in place, for the stack named by `names` and the jobs' own
    service accounts `job_accounts` (emails); `advice`: some job is placed across regions;
    `project_number`: the project's number, once read ("": the source-copy binding is left out)."""
    functions, vm, build = member(names.functions_account), member(names.vm_account), member(names.build_account)
    project = policy_name(POLICY_PROJECT, names.project)
    bucket = policy_name(POLICY_BUCKET, names.bucket)
    repository = policy_name(POLICY_REPOSITORY, names.repository)
    jobs_repository = policy_name(POLICY_REPOSITORY, names.jobs_repository)
    built_repository = policy_name(POLICY_REPOSITORY, names.built_repository)
    job_done, broker = (policy_name(POLICY_FUNCTION, function_id(f)) for f in ("job_done", "credentials"))
    out = [
        Binding(project, "roles/compute.instanceAdmin.v1", functions, "create and delete job VMs"),
        Binding(policy_name(POLICY_SERVICE_ACCOUNT, names.vm_account), "roles/iam.serviceAccountUser", functions,
                "attach the VM account to the VMs it creates (on that account only)"),
        Binding(bucket, "roles/storage.objectAdmin", functions, "write run records, replay guards, the results page"),
    ]
    out.append(Binding(policy_name(POLICY_TOPIC, names.events_topic), "roles/pubsub.publisher", functions,
                       "publish run events"))
    if advice:
        out.append(Binding(project, ADVICE_ROLE, functions,
                           f"the sweep asks Spot advice for placement ({', '.join(ADVICE_PERMISSIONS)})"))
    if names.shared:
        # Only the dispatcher publishes start and sweep messages; with an entry per job, Cloud
        # Scheduler publishes them itself and no function needs to (a function that could would
        # be one more way to start runs).
        out += [Binding(policy_name(POLICY_TOPIC, topic), "roles/pubsub.publisher", functions,
                        "the dispatcher publishes the start and sweep messages of each minute")
                for topic in (names.start_topic, names.sweep_topic)]
    out += [Binding(policy_name(POLICY_FUNCTION, function_id(fn)), "roles/run.invoker", functions,
                    "Eventarc pushes Pub/Sub messages to the function as this account")
            for fn in ("start_job", "sweep", "dispatch") if fn in names.functions]
    out += [
        # No storage role at all: the runner's only storage credential is the broker's token,
        # limited to its own attempt's objects and its run's checkpoint (engine/broker.py).
        # No logging role either: with project-wide logWriter a container that reaches the
        # metadata server could write any log of the project, the functions' security lines
        # included. The runner ships the job's output to the bucket (docs/security.md). The role
        # is a managed one (the build account holds it), so deploy revokes it from the VM account
        # wherever it is granted.
        Binding(jobs_repository, "roles/artifactregistry.reader", vm,
                "pull the job's prebuilt image (from the repository of the jobs that run as this account only)"),
        Binding(built_repository, "roles/artifactregistry.reader", vm,
                "pull the job's built image (from the built repository of the jobs that run as this account only)"),
        Binding(job_done, "roles/run.invoker", vm, "call job_done when the job ends (on job_done only)"),
        Binding(broker, "roles/run.invoker", vm,
                "ask the credentials broker for its attempt's storage token (on that function only)"),
        Binding(project, "roles/logging.logWriter", build, "write the functions' build logs"),
        Binding(repository, "roles/artifactregistry.writer", build,
                "store the functions' built images (in this repository only)"),
        # On the results bucket, and there only the objects under deploy/ where deploy uploads
        # the source archives the functions are built from: never run records, results or specs.
        Binding(bucket, "roles/storage.objectViewer", build, "read the functions' source archive to build them",
                condition=DEPLOY_SOURCE),
    ]
    if names.job_build_account:
        job_build = member(names.job_build_account)
        out += [
            # No logging role: a job's Dockerfile runs with this account's token, and project-wide
            # logWriter would let it write any log line of the project (forged security lines
            # included). Its builds write their logs to a bucket of their own instead (GCS_ONLY,
            # core/build_logs.py), where it holds what Google asks: Storage Admin, on that bucket
            # only; on the results bucket it reads the build contexts and nothing else.
            # logWriter is a managed role (the build account holds it), so deploy revokes it from
            # this account wherever an earlier deploy granted it.
            Binding(policy_name(POLICY_BUCKET, names.build_logs_bucket), BUILD_LOGS_ROLE, job_build,
                    "write the job images' build logs, as Google asks (on the bucket of build logs only)"),
            # The built repositories only: never the functions', never an owners' repository,
            # where a tag a job runs could otherwise be moved by another job's Dockerfile.
            Binding(built_repository, "roles/artifactregistry.writer", job_build,
                    "store the job images deploy builds (in the built repositories only)"),
            Binding(bucket, "roles/storage.objectViewer", job_build,
                    "read a job image's build context (deploy/build-* only)", condition=BUILD_CONTEXTS),
        ]
    if project_number:
        # The one exception to "no storage role on the project". Cloud Functions copies the source
        # into its own bucket and Cloud Build fetches it from there as the build account: Google's
        # page on the build service account lists Storage Object Admin "for retrieving the function
        # source from the Cloud Storage bucket, and to store build images in Artifact Registry"
        # (https://cloud.google.com/run/docs/configuring/services/build-service-account; the same
        # for functions: https://cloud.google.com/functions/docs/securing/build-custom-sa). Google documents no
        # read-only role as enough, so the role is the one it names; the condition narrows it to
        # that one bucket, which holds only copies of spotcron's own sources and which Google
        # creates on the first function deploy (so it cannot carry a bucket policy before).
        out.append(Binding(project, SOURCE_COPY_ROLE, build,
                           "fetch Cloud Functions' copy of the functions' source, as their build does "
                           f"(gs://{source_copy_bucket(project_number, names.region)} only)", condition=SOURCE_COPY))
    for email in sorted(set(job_accounts)):
        job = member(email)
        own_repository = policy_name(POLICY_REPOSITORY, names.account_repository(email))
        own_built = policy_name(POLICY_REPOSITORY, names.account_built_repository(email))
        if names.job_build_account:
            out.append(Binding(own_built, "roles/artifactregistry.writer", member(names.job_build_account),
                               "store the images deploy builds for the jobs that run as this account "
                               "(in their built repository only)"))
        # Its VM runs as this account, so the runner's calls are made with it: exactly what the
        # VM account gets for them, and nothing else (no logging, no storage: the job's owner
        # grants what the job itself needs).
        out += [
            Binding(policy_name(POLICY_SERVICE_ACCOUNT, email), "roles/iam.serviceAccountUser", functions,
                    "create this job's VMs as its own account (on that account only)"),
            # Its own repository: the images of the jobs that run as it, and no other job's.
            Binding(own_repository, "roles/artifactregistry.reader", job,
                    "pull the job's prebuilt image (from the repository of its own account's jobs only)"),
            Binding(own_built, "roles/artifactregistry.reader", job,
                    "pull the job's built image (from the built repository of its own account's jobs only)"),
            Binding(job_done, "roles/run.invoker", job, "call job_done when the job ends (on job_done only)"),
            Binding(broker, "roles/run.invoker", job,
                    "ask the credentials broker for its attempt's storage token (on that function only)"),
        ]
    return out


def job_accounts(jobs: Iterable[Any]) -> tuple[str, ...]:
    """The jobs' own service accounts (emails), each once, sorted."""
    return tuple(sorted({job.service_account for job in jobs if job.service_account}))


def managed_roles(names: Names) -> frozenset[str]:
    """Roles deploy may revoke from its own accounts; any other role they hold is left alone."""
    return frozenset(b.role for b in bindings(names, advice=True)) | {SECRET_ACCESSOR} | RETIRED_ROLES


def managed_members(names: Names, job_accounts: Iterable[str] = ()) -> frozenset[str]:
    """spotcron's accounts and the jobs' own: whose bindings in managed roles deploy compares."""
    return frozenset(member(email) for email in (*names.accounts, *job_accounts))


def security_problems(granted: Iterable[Binding]) -> list[str]:
    """Every binding that breaks the security rules (a primitive role, a public member, the default
    compute account, a function open to unauthenticated calls); empty when none."""
    problems = []
    for b in granted:
        if b.role in PRIMITIVE_ROLES:
            problems.append(f"{b.target}: {b.member} would get the primitive role {b.role}")
        if b.member in PUBLIC_MEMBERS:
            problems.append(f"{b.target}: {b.role} would be granted to {b.member} (public access)")
        if _DEFAULT_ACCOUNT.match(b.member):
            problems.append(f"{b.target}: {b.role} would be granted to the default account {b.member}")
        if b.target.startswith(f"{POLICY_FUNCTION}:") and b.role in ("roles/run.invoker", "roles/cloudfunctions.invoker") \
                and b.member in PUBLIC_MEMBERS:
            problems.append(f"{b.target}: the function would allow unauthenticated invocation")
        if b.target.startswith(f"{POLICY_PROJECT}:") and b.role.startswith(PROJECT_WIDE_FORBIDDEN) \
                and not (b.role == SOURCE_COPY_ROLE and b.condition == SOURCE_COPY):
            problems.append(f"{b.target}: {b.member} would get {b.role} on the whole project; grant it on the "
                            f"one bucket or repository instead")
    return problems
