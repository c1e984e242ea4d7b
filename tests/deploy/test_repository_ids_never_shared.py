"""Two job accounts never read one repository: the repository ids carry 70 bits of the account's
email hash (a pair found by a 32-bit birthday search no longer meets), and deploy refuses a plan
whose accounts would meet all the same, before anything is read or changed, even when both are new
in that deploy (no repository description records either yet)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotcron.core import job_repositories
from spotcron.core.job_repositories import (
    ACCOUNT_SUFFIX_LENGTH,
    account_hash,
    built_repository,
    jobs_repository,
)
from spotcron.deploy.repository_owners import shared_repository_problems
from spotcron.gcp.admin.calls import DeployError
from tests.deploy.conftest import PROJECT, cloud, deployer, settings, source  # noqa: F401 - fixtures
from tests.deploy.test_registry_per_account import _accounts, _context, _deploy_built, _job, builder  # noqa: F401

# Their emails' first 32 bits of SHA-256 agree: both got reader on spotcron-built-3c0c0785.
ALICE = f"runner-121bf@{PROJECT}.iam.gserviceaccount.com"
MALLORY = f"runner-1b818@{PROJECT}.iam.gserviceaccount.com"


def test_accounts_whose_32_bit_hashes_agree_get_repositories_of_their_own(deployer, cloud, builder,  # noqa: F811
                                                                          tmp_path: Path) -> None:
    import hashlib

    assert hashlib.sha256(ALICE.encode()).hexdigest()[:8] == hashlib.sha256(MALLORY.encode()).hexdigest()[:8]
    assert account_hash(ALICE) != account_hash(MALLORY)
    _accounts(cloud, "runner-121bf", "runner-1b818")
    _context(tmp_path, "images/a")
    _context(tmp_path, "images/m")
    a, m = _deploy_built(deployer, cloud, builder[1], [_job("payroll", ALICE, "images/a"),
                                                       _job("weather", MALLORY, "images/m")], tmp_path)
    assert cloud.may_pull(ALICE, a.image) and cloud.may_pull(MALLORY, m.image)
    assert not cloud.may_pull(MALLORY, a.image), f"{MALLORY} pulls {a.image}"
    assert not cloud.may_pull(ALICE, m.image), f"{ALICE} pulls {m.image}"


def test_a_plan_whose_accounts_would_share_a_repository_changes_nothing(deployer, cloud,  # noqa: F811
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(job_repositories, "account_hash", lambda email: "collidingforce")  # a collision, forced
    _accounts(cloud, "runner-121bf", "runner-1b818")
    before = dict(cloud.registry.repositories)
    with pytest.raises(DeployError) as refused:
        deployer.deploy([_job("payroll", ALICE, "images/a"), _job("weather", MALLORY, "images/m")])
    message = str(refused.value)
    assert message.startswith("two job accounts would share one image repository, so nothing was changed:")
    assert (f"accounts {ALICE} and {MALLORY} would share the repositories spotcron-jobs-collidingforce and "
            f"spotcron-built-collidingforce") in message
    assert "run the jobs of one of them as another account" in message
    assert dict(cloud.registry.repositories) == before


def test_one_account_named_twice_is_no_collision() -> None:
    assert shared_repository_problems("spotcron", [ALICE, ALICE.upper(), MALLORY]) == []


def test_the_hash_is_70_bits_of_base32_and_the_ids_stay_within_63_characters() -> None:
    assert len(account_hash(ALICE)) == 14 and set(account_hash(ALICE)) <= set("abcdefghijklmnopqrstuvwxyz234567")
    longest = "r" * (63 - ACCOUNT_SUFFIX_LENGTH)
    assert len(built_repository(longest, ALICE)) == 63 and len(jobs_repository(longest, ALICE)) == 62


def test_the_longest_repository_setting_deploys_each_accounts_repositories(deployer, cloud, tmp_path: Path,  # noqa: F811
                                                                          ) -> None:
    longest = "r" * (63 - ACCOUNT_SUFFIX_LENGTH)
    _accounts(cloud, "runner-121bf")
    _context(tmp_path, "images/a")
    deployer.deploy([_job("payroll", ALICE, "images/a")],
                    settings=deployer.settings.model_copy(update={"repository": longest}))
    ids = {name.rsplit("/", 1)[1] for name in cloud.registry.repositories}
    assert {jobs_repository(longest, ALICE), built_repository(longest, ALICE)} <= ids
