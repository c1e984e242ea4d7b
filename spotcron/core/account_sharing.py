"""Jobs that run as one service account read each other's secrets.

A VM reads its secrets with its account's token, and a job that names its own `service_account`
gets that token in its container (from the metadata server). So two jobs that share an account
share every secret the account may read: one job would read the other's. Jobs may share an
account only when neither names a secret, or both name exactly the same secrets.

The accounts deploy makes for jobs with secrets (`sc-JOB-HASH`) belong to one job each: a job may
not name one as its `service_account`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spotcron.core.secret_refs import resource

# The id prefix of the accounts deploy makes for jobs with secrets (one account per job).
MADE_ACCOUNT_PREFIX = "sc-"


def made_account_problem(account: str) -> str | None:
    """Why a job may not name `account` itself: it has the form of an account deploy makes."""
    if account.lower().startswith(MADE_ACCOUNT_PREFIX):
        return (f"account ids starting with {MADE_ACCOUNT_PREFIX!r} are the accounts deploy makes for one job's "
                f"secrets, and a job running as another job's account reads that job's secrets; create an account "
                f"with another name for this job (gcloud iam service-accounts create NAME) or leave service_account "
                f"out")
    return None


def shared_account_problems(accounts: Mapping[str, str | None], secrets: Mapping[str, Iterable[str]],
                            project: str = "PROJECT") -> dict[str, str]:
    """For each job that shares its account with a job of different secrets: why it may not.

    `accounts` maps a job to the account it runs as (None: spotcron's shared VM account, whose
    jobs never get its token in their container); `secrets` maps a job to the secrets it names.
    """
    by_account: dict[str, list[str]] = {}
    for job, account in accounts.items():
        if account:
            by_account.setdefault(account.lower(), []).append(job)
    problems = {}
    for account, jobs in by_account.items():
        if len(jobs) < 2:
            continue
        named = {job: frozenset(resource(s, project) for s in secrets.get(job, ())) for job in jobs}
        if not any(named.values()) or len(set(named.values())) == 1:
            continue
        for job in sorted(jobs):
            others = ", ".join(sorted(j for j in jobs if j != job))
            problems[job] = (f"service account {account} is also the account of job(s) {others}, and the jobs do "
                             f"not name the same secrets: a job reads every secret its account may read, so one "
                             f"job would read another's; give each job its own service_account (or name the same "
                             f"secrets in all of them)")
    return problems
