"""Checks that run before deploy makes any API call: settings, job names, accounts, images.

Job specs themselves are validated by core/loader.load_jobs; these are the checks only deploy
needs (a real project id, names Cloud Scheduler accepts). Every problem is reported at once.
The credentials check asks Google's library, so it lives in gcp/admin/credentials.py.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from spotcron.core.errors import ConfigError, Problem
from spotcron.core.job_repositories import ACCOUNT_SUFFIX_LENGTH, built_repository, jobs_repository
from spotcron.core.settings import Settings
from spotcron.core.spec import JobSpec
from spotcron.deploy.naming import Names, scheduler_id_problem
from spotcron.deploy.secret_grants import secrets_account

PLACEHOLDER_PROJECT = "my-project"
_PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,61}[a-z0-9]$")
_REPOSITORY = re.compile(r"^[a-z](?:[a-z0-9-]{0,61}[a-z0-9])?$")
MIN_SWEEP_INTERVAL = 60  # Cloud Scheduler fires at most once a minute


def _line_of(path: Path | None, key: str) -> int | None:
    """The line where `key:` is set in the stack file, for error messages."""
    if path is None or not path.exists():
        return None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if re.match(rf"^\s*{re.escape(key)}\s*:", line):
            return number
    return None


def settings_problems(settings: Settings, stack: Path | None) -> list[Problem]:
    where = str(stack) if stack is not None and stack.exists() else "<environment>"

    def problem(key: str, message: str) -> Problem:
        return Problem(where, _line_of(stack, key), key, message)

    problems = []
    if settings.project == PLACEHOLDER_PROJECT:
        problems.append(problem("project", f"{PLACEHOLDER_PROJECT!r} is the placeholder; set your Google Cloud "
                                           "project id here or in SPOTCRON_PROJECT"))
    elif not _PROJECT_ID.match(settings.project):
        problems.append(problem("project", f"{settings.project!r} is not a project id (6-30 characters: "
                                           "lower-case letters, digits, '-')"))
    if settings.bucket.startswith(f"{PLACEHOLDER_PROJECT}-"):
        # With the project still the placeholder, its name would only suggest the placeholder again.
        example = ("your project id followed by -spotcron" if settings.project == PLACEHOLDER_PROJECT
                   else f"{settings.project}-spotcron")
        problems.append(problem("bucket", f"{settings.bucket!r} is the placeholder; bucket names are global, "
                                          f"so pick your own, e.g. {example}"))
    elif not _BUCKET.match(settings.bucket) or ".." in settings.bucket:
        problems.append(problem("bucket", f"{settings.bucket!r} is not a bucket name (3-63 characters: "
                                          "lower-case letters, digits, '-', '_', '.')"))
    if settings.sweep_interval < MIN_SWEEP_INTERVAL:
        problems.append(problem("sweep_interval", f"{settings.sweep_interval}s is too short; Cloud Scheduler "
                                                  "fires at most once a minute (write 1m or more)"))
    if not _REPOSITORY.match(settings.repository) \
            or not _REPOSITORY.match(jobs_repository(settings.repository, "account@example.com")) \
            or not _REPOSITORY.match(built_repository(settings.repository, "account@example.com")):
        problems.append(problem("repository", f"{settings.repository!r} is not an Artifact Registry repository id "
                                              "(lower-case letters, digits, '-'; starts with a letter; at most "
                                              f"{63 - ACCOUNT_SUFFIX_LENGTH} characters, as the job images go to "
                                              "REPOSITORY-jobs[-HASH] and REPOSITORY-built[-HASH])"))
    if settings.job_done_url and not settings.job_done_url.startswith("https://"):
        problems.append(problem("job_done_url", f"{settings.job_done_url!r} must be an https:// URL, or empty "
                                                "so that deploy fills it in"))
    return problems


def job_problems(jobs: Sequence[JobSpec], files: Mapping[str, Path] | None = None) -> list[Problem]:
    """Names Cloud Scheduler would refuse or deploy reserves; `files` maps job names to their files."""
    files = files or {}

    def where(name: str) -> str:
        return str(files[name]) if name in files else f"job {name}"

    problems = []
    for job in jobs:
        reason = scheduler_id_problem(job.name)
        if reason:
            problems.append(Problem(where(job.name), None, "name", reason))
    for name, count in sorted(Counter(job.name for job in jobs).items()):
        if count > 1:
            problems.append(Problem(where(name), None, "name",
                                    f"{count} jobs use the name {name!r}; each job needs its own"))
    return problems


def account_problems(settings: Settings, jobs: Sequence[JobSpec], files: Mapping[str, Path] | None = None
                     ) -> list[Problem]:
    """A job's own service account must be of this project and none of spotcron's own accounts."""
    files = files or {}
    names = Names.of(settings)
    ours = {names.functions_account: "the functions' account", names.build_account: "the build account",
            names.job_build_account: "the job images' build account", names.vm_account: "spotcron's VM account"}
    problems = []
    for job in jobs:
        email = job.service_account
        if email is None:
            continue
        where = str(files[job.name]) if job.name in files else f"job {job.name}"
        if email in ours:
            fix = ("remove service_account to run as it" if email == names.vm_account else
                   "create an account for this job and name it here")
            problems.append(Problem(where, None, "service_account", f"{email!r} is {ours[email]}; a job may not run "
                                                                    f"as one of spotcron's own accounts: {fix}"))
        elif not names.own_account(email):
            problems.append(Problem(where, None, "service_account",
                                    f"{email!r} is not an account of project {settings.project}; deploy grants a "
                                    f"job's account only in its own project: create the account there "
                                    f"(ACCOUNT_ID@{settings.project}.iam.gserviceaccount.com)"))
    return problems


def repository_problems(settings: Settings, jobs: Sequence[JobSpec], files: Mapping[str, Path] | None = None
                        ) -> list[Problem]:
    """Two accounts whose repositories would be one (their emails' hashes agree): each
    would read the other's images, so neither is deployed until one is renamed."""
    files = files or {}
    seen: dict[str, str] = {}
    problems = []
    for job in jobs:
        account = run_account(settings, job)
        if account is None:
            continue
        repository = jobs_repository(settings.repository, account)
        other = seen.setdefault(repository, account)
        if other != account:
            where = str(files[job.name]) if job.name in files else f"job {job.name}"
            problems.append(Problem(where, None, "service_account",
                                    f"{account!r} and {other!r} would share the image repository {repository} "
                                    f"(their emails' hashes agree), so each would read the other's images; "
                                    f"use another account id for one of them"))
    return problems


def image_problems(settings: Settings, jobs: Sequence[JobSpec], files: Mapping[str, Path] | None = None
                   ) -> list[Problem]:
    """An image in an Artifact Registry repository of this project that the job's account may not
    read: the functions' own, another account's jobs' repository, or the shared jobs' repository
    for a job with an account of its own. Its pull would fail on every run."""
    files = files or {}
    names = Names.of(settings)
    problems = []
    for job in jobs:
        account = run_account(settings, job)
        ours = f"{settings.registry_for(account)}/"
        who = ("spotcron's VM account" if account is None else
               f"its own account {account}" if job.service_account and not job.deploy_account else
               f"the account deploy makes for its secrets, {account}")
        where = str(files[job.name]) if job.name in files else f"job {job.name}"
        entries = [entry.name for entry in job.matrix]
        images = [(("image",), job.image, job.build is not None)]
        images += [(("matrix", index, "image"), entry.image, entry.build is not None)
                   for index, entry in enumerate(job.matrix) if entry.image]
        for field, image, built in images:
            if built or not image:
                continue  # built by deploy into the repository its account reads: `image` only names it
            host, _, path = image.partition("/")
            if not host.endswith("-docker.pkg.dev") or not path.startswith(f"{names.project}/") \
                    or image.startswith(ours):
                continue
            repository = "/".join(image.split("/")[:3])
            problems.append(Problem(where, None, ".".join(str(part) for part in field),
                                    f"{image!r} is in {repository}, which this job's VM cannot read: it runs as "
                                    f"{who}, which reads only {ours.rstrip('/')} (Artifact Registry grants per "
                                    f"repository, so each account's jobs get their own); push the image to "
                                    f"{ours}IMAGE:TAG and name it here, or use build: so that deploy builds it "
                                    f"there" + (f" (matrix entry {entries[field[1]]})" if len(field) > 1 else "")))
    return problems


def run_account(settings: Settings, job: JobSpec) -> str | None:
    """The account the job's VMs run as when deployed (None: spotcron's VM account): its own, or the
    one deploy makes for a job with secrets (deploy/secret_grants.with_secret_accounts)."""
    if job.service_account:
        return job.service_account
    if job.all_secrets():
        return secrets_account(settings, job.name)
    return None


def network_problems(jobs: Sequence[JobSpec], files: Mapping[str, Path] | None = None) -> list[Problem]:
    """A job whose VM could not pull its image: outside Google's registries with no way out.

    Refused rather than warned about: every run of such a job would fail at its pull.
    """
    from spotcron.core.egress import pull_problem

    files = files or {}
    problems = []
    for job in jobs:
        problem = pull_problem(job)
        if problem:
            where = str(files[job.name]) if job.name in files else f"job {job.name}"
            problems.append(Problem(where, None, "image", problem))
    return problems


def preflight(settings: Settings, jobs: Sequence[JobSpec], stack: Path | None,
              files: Mapping[str, Path] | None = None) -> None:
    """Raise ConfigError listing every problem deploy can see without calling Google."""
    problems = (settings_problems(settings, stack) + job_problems(jobs, files) + account_problems(settings, jobs, files)
                + image_problems(settings, jobs, files) + repository_problems(settings, jobs, files)
                + network_problems(jobs, files))
    if problems:
        raise ConfigError(problems)
