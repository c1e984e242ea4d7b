"""Two job accounts whose emails hash alike share one repository, granted in the same deploy.

An account's repositories are named by 8 hex digits (32 bits) of its email's SHA-256
(core/job_repositories.account_hash). deploy/repository_owners.py refuses a repository whose
description records *another* account, but only a repository that exists already: when both
accounts are new in one deploy (or the repository is created by this deploy), nothing compares
the accounts of the plan with each other, so both get roles/artifactregistry.reader on the same
`spotcron-jobs-HASH` and `spotcron-built-HASH`, and each job's container (metadata access is
implied by an own account) pulls the other's images. The two account ids below were found in
about 100,000 tries (a birthday search over 32 bits takes seconds).
"""

from __future__ import annotations

from pathlib import Path

from spotcron.core.job_repositories import account_hash
from tests.deploy.conftest import PROJECT, cloud, deployer, settings, source  # noqa: F401 - fixtures
from tests.deploy.test_registry_per_account import _accounts, _context, _deploy_built, _job, builder  # noqa: F401

ALICE = f"runner-121bf@{PROJECT}.iam.gserviceaccount.com"
MALLORY = f"runner-1b818@{PROJECT}.iam.gserviceaccount.com"


def test_two_accounts_never_read_one_repository(deployer, cloud, builder, tmp_path: Path) -> None:  # noqa: F811
    assert account_hash(ALICE) == account_hash(MALLORY) and ALICE != MALLORY
    _accounts(cloud, "runner-121bf", "runner-1b818")
    _context(tmp_path, "images/a")
    _context(tmp_path, "images/m")
    try:
        a, m = _deploy_built(deployer, cloud, builder[1], [_job("payroll", ALICE, "images/a"),
                                                           _job("weather", MALLORY, "images/m")], tmp_path)
    except Exception as refused:  # a deploy that refuses the pair is the fix
        assert "hash" in str(refused) or "same repository" in str(refused), refused
        return
    assert cloud.may_pull(ALICE, a.image)
    assert not cloud.may_pull(MALLORY, a.image), f"{MALLORY} pulls {a.image}"
