"""Which Artifact Registry repositories hold the images of which jobs: two per account they run as.

Artifact Registry grants roles per repository, not per image, so a repository's readers read every
image in it, and its writers may push any tag in it. So each account the jobs run as gets two:

- the owners' repository (`REPOSITORY-jobs`, or `REPOSITORY-jobs-HASH` for a job's own account):
  where a job's owner pushes a prebuilt `image:`. Only the owner (a deployer) writes it; the
  account reads it. No build writes it, so no job's Dockerfile can move a tag another job runs.
- the built repository (`REPOSITORY-built`, or `REPOSITORY-built-HASH`): where deploy's builds of
  `build:` folders push. The job build account writes it (every job's Dockerfile runs with that
  account's token); the account reads it, and a deployed spec names what it runs there by digest
  only, never by tag, so a tag a Dockerfile pushes changes nothing that runs.

Jobs that run as spotcron's VM account share the repositories without a hash; jobs that share an
account share its repositories, as they share everything else the account can do.

The hash is 14 base32 characters, 70 bits of the email's SHA-256, as the accounts deploy makes for
jobs with secrets (deploy/secret_grants.py): stable, and an id Artifact Registry accepts
(lower-case letters, digits and hyphens, starting with a letter, ending with a letter or digit, 63
characters at most; deploy/validate.py checks `repository:` leaves room for it). Finding an
account whose repositories are a given account's takes about 2^70 tries, out of reach, where 32
bits took seconds. Two accounts whose hashes agree all the same are refused by deploy, whether both
are planned or one owns a repository already (deploy/repository_owners.py).
"""

from __future__ import annotations

import base64
import hashlib

JOBS_SUFFIX = "-jobs"
BUILT_SUFFIX = "-built"
HASH_DIGITS = 14  # base32 characters: 5 bits each
# The longest suffix an account's repository id gets: "-built-" and the hash.
ACCOUNT_SUFFIX_LENGTH = max(len(JOBS_SUFFIX), len(BUILT_SUFFIX)) + 1 + HASH_DIGITS


def account_hash(email: str) -> str:
    """The part of an account's repository ids that names the account: lower-case base32 (a-z, 2-7)."""
    digest = hashlib.sha256(email.strip().lower().encode()).digest()
    return base64.b32encode(digest).decode().lower()[:HASH_DIGITS]


def jobs_repository(repository: str, account: str | None = None) -> str:
    """The owners' repository id of the jobs that run as `account` (None: spotcron's VM account):
    where their prebuilt images are pushed, by nobody but their owners."""
    shared = f"{repository}{JOBS_SUFFIX}"
    return shared if not account else f"{shared}-{account_hash(account)}"


def built_repository(repository: str, account: str | None = None) -> str:
    """The repository id deploy's builds push the images of the jobs that run as `account` to."""
    shared = f"{repository}{BUILT_SUFFIX}"
    return shared if not account else f"{shared}-{account_hash(account)}"


def registry(region: str, project: str, repository_id: str) -> str:
    """The Docker host path of a repository: REGION-docker.pkg.dev/PROJECT/REPOSITORY_ID."""
    return f"{region}-docker.pkg.dev/{project}/{repository_id}"
