"""Which Artifact Registry repository holds the images of which jobs: one per account they run as.

Artifact Registry grants roles per repository, not per image, so a repository's readers read every
image in it. Jobs that run as spotcron's VM account share the jobs' repository (`REPOSITORY-jobs`),
which that account reads; a job that runs as an account of its own (`service_account:`, or the one
deploy makes for a job with secrets) gets its images in a repository of that account
(`REPOSITORY-jobs-HASH`), which only that account reads. Jobs that share an account share its
repository, as they share everything else the account can do.

The hash is the first 8 hex digits of the email's SHA-256: stable, and an id Artifact Registry
accepts (lower-case letters, digits and hyphens, starting with a letter, ending with a letter or
digit, 63 characters at most; deploy/validate.py checks `repository:` leaves room for it).
"""

from __future__ import annotations

import hashlib

JOBS_SUFFIX = "-jobs"
HASH_DIGITS = 8
ACCOUNT_SUFFIX_LENGTH = len(JOBS_SUFFIX) + 1 + HASH_DIGITS  # "-jobs-" and the hash


def account_hash(email: str) -> str:
    return hashlib.sha256(email.strip().lower().encode()).hexdigest()[:HASH_DIGITS]


def jobs_repository(repository: str, account: str | None = None) -> str:
    """The repository id of the images of jobs that run as `account` (None: spotcron's VM account)."""
    shared = f"{repository}{JOBS_SUFFIX}"
    return shared if not account else f"{shared}-{account_hash(account)}"


def registry(region: str, project: str, repository_id: str) -> str:
    """The Docker host path of a repository: REGION-docker.pkg.dev/PROJECT/REPOSITORY_ID."""
    return f"{region}-docker.pkg.dev/{project}/{repository_id}"
