"""A job's secrets on Google Cloud: the account its VM runs as, the one binding per secret that lets
it read, and the checks deploy makes before it changes anything.

Isolation is the account: a VM reads secrets with its own token, so a job with secrets never runs
as spotcron's shared VM account (every job's VM would then read every job's secrets). It runs as
its `service_account:`, or as an account deploy creates for it (`sc-JOB-HASH`), and that account
gets roles/secretmanager.secretAccessor on exactly the secrets the job names, each binding on the
secret itself (Secret Manager's resource-level IAM), never on the project.

Before anything is created, deploy reads each secret: it must exist, have an enabled version (the
pinned one must be enabled), and its policy must let the job's account read it, or be about to
(deploy's own binding). Cloud Run checks the same at job creation.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from spotcron.core.errors import NotFound, SpotcronError
from spotcron.core.secret_refs import resource
from spotcron.core.settings import Settings
from spotcron.core.spec import JobSpec
from spotcron.deploy.iam import SECRET_ACCESSOR, Binding
from spotcron.deploy.naming import member
from spotcron.deploy.resources import POLICY_SECRET, SERVICE_ACCOUNT, Resource, policy_name

ACCOUNT_PREFIX = "sc-"
# An account id holds 30 characters at most (sc- + name + - + hash). The hash takes 14 base32
# characters, 70 bits of the job name's SHA-256: finding another job name whose account is this
# one's takes about 2^70 tries, out of reach, where 24 bits took seconds. The name keeps 12
# characters, enough to tell the accounts apart in a listing.
_NAME_CHARS, _HASH_CHARS = 12, 14


def secrets_account(settings: Settings, job: str) -> str:
    """The account deploy creates for job `job` (sc-, the start of the job's name, a hash of all of it)."""
    digest = base64.b32encode(hashlib.sha256(job.encode()).digest()).decode().lower()[:_HASH_CHARS]
    return settings.account_email(f"{ACCOUNT_PREFIX}{job[:_NAME_CHARS].rstrip('-')}-{digest}")


def made_account_name(job: str) -> str:
    """The display name deploy gives the account it makes for job `job`: the job it was made for,
    checked before the account is used again (made_account_problems)."""
    return f"spotcron job {job} (secrets)"


def with_secret_accounts(settings: Settings, jobs: Iterable[JobSpec]) -> list[JobSpec]:
    """The jobs as deploy deploys them: one with secrets and no service_account runs as the account
    deploy makes for it (its container still has no metadata access: `deploy_account`)."""
    out = []
    for job in jobs:
        if job.all_secrets() and job.service_account is None:
            job = job.model_copy(update={"service_account": secrets_account(settings, job.name),
                                         "deploy_account": True})
        out.append(job)
    return out


def made_accounts(jobs: Iterable[JobSpec]) -> list[Resource]:
    """The service accounts deploy creates for jobs with secrets."""
    return [Resource(SERVICE_ACCOUNT, job.service_account, {"display_name": made_account_name(job.name)})
            for job in jobs if job.deploy_account and job.service_account]


def made_account_problems(jobs: Iterable[JobSpec], existing: Mapping[str, str]) -> list[str]:
    """Jobs whose made account exists and was made for another job (its display name names that
    job): running as it would inherit whatever was granted to the other job. `existing`: display
    names of the project's accounts, by email. Empty when none."""
    problems = []
    for job in jobs:
        if not (job.deploy_account and job.service_account) or job.service_account not in existing:
            continue
        found, wanted = existing[job.service_account], made_account_name(job.name)
        if found != wanted:
            problems.append(f"job {job.name}: the account deploy makes for its secrets, {job.service_account}, "
                            f"already exists as {found!r}, not {wanted!r}: it was made for another job or by "
                            f"someone else, and whatever it holds would pass to this job. Rename the job, or "
                            f"delete the account if nothing needs it (gcloud iam service-accounts delete "
                            f"{job.service_account})")
    return problems


def secret_bindings(settings: Settings, jobs: Iterable[JobSpec]) -> list[Binding]:
    """One accessor binding per (job account, secret), on the secret."""
    out = []
    for job in jobs:
        if not job.service_account:
            continue
        for name in job.secret_names(settings.project):
            if not name.startswith(f"projects/{settings.project}/"):
                continue  # another project's secret: its owner grants it (secret_problems checks)
            out.append(Binding(policy_name(POLICY_SECRET, name), SECRET_ACCESSOR, member(job.service_account),
                               f"job {job.name} reads this secret at boot (this secret only)"))
    return out


@dataclass(frozen=True)
class SecretUse:
    job: str
    variable: str
    name: str  # projects/P/secrets/S
    version: str  # "latest" or a number
    account: str


def uses(settings: Settings, jobs: Sequence[JobSpec]) -> list[SecretUse]:
    return [SecretUse(job.name, variable.split("@")[0], resource(ref.secret, settings.project), ref.version,
                      job.service_account or "")
            for job in jobs for variable, ref in sorted(job.all_secrets().items())]


def secret_problems(settings: Settings, jobs: Sequence[JobSpec], manager: object, call) -> list[str]:
    """What keeps a job from reading a secret, read from Secret Manager before deploy changes anything.

    `manager` is Clients.secret_manager; `call` the deploy's Caller. Each problem names the job,
    the variable and the secret, and how to fix it.
    """
    problems = []
    cache: dict[str, tuple[list[dict], dict] | str] = {}
    for use in uses(settings, jobs):
        where = f"job {use.job}: secrets.{use.variable} ({use.name})"
        if use.name not in cache:
            try:
                versions = call(f"list the versions of {use.name}", manager.list_versions, use.name)
                policy = call(f"read the IAM policy of {use.name}", manager.get_iam_policy, use.name)
                cache[use.name] = (versions, policy)
            except NotFound:
                cache[use.name] = "missing"
            except SpotcronError as exc:
                cache[use.name] = f"cannot be read by the deploying account ({exc})"
        found = cache[use.name]
        if found == "missing":
            problems.append(f"{where}: no such secret; create it with `spotcron secrets set {use.name.rsplit('/', 1)[-1]} --cloud`"
                            + ("" if use.name.startswith(f"projects/{settings.project}/") else
                               " in its project"))
            continue
        if isinstance(found, str):
            problems.append(f"{where}: {found}")
            continue
        versions, policy = found
        states = {v.get("name", "").rsplit("/", 1)[-1]: v.get("state", "") for v in versions}
        if use.version == "latest":
            if "ENABLED" not in states.values():
                problems.append(f"{where}: has no enabled version; add one with `spotcron secrets set "
                                f"{use.name.rsplit('/', 1)[-1]} --cloud`")
        elif states.get(use.version) != "ENABLED":
            state = states.get(use.version, "missing")
            problems.append(f"{where}: version {use.version} is {state.lower()}; pin an enabled version or "
                            f"write version: latest")
        readers = {m for b in policy.get("bindings", []) if b.get("role") in (SECRET_ACCESSOR, "roles/owner",
                                                                               "roles/secretmanager.admin")
                   for m in b.get("members", [])}
        ours = use.name.startswith(f"projects/{settings.project}/")
        if not ours and member(use.account) not in readers:
            problems.append(f"{where}: {use.account} may not read it, and deploy grants roles only in project "
                            f"{settings.project}; grant it roles/secretmanager.secretAccessor on the secret "
                            f"(gcloud secrets add-iam-policy-binding {use.name} --member "
                            f"serviceAccount:{use.account} --role {SECRET_ACCESSOR})")
    return problems


def notify_secret_bindings(settings: Settings, jobs: Iterable[JobSpec]) -> list[Binding]:
    """The functions' account reads each secret a `notify:` webhook or ping is held in (the stack's
    default and every job's): one accessor binding per such secret, on the secret."""
    from spotcron.core.notify_spec import WebhookSecret
    from spotcron.deploy.naming import Names

    functions = member(Names.of(settings).functions_account)
    held = set()
    for notify in [settings.notify, *(job.notify for job in jobs)]:
        for target in (getattr(notify, "webhook", None), getattr(notify, "ping", None)):
            if isinstance(target, WebhookSecret):
                held.add(resource(target.secret, settings.project))
    return [Binding(policy_name(POLICY_SECRET, name), SECRET_ACCESSOR, functions,
                    "the functions read this notify: webhook when a run ends (this secret only)")
            for name in sorted(held)]
