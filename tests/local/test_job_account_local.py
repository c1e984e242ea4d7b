"""Local mode runs a job with its own service account the way Google Cloud would: the local VM's
metadata server reports the job's account, its identity tokens carry it, and job_done accepts
the run's callback only because that is the account the attempt records."""

from __future__ import annotations

import pytest

from spotcron.core.loader import load_jobs

from .conftest import write_job

pytestmark = pytest.mark.slow

ACCOUNT = "writer-runner@local-project.iam.gserviceaccount.com"
JOB = f"""\
schedule: "0 3 * * *"
image: spotcron/test:latest
timeout: 2m
machine: {{type: e2-small}}
service_account: {ACCOUNT}
local:
  command: [python3, -c, "print('hello as my own account')"]
"""


def test_a_job_with_its_own_account_runs_as_it_locally(make_stack, tmp_path):
    stack = make_stack()
    write_job(tmp_path / "jobs", "writer", JOB)
    [spec] = load_jobs([tmp_path / "jobs"])
    seen: list[str] = []
    register = stack.metadata.register

    def spy(name, zone, metadata, **kwargs):
        seen.append(kwargs.get("service_account"))
        return register(name, zone, metadata, **kwargs)

    stack.metadata.register = spy
    runs = stack.run_now(spec)
    [record] = stack.wait(runs, timeout=60)
    assert record.state == "succeeded", record.reason
    assert seen == [ACCOUNT]
    assert record.current_attempt.service_account == ACCOUNT
