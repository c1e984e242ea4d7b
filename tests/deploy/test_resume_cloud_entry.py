"""`spotcron resume --cloud` in per-job mode must make the entry's starts run, not only fire."""

from __future__ import annotations

import json

import pytest

from spotcron.core.spec import JobSpec
from spotcron.deploy.pausing import NotOnCloud, set_cloud_paused
from spotcron.engine.deployed import SpecStore
from spotcron.gcp.storage import GcsBlobs
from tests.deploy.conftest import BUCKET, JOBS_DIR, Deployer, make_settings, quick_caller
from tests.fakes.deploy.cloud import FakeCloud

PER_JOB = make_settings()


def _started_spec(cloud: FakeCloud, entry: str):
    """The spec start_job resolves for the entry's message (None: it refuses the message)."""
    body = json.loads(cloud.scheduler.data(entry))
    found = SpecStore(GcsBlobs(BUCKET, client=cloud.clients().storage)).read(body["job"])
    return found.spec if found is not None and found.digest == body["digest"] else None


def test_per_job_resume_of_a_job_deployed_paused_makes_its_ticks_run(deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR), settings=PER_JOB)  # nightly's file says paused: true
    assert cloud.scheduler.entries()["spotcron-nightly"]["state"] == "PAUSED"

    set_cloud_paused(PER_JOB, "nightly", False, cloud.clients(), quick_caller())

    assert cloud.scheduler.entries()["spotcron-nightly"]["state"] == "ENABLED"
    spec = _started_spec(cloud, "spotcron-nightly")
    assert spec is not None, "start_job would refuse the entry's message"
    # launch() ignores a scheduled start of a spec that says paused: the entry would fire for nothing.
    assert not spec.paused
    # The next deploy, from the job file `spotcron resume` edited, finds nothing to change.
    resumed = [JobSpec.from_payload({**job.to_payload(), "paused": False}) if job.name == "nightly" else job
               for job in deployer.jobs(JOBS_DIR)]
    assert deployer.plan(resumed, PER_JOB).actions == []


def test_per_job_resume_when_the_deployed_spec_is_gone_is_an_error(deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR), settings=PER_JOB)
    set_cloud_paused(PER_JOB, "bot", True, cloud.clients(), quick_caller())
    cloud.clients().storage.bucket(BUCKET).blob("deployed/bot.json").delete()
    cloud.reset_log()
    # Every start of the resumed entry would be refused (no deployed spec): say so, change nothing.
    with pytest.raises(NotOnCloud, match="deployed spec"):
        set_cloud_paused(PER_JOB, "bot", False, cloud.clients(), quick_caller())
    assert cloud.changing_calls() == []
