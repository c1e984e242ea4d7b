"""Which account an account's repositories belong to, recorded where a later deploy reads it back,
and which accounts of one plan would share repositories.

An account's repositories are named by 70 bits of its email's hash (core/job_repositories.py), and
they outlive the account that no job names any more, with their images. A new account whose hash
agrees with a retired one's would be granted the reader role on the retired account's repositories
and pull the images left there. So deploy writes the account into each account repository's
description when it creates it (a Repository's `description` is free text,
https://cloud.google.com/artifact-registry/docs/reference/rest/v1/projects.locations.repositories),
reads it back before every plan, and refuses to grant a repository that records another account.
Two accounts of the same plan whose hashes agree would be granted one new repository (neither
description exists yet), so deploy compares the plan's accounts with each other first
(shared_repository_problems) and changes nothing when two meet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from spotcron.core.job_repositories import BUILT_SUFFIX, built_repository, jobs_repository

_RECORDED = re.compile(r"jobs that run as (?P<account>[^\s@]+@[^\s@]+)$")


def description(repository: str, account: str | None, *, functions: bool = False) -> str:
    """The description deploy creates `repository` with; an account's names that account."""
    if functions:
        return "spotcron: the functions' images"
    built = BUILT_SUFFIX in repository
    what = "the images deploy builds for" if built else "the images owners push for"
    return f"spotcron: {what} the jobs that run as {account}" if account else \
        f"spotcron: {what} the jobs that run as the VM account"


def recorded_account(text: str | None) -> str | None:
    """The account a repository's description records, None when it records none."""
    match = _RECORDED.search(str(text or "").strip())
    return match["account"].lower() if match else None


def owner_problem(path: str, found: str | None, wanted: str) -> str | None:
    """Why `wanted` must not get the repository at `path` whose description is `found`, or None."""
    recorded = recorded_account(found)
    if recorded is None or recorded == wanted.strip().lower():
        return None
    return (f"repository {path} belongs to {recorded} (its description says so), and {wanted}'s email hashes to "
            f"the same repository id: granting {wanted} would let it read the images {recorded}'s jobs left "
            f"there. Use another account id for the job that runs as {wanted}, or, if {recorded} and its images "
            f"are gone for good, delete the repository (gcloud artifacts repositories delete) and deploy again")


def shared_repository_problems(repository: str, accounts: Iterable[str]) -> list[str]:
    """One line per pair of the accounts (jobs' own, as their specs name them) whose repository ids
    would be one: each would be granted the reader role on the other's images. `repository`: the
    stack's `repository:`, the start of every id. Empty when every account has its own."""
    owners: dict[str, str] = {}
    problems = []
    for account in sorted({a.strip().lower() for a in accounts if a and a.strip()}):
        repository_id = jobs_repository(repository, account)
        other = owners.setdefault(repository_id, account)
        if other != account:
            problems.append(f"accounts {other} and {account} would share the repositories {repository_id} and "
                            f"{built_repository(repository, account)} (their emails hash to the same repository "
                            f"id), so the jobs of each would read the images of the other's; run the jobs of one "
                            f"of them as another account (a new account id), and deploy again")
    return problems
