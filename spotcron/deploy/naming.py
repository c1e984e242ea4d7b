"""Every name deploy gives a Google Cloud object, derived from Settings in one place."""

from __future__ import annotations

import re
from dataclasses import dataclass

from spotcron.core.build_logs import build_logs_bucket
from spotcron.core.job_repositories import built_repository, jobs_repository
from spotcron.core.settings import Settings
from spotcron.deploy.resources import NAME_PREFIX

# Cloud Build runs the functions' builds as this account (see docs/deploy.md, "Why a build
# account"): new projects no longer give the default Cloud Build account the roles it needs,
# and the alternative is granting them to the default compute account.
BUILD_ACCOUNT = "spotcron-build"
# Cloud Build runs the job images' builds as this one: a job's Dockerfile runs inside its build
# with this account's token, so it may push only to the jobs' repository and read only the build
# contexts, never the functions' images, their build cache or their sources (docs/security.md).
JOB_BUILD_ACCOUNT = "spotcron-job-build"

# Logical function → (function id, entry point in functions/main.py).
FUNCTIONS: dict[str, tuple[str, str]] = {
    "start_job": ("spotcron-start-job", "start_job"),
    "sweep": ("spotcron-sweep", "sweep"),
    "job_done": ("spotcron-job-done", "job_done"),
    # The credentials broker (engine/broker.py): its own function so that its URL, and so the
    # audience of the identity tokens it accepts, is its own (Cloud Run checks the audience
    # against the service's URL, so a route under job_done could not have one).
    "credentials": ("spotcron-credentials", "credentials"),
    "dispatch": ("spotcron-dispatch", "dispatch"),  # scheduling: shared only
}
SHARED_ONLY = frozenset({"dispatch"})

SWEEP_ENTRY = f"{NAME_PREFIX}sweep"  # the sweep's scheduler entry (per-job mode)
DISPATCH_ENTRY = f"{NAME_PREFIX}dispatch"  # the one entry of scheduling: shared
# A job's entry is spotcron-JOB, so no job may take the name of another entry (in either mode:
# the mode can be switched at any deploy).
RESERVED_JOB_NAMES = frozenset({"sweep", "dispatch"})
_SCHEDULER_ID = re.compile(r"^[A-Za-z0-9_-]{1,500}$")


@dataclass(frozen=True)
class Names:
    project: str
    region: str
    bucket: str
    functions_account: str  # emails
    vm_account: str
    build_account: str
    start_topic: str  # topic ids
    sweep_topic: str
    events_topic: str
    dispatch_topic: str = "spotcron-dispatch"  # scheduling: shared only
    shared: bool = False  # scheduling: shared
    repository: str = "spotcron"  # the Artifact Registry repository id (the functions' images)
    job_build_account: str = ""  # "": the build account (Names built by hand in tests)

    @property
    def jobs_repository(self) -> str:
        """The repository of the images of jobs that run as the VM account, apart from the functions' (`repository`)."""
        return jobs_repository(self.repository)

    @property
    def build_logs_bucket(self) -> str:
        """The bucket the job images' builds write their logs to, and nothing else (core/build_logs.py)."""
        return build_logs_bucket(self.bucket)

    def account_repository(self, email: str) -> str:
        """The repository of the images of jobs that run as the account `email`, which alone reads it."""
        return jobs_repository(self.repository, email)

    @property
    def built_repository(self) -> str:
        """The repository deploy's builds push to for jobs that run as the VM account."""
        return built_repository(self.repository)

    def account_built_repository(self, email: str) -> str:
        """The repository deploy's builds push to for jobs that run as the account `email`."""
        return built_repository(self.repository, email)

    @classmethod
    def of(cls, settings: Settings) -> Names:
        return cls(
            project=settings.project,
            region=settings.region,
            bucket=settings.bucket,
            functions_account=settings.functions_service_account_email,
            vm_account=settings.vm_service_account_email,
            build_account=settings.account_email(BUILD_ACCOUNT),
            start_topic=settings.start_topic,
            sweep_topic=settings.sweep_topic,
            events_topic=settings.events_topic,
            dispatch_topic=settings.dispatch_topic,
            shared=settings.scheduling == "shared",
            repository=settings.repository,
            job_build_account=settings.account_email(JOB_BUILD_ACCOUNT),
        )

    @property
    def functions(self) -> tuple[str, ...]:
        """The logical functions this stack deploys."""
        return tuple(f for f in FUNCTIONS if self.shared or f not in SHARED_ONLY)

    @property
    def topics(self) -> tuple[str, str, str]:
        return (self.start_topic, self.sweep_topic, self.events_topic)

    @property
    def accounts(self) -> tuple[str, ...]:
        extra = (self.job_build_account,) if self.job_build_account else ()
        return (self.functions_account, self.vm_account, self.build_account, *extra)

    def own_account(self, email: str) -> bool:
        """True for accounts of this project, which deploy creates; others must already exist."""
        return email.endswith(f"@{self.project}.iam.gserviceaccount.com")

    def topic_path(self, topic: str) -> str:
        return f"projects/{self.project}/topics/{topic}"

    @property
    def location_path(self) -> str:
        return f"projects/{self.project}/locations/{self.region}"

    def function_path(self, function_id: str) -> str:
        return f"{self.location_path}/functions/{function_id}"

    @property
    def repository_path(self) -> str:
        return f"{self.location_path}/repositories/{self.repository}"

    def scheduler_path(self, entry: str) -> str:
        return f"{self.location_path}/jobs/{entry}"

    def run_service_path(self, function_id: str) -> str:
        # A 2nd gen function runs as a Cloud Run service of the same (lower-case) name.
        return f"{self.location_path}/services/{function_id.lower()}"


def function_id(logical: str) -> str:
    return FUNCTIONS[logical][0]


def scheduler_entry(job_name: str) -> str:
    return f"{NAME_PREFIX}{job_name}"


def scheduler_id_problem(job_name: str) -> str | None:
    """Why `job_name` cannot name a Cloud Scheduler entry, or None when it can."""
    if job_name in RESERVED_JOB_NAMES:
        return (f"{job_name!r} is reserved (its scheduler entry would be {scheduler_entry(job_name)}, the name of "
                "spotcron's own sweep or dispatch entry); rename the job")
    entry = scheduler_entry(job_name)
    if not _SCHEDULER_ID.match(entry):
        return (f"{job_name!r} cannot name a Cloud Scheduler entry ({entry!r}); use letters, digits, "
                "'-' and '_' only, 491 characters at most")
    return None


def member(email: str) -> str:
    return f"serviceAccount:{email}"
