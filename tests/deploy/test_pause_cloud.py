"""`spotcron pause|resume --cloud` without a deploy (deploy/pausing.py), on the fake Google Cloud
through the real clients: per-job mode pauses the entry; shared mode rewrites the deployed spec and
the dispatch entry's version."""

from __future__ import annotations

import base64
import json

import pytest

from spotcron.core.spec import JobSpec
from spotcron.deploy.pausing import NotOnCloud, set_cloud_paused
from spotcron.engine.deployed import canonical, digest_of, specs_version
from spotcron.engine.dispatch_specs import BucketSpecs
from spotcron.gcp.storage import GcsBlobs
from tests.deploy.conftest import BUCKET, JOBS_DIR, PROJECT, Deployer, make_settings, quick_caller
from tests.fakes.deploy.cloud import FakeCloud

PER_JOB = make_settings()
SHARED = make_settings(scheduling="shared")
ENTRY = f"projects/{PROJECT}/locations/us-central1/jobs/spotcron-bot"


def _paused(jobs: list[JobSpec], name: str, paused: bool = True) -> list[JobSpec]:
    """`jobs` as the job files say once `spotcron pause NAME` has edited them."""
    return [JobSpec.from_payload({**job.to_payload(), "paused": paused}) if job.name == name else job
            for job in jobs]


def test_per_job_pause_then_resume_sets_the_spec_and_the_entry_together(deployer: Deployer,
                                                                         cloud: FakeCloud) -> None:
    from spotcron.engine.deployed import start_message

    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs, settings=PER_JOB)
    before = cloud.state()
    cloud.reset_log()

    paused = set_cloud_paused(PER_JOB, "bot", True, cloud.clients(), quick_caller())
    assert paused.changes[0] == f"deployed spec gs://{BUCKET}/deployed/bot.json: paused: true"
    assert paused.changes[1].startswith(f"scheduler entry {ENTRY}: its message names the deployed spec's digest")
    assert cloud.scheduler.entries()["spotcron-bot"]["state"] == "PAUSED"
    # The deployed spec is the job file as paused (nothing else of the file), and the entry's message
    # names its digest: `run --cloud` from the edited file, and the entry once resumed, both match it.
    [edited] = [job for job in _paused(jobs, "bot") if job.name == "bot"]
    assert cloud.storage.objects[(BUCKET, "deployed/bot.json")][0] == canonical(edited)
    assert json.loads(base64.b64decode(cloud.scheduler.entries()["spotcron-bot"]["pubsubTarget"]["data"])) == \
        json.loads(start_message(edited))
    # The next deploy, from the edited file, has nothing left to do.
    assert deployer.plan(_paused(jobs, "bot")).actions == []

    resumed = set_cloud_paused(PER_JOB, "bot", False, cloud.clients(), quick_caller())
    assert resumed.changes[0] == f"deployed spec gs://{BUCKET}/deployed/bot.json: paused: false"
    # Only the paused spec's digest is marked now (engine/deployed.py; the lifecycle deletes it).
    assert _without_digests(cloud.state()) == _without_digests(before)


def test_per_job_a_second_pause_changes_nothing(deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR), settings=PER_JOB)
    set_cloud_paused(PER_JOB, "bot", True, cloud.clients(), quick_caller())
    cloud.reset_log()
    again = set_cloud_paused(PER_JOB, "bot", True, cloud.clients(), quick_caller())
    assert again.already and again.changes == []
    assert cloud.changing_calls() == []
    # nightly was deployed paused (its file says so): already paused on the cloud too
    assert set_cloud_paused(PER_JOB, "nightly", True, cloud.clients(), quick_caller()).already


def test_per_job_a_job_not_deployed_is_an_error_that_says_to_deploy(deployer: Deployer, cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR), settings=PER_JOB)
    cloud.reset_log()
    with pytest.raises(NotOnCloud, match=r"ghost is not deployed on Google Cloud: no scheduler entry spotcron-ghost "
                                         r".*`spotcron deploy` deploys it"):
        set_cloud_paused(PER_JOB, "ghost", True, cloud.clients(), quick_caller())
    assert cloud.changing_calls() == []


def test_shared_pause_rewrites_the_deployed_spec_and_the_dispatch_version(deployer: Deployer,
                                                                          cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs, settings=SHARED)
    old_version = specs_version(jobs)
    # A warm dispatcher: it has read the set once, at the version the dispatch entry names.
    warm = BucketSpecs(GcsBlobs(BUCKET, client=cloud.clients().storage))
    assert not {s.name: s for s in warm.current(old_version)}["bot"].paused
    cloud.reset_log()

    outcome = set_cloud_paused(SHARED, "bot", True, cloud.clients(), quick_caller())

    data, _ = cloud.storage.objects[(BUCKET, "deployed/bot.json")]
    deployed = JobSpec.from_payload(json.loads(data))
    bot = {job.name: job for job in jobs}["bot"]
    assert deployed == JobSpec.from_payload({**bot.to_payload(), "paused": True})  # nothing else of the job
    assert cloud.storage.custom_metadata[(BUCKET, "deployed/bot.json")] == {"spotcron-digest": digest_of(data)}
    new_version = specs_version(_paused(jobs, "bot"))
    assert new_version != old_version
    assert json.loads(cloud.scheduler.data("spotcron-dispatch")) == {"dispatch": True, "specs": new_version}
    assert cloud.scheduler.entries()["spotcron-dispatch"]["state"] == "ENABLED"
    assert outcome.changes == [
        f"deployed spec gs://{BUCKET}/deployed/bot.json: paused: true",
        f"scheduler entry projects/{PROJECT}/locations/us-central1/jobs/spotcron-dispatch: its message names the "
        f"deployed specs' version {new_version[:12]}, so running dispatchers read them again"]
    assert [(c.method, c.path) for c in cloud.changing_calls()] == [  # the spec first, as deploy orders them
        # the old and new digests' markers, the new one's since object, then the spec
        *[("POST", f"/upload/storage/v1/b/{BUCKET}/o")] * 4,
        ("PATCH", f"/v1/projects/{PROJECT}/locations/us-central1/jobs/spotcron-dispatch")]
    # The warm dispatcher, given the entry's new version, reads the specs again and skips bot.
    assert {s.name: s for s in warm.current(new_version)}["bot"].paused
    # What the next deploy would write from the edited job file is exactly what is there now.
    assert deployer.plan(_paused(jobs, "bot"), SHARED).actions == []

    cloud.reset_log()
    assert set_cloud_paused(SHARED, "bot", True, cloud.clients(), quick_caller()).already
    assert cloud.changing_calls() == []

    set_cloud_paused(SHARED, "bot", False, cloud.clients(), quick_caller())
    assert json.loads(cloud.scheduler.data("spotcron-dispatch")) == {"dispatch": True, "specs": old_version}
    assert deployer.plan(jobs, SHARED).actions == []


def test_shared_a_pause_that_stopped_before_the_entry_is_finished_by_the_next(deployer: Deployer,
                                                                            cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs, settings=SHARED)
    # As an earlier pause left it when it stopped between its two writes: the spec paused, the entry not.
    bot = {job.name: job for job in jobs}["bot"]
    cloud.clients().storage.bucket(BUCKET).blob("deployed/bot.json").upload_from_string(
        canonical(JobSpec.from_payload({**bot.to_payload(), "paused": True})))
    finished = set_cloud_paused(SHARED, "bot", True, cloud.clients(), quick_caller())
    assert len(finished.changes) == 1 and "spotcron-dispatch" in finished.changes[0]
    assert json.loads(cloud.scheduler.data("spotcron-dispatch"))["specs"] == specs_version(_paused(jobs, "bot"))


def test_shared_errors_name_what_is_missing(deployer: Deployer, cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs, settings=PER_JOB)  # the stack file says shared; the stack is per-job
    with pytest.raises(NotOnCloud, match=r"not deployed with scheduling: shared .* no scheduler entry "
                                         r"spotcron-dispatch"):
        set_cloud_paused(SHARED, "bot", True, cloud.clients(), quick_caller())
    deployer.deploy(jobs, settings=SHARED)
    cloud.reset_log()
    with pytest.raises(NotOnCloud, match=rf"ghost is not deployed on Google Cloud: no deployed spec of it in "
                                         rf"gs://{BUCKET}/deployed/"):
        set_cloud_paused(SHARED, "ghost", True, cloud.clients(), quick_caller())
    assert cloud.changing_calls() == []


def _without_digests(state: dict) -> dict:
    return {**state, "objects": [o for o in state["objects"] if not o[1].startswith("digests/")]}
