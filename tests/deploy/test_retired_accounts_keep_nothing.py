"""An account no job names any more keeps nothing deploy granted, even after a deploy that failed midway.

Deploy learns which accounts deployed jobs named from the deployed specs' listing, and revokes
what it granted an account no job names now (deploy/apply.retired_accounts). The deployed spec that
named it is rewritten in phase 1 (resources.phase), with the account's own policy and its
repository's; its invoker bindings on job_done and the credentials function are function policies,
phase 3, after the functions (phase 2). docs/security.md ("Limits of what is built") says only "a
deploy that stops between the two forgets the account": but any function that fails to deploy
(a build error, a quota) stops the apply between them, and no later deploy revokes the rest. The
account then keeps `run.invoker` on both functions for ever.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spotcron.deploy.apply import DeployFailed
from spotcron.deploy.source import build_source
from tests.deploy.conftest import Deployer, make_source_root
from tests.deploy.test_job_accounts import JOB, JOB_ACCOUNT, create_account, every_binding_of, name_account
from tests.fakes.deploy.cloud import FakeCloud


def test_an_account_retired_by_a_deploy_whose_functions_failed_loses_its_grants_at_the_next_deploy(
        deployer: Deployer, cloud: FakeCloud, jobs_dir: Path, tmp_path: Path) -> None:
    create_account(cloud)
    name_account(jobs_dir)
    deployer.deploy(deployer.jobs(jobs_dir))
    assert every_binding_of(cloud, JOB)
    bot = jobs_dir / "bot.yaml"
    bot.write_text(bot.read_text().replace(f"service_account: {JOB_ACCOUNT}\n", ""))
    jobs = deployer.jobs(jobs_dir)
    # The same deploy also ships new function code, whose build fails this time.
    deployer.source = build_source(make_source_root(tmp_path / "src2", main="def start_job(event):\n    return 2\n"))
    cloud.functions.fail_builds = True
    with pytest.raises(DeployFailed):
        deployer.deploy(jobs)
    cloud.functions.fail_builds = False
    deployer.deploy(jobs)  # run deploy again, as the failure says
    cloud.clock.advance(cloud.access.grant_delay_s)
    assert every_binding_of(cloud, JOB) == set(), (
        f"{JOB_ACCOUNT}, which no job names any more, keeps {sorted(every_binding_of(cloud, JOB))}")
