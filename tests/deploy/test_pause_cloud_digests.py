"""`spotcron pause|resume --cloud` where the deployed spec's bytes are not what this version would
write for it (a spec deployed by an earlier spotcron, or written by hand): the entry's message must
go on naming the digest start_job compares, the stored bytes' sha256."""

from __future__ import annotations

import base64
import json

from spotcron.deploy.pausing import set_cloud_paused
from spotcron.engine.deployed import SpecStore, digest_of
from spotcron.gcp.storage import GcsBlobs
from tests.deploy.conftest import BUCKET, JOBS_DIR, Deployer, make_settings, quick_caller
from tests.fakes.deploy.cloud import FakeCloud

PER_JOB = make_settings()


def _rewrite(cloud: FakeCloud, name: str, data: bytes) -> None:
    """deployed/NAME.json as other bytes of the same spec, and its entry naming their digest, as a
    deploy that wrote them would have left it."""
    cloud.clients().storage.bucket(BUCKET).blob(f"deployed/{name}.json").upload_from_string(data)
    [entry] = [key for key in cloud.scheduler.jobs if key.endswith(f"/jobs/spotcron-{name}")]
    body = json.dumps({"digest": digest_of(data), "job": name}, sort_keys=True, separators=(",", ":"))
    cloud.scheduler.jobs[entry]["pubsubTarget"]["data"] = base64.b64encode(body.encode()).decode()


def _accepted(cloud: FakeCloud, name: str) -> bool:
    """Whether start_job runs what the entry's message names."""
    message = json.loads(cloud.scheduler.data(f"spotcron-{name}"))
    store = SpecStore(GcsBlobs(BUCKET, client=cloud.clients().storage))
    try:
        store.resolve(message["job"], message["digest"])
    except Exception:
        return False
    return True


def test_resuming_a_running_job_keeps_its_entry_naming_the_deployed_bytes(deployer: Deployer,
                                                                         cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR), settings=PER_JOB)
    blob = cloud.clients().storage.bucket(BUCKET).blob("deployed/bot.json")
    spec = json.loads(blob.download_as_bytes())
    _rewrite(cloud, "bot", json.dumps(spec, indent=2).encode())  # valid, the same spec, other bytes
    assert _accepted(cloud, "bot")

    set_cloud_paused(PER_JOB, "bot", False, cloud.clients(), quick_caller())  # it runs already

    assert _accepted(cloud, "bot"), "every scheduled start of bot is refused now"


def test_pausing_a_paused_job_keeps_its_entry_naming_the_deployed_bytes(deployer: Deployer,
                                                                       cloud: FakeCloud) -> None:
    deployer.deploy(deployer.jobs(JOBS_DIR), settings=PER_JOB)
    # nightly is deployed paused (its file says so)
    blob = cloud.clients().storage.bucket(BUCKET).blob("deployed/nightly.json")
    spec = json.loads(blob.download_as_bytes())
    assert spec["paused"] is True
    _rewrite(cloud, "nightly", json.dumps(spec, indent=2).encode())

    set_cloud_paused(PER_JOB, "nightly", True, cloud.clients(), quick_caller())

    assert _accepted(cloud, "nightly"), "`spotcron run nightly --cloud` and the entry once resumed are refused"
