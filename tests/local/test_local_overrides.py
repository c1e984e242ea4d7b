"""`spotcron run JOB --env K=V` on `spotcron up`: the overrides the CLI writes are bound to the job
and the request, and start_job applies them to that run."""

from __future__ import annotations

import json

import pytest

from spotcron.core.loader import load_jobs
from spotcron.core.overrides import PREFIX, Overrides

from .conftest import python_job, write_job

pytestmark = pytest.mark.slow

SAYS = "import os; print('greeting=' + os.environ.get('GREETING', 'none'))"


def test_a_local_manual_run_gets_overrides_bound_to_its_job_and_request(make_stack, tmp_path):
    stack = make_stack()
    write_job(tmp_path / "jobs", "greeter", python_job(SAYS, timeout="2m"))
    spec = next(s for s in load_jobs([tmp_path / "jobs"]) if s.name == "greeter")
    [(job, run_id)] = stack.run_now(spec, Overrides(env={"GREETING": "hi"}))
    [record] = stack.wait([(job, run_id)], timeout=60)
    assert record.state == "succeeded", record.reason
    assert record.overrides["env"] == ["GREETING"] and record.spec["env"]["GREETING"] == "hi"
    [name, used] = stack.deps.blobs.list(PREFIX)  # the overrides, and the mark of the run they served
    stored = json.loads(stack.deps.blobs.read(name).data)
    assert stored["job"] == "greeter" and stored["nonce"] == run_id.split("-")[2], stored
    assert used == name.removesuffix(".json") + ".used"
    assert json.loads(stack.deps.blobs.read(used).data) == {"job": "greeter", "run": run_id}
