"""A job's own service account (`service_account:`): its VM runs as that account, and job_done and
the credentials broker accept identity tokens of that account only, for that job's runs.

Every VM of a job without its own account runs as spotcron's VM account, so a token of that
account (or of another job's account) must never pass for a VM of a job that names its own.
"""

from __future__ import annotations

import pytest

from spotcron.core.descriptor import RunDescriptor
from spotcron.gcp.compute import instance_body
from spotcron.testing.harness import CREDENTIALS_URL, app, make_spec

RUN = "20261122-1200"
VM = "sc-bot-20261122-1200-a1"
JOB_ACCOUNT = "bot-runner@proj.iam.gserviceaccount.com"
OTHER_JOB_ACCOUNT = "nightly-runner@proj.iam.gserviceaccount.com"
VM_ACCOUNT = "spotcron-vm@proj.iam.gserviceaccount.com"
CLOUD_PLATFORM = "https://www.googleapis.com/auth/cloud-platform"


@pytest.fixture
def running(h):
    h.start(make_spec(service_account=JOB_ACCOUNT))
    h.upload("bot", RUN)
    assert h.record("bot", RUN).state == "running"
    return h


def ask_credentials(token: str):
    return app("credentials").post("/", headers={"Authorization": f"Bearer {token}"})


def test_the_vm_is_created_as_the_jobs_account_and_the_attempt_records_it(running):
    request = running.compute.created[0]
    assert request.service_account == JOB_ACCOUNT
    assert instance_body(request)["serviceAccounts"] == [{"email": JOB_ACCOUNT, "scopes": [CLOUD_PLATFORM]}]
    assert running.record("bot", RUN).attempts[0].service_account == JOB_ACCOUNT
    # The container reaches the metadata server (and so its own account's tokens): that is the
    # point of naming an account.
    assert RunDescriptor.from_metadata(request.metadata["spotcron-run"]).metadata_access is True


def test_a_job_without_an_account_runs_as_spotcrons_vm_account_and_stays_walled(h):
    h.start(make_spec())
    request = h.compute.created[0]
    assert request.service_account == VM_ACCOUNT
    assert h.record("bot", RUN).attempts[0].service_account is None
    assert RunDescriptor.from_metadata(request.metadata["spotcron-run"]).metadata_access is False


@pytest.mark.parametrize("email", [VM_ACCOUNT, OTHER_JOB_ACCOUNT], ids=["spotcron-vm-account", "another-jobs-account"])
def test_job_done_refuses_a_token_of_any_other_account(running, email):
    r = running.callback("bot", RUN, token=running.token("bot", RUN, email=email))
    assert r.status_code == 403
    assert r.get_json()["error"] == (f"token is for {email!r}, but attempt 1 of bot/{RUN} runs as {JOB_ACCOUNT!r}")
    assert running.live_vms() == [VM]
    assert running.record("bot", RUN).state == "running"
    assert running.compute.calls["delete"] == 0


def test_job_done_accepts_the_jobs_own_account(running):
    r = running.callback("bot", RUN, token=running.token("bot", RUN, email=JOB_ACCOUNT))
    assert r.status_code == 200, r.get_json()
    assert running.record("bot", RUN).state == "succeeded"


@pytest.mark.parametrize("email", [VM_ACCOUNT, OTHER_JOB_ACCOUNT], ids=["spotcron-vm-account", "another-jobs-account"])
def test_the_broker_refuses_a_token_of_any_other_account(running, email):
    response = ask_credentials(running.token("bot", RUN, audience=CREDENTIALS_URL, email=email))
    assert response.status_code == 403
    assert response.json["error"] == f"token is for {email!r}, but attempt 1 of bot/{RUN} runs as {JOB_ACCOUNT!r}"
    assert running.minter.minted == []


def test_the_broker_gives_the_jobs_own_account_its_attempts_token(running):
    response = ask_credentials(running.token("bot", RUN, audience=CREDENTIALS_URL, email=JOB_ACCOUNT))
    assert response.status_code == 200, response.json
    assert len(running.minter.minted) == 1


def test_a_job_accounts_token_is_refused_for_a_job_that_runs_as_the_vm_account(h):
    h.start(make_spec())
    r = h.callback("bot", RUN, token=h.token("bot", RUN, email=JOB_ACCOUNT))
    assert r.status_code == 403
    assert r.get_json()["error"] == f"token is for {JOB_ACCOUNT!r}, but attempt 1 of bot/{RUN} runs as {VM_ACCOUNT!r}"


def test_a_spec_without_an_account_keeps_the_payload_and_digest_it_had_before_the_field():
    assert "service_account" not in make_spec().to_payload()
    assert make_spec(service_account=JOB_ACCOUNT).to_payload()["service_account"] == JOB_ACCOUNT
