"""A publisher on the start topic, or an editor of a scheduler entry, attacking start_job.

Each message goes through the real start_job entry point. What must hold: nothing is created,
nothing of any job is touched, and one structured security log line says what was refused.
"""

from __future__ import annotations

import json

import pytest

from spotcron.core import layout
from spotcron.core.descriptor import RunDescriptor
from spotcron.engine.deployed import SpecStore, digest, start_message
from spotcron.testing.harness import make_spec

MINER = {
    "name": "bot", "schedule": "* * * * *", "image": "docker.io/attacker/miner",
    "machine": {"type": "a3-megagpu-8g", "spot": False, "disk_gb": 2048}, "timeout": "120d",
}


def nothing_created(h) -> None:
    assert h.compute.created == []
    assert [n for n in h.blobs.list("") if not n.startswith((layout.DEPLOYED, layout.DIGESTS))] == []


@pytest.fixture
def deployed(h):
    spec = make_spec()
    SpecStore(h.blobs).write(spec)
    return spec


def test_a_message_carrying_its_own_spec_creates_nothing(h, deployed, security_log):
    assert h.start(MINER).status_code == 200  # acknowledged: no redelivery
    nothing_created(h)
    [line] = security_log
    assert line["event"] == "bad_message" and "does not name a deployed job" in line["reason"]


def test_a_spec_next_to_a_valid_job_and_digest_is_ignored(h, deployed):
    """The deployed spec runs, never the one the message adds."""
    hostile = {**json.loads(start_message(deployed)), **MINER, "matrix": [{"name": f"e{i}"} for i in range(20)]}
    h.start(hostile)
    [request] = h.compute.created
    assert request.machine_type == "e2-small" and request.disk_gb == 10 and request.spot
    assert RunDescriptor.from_metadata(request.metadata["spotcron-run"]).image == "us-docker.pkg.dev/p/r/bot:1"


def test_an_unknown_job_is_refused_and_logged(h, deployed, security_log):
    h.start({"job": "miner", "digest": "0" * 64})
    nothing_created(h)
    [line] = security_log
    assert line == {"event": "start_refused", "security": True, "job": "miner", "digest": "0" * 64,
                    "reason": "no job 'miner' is deployed"}


def test_a_digest_other_than_the_deployed_one_is_refused(h, deployed, security_log):
    changed = make_spec(machine={"type": "n1-standard-8", "gpu": {"type": "nvidia-tesla-t4", "count": 1}})
    h.start({"job": "bot", "digest": digest(changed)})
    nothing_created(h)
    [line] = security_log
    assert line["event"] == "start_refused" and line["deployed_digest"] == digest(deployed)
    assert "is not the deployed spec's" in line["reason"] and "spotcron deploy" in line["reason"]


@pytest.mark.parametrize("job", ["../runs/bot", "deployed/bot", "", "x" * 500, 7, None])
def test_a_hostile_job_name_reads_nothing_else(h, deployed, job):
    h.start({"job": job, "digest": digest(deployed)})
    nothing_created(h)


def test_a_huge_matrix_in_a_message_is_refused_before_parsing(h, deployed):
    """The 45 KB message with 2,700 entries: refused by size, no insert at all."""
    body = json.dumps({**MINER, "matrix": [{"name": f"e{i}", "machine": {"type": "a3-megagpu-8g"}}
                                           for i in range(2700)]}).encode()
    assert len(body) > 45_000
    h.start(body)
    nothing_created(h)


def test_another_jobs_hostile_settings_touch_none_of_its_runs(h, deployed):
    """history_limit: 1 and concurrency: replace in a message naming an existing job."""
    for _ in range(5):
        h.start(deployed)
        [run_id] = [r.run_id for r in h.records("bot") if not r.terminal]
        h.finish_ok("bot", run_id)
        h.clock.advance(4 * 3600)
    h.start(deployed)
    live = [r for r in h.records("bot") if not r.terminal]
    assert len(h.records("bot")) == 6 and len(live) == 1
    before = {n: h.blobs.read(n).generation for n in h.blobs.list("runs/")}
    vms, deleted = h.live_vms(), list(h.compute.deleted)
    h.clock.advance(60)
    hostile = {"name": "bot", "schedule": "* * * * *", "image": "us-docker.pkg.dev/p/r/bot:1",
               "history_limit": 1, "concurrency": "replace"}
    h.start(hostile)
    h.start({**hostile, "job": "bot", "digest": "f" * 64})
    assert {n: h.blobs.read(n).generation for n in h.blobs.list("runs/")} == before
    assert h.live_vms() == vms and h.compute.deleted == deleted
