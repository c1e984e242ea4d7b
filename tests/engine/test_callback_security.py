"""job_done only believes Google-signed identity tokens of our own VMs (RELIABILITY.md: Security)."""

from __future__ import annotations

import pytest

from spotcron.engine.ports import Instance
from spotcron.testing.harness import make_spec
from spotcron.testing.token_issuer import ClockedIdentity

RUN = "20261122-1200"
VM = "sc-bot-20261122-1200-a1"


def assert_nothing_changed(h):
    assert h.live_vms() == [VM]
    assert h.record("bot", RUN).state == "running"
    assert h.compute.calls["delete"] == 0


def test_no_token(running):
    r = running.callback("bot", RUN, headers={})
    assert r.status_code == 401 and r.get_json() == {"error": "missing bearer token"}
    assert_nothing_changed(running)


def test_not_a_bearer_header(running):
    r = running.callback("bot", RUN, headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert r.status_code == 401
    assert_nothing_changed(running)


def test_malformed_token(running):
    r = running.callback("bot", RUN, token="not-a-jwt")
    assert r.status_code == 401 and r.get_json()["error"] == "invalid token: not a JWT"
    assert_nothing_changed(running)


def test_wrong_signature(running):
    forger = ClockedIdentity(running.clock)
    r = running.callback("bot", RUN, token=running.token("bot", RUN, issuer=forger))
    assert r.status_code == 401 and r.get_json()["error"] == "invalid token: signature does not verify"
    assert_nothing_changed(running)


def test_wrong_audience(running):
    r = running.callback("bot", RUN, token=running.token("bot", RUN, audience="https://evil.example/job_done"))
    assert r.status_code == 401 and "audience 'https://evil.example/job_done' is not" in r.get_json()["error"]
    assert_nothing_changed(running)


def test_wrong_service_account(running):
    token = running.token("bot", RUN, email="123-compute@developer.gserviceaccount.com")
    r = running.callback("bot", RUN, token=token)
    assert r.status_code == 403
    assert r.get_json()["error"] == ("token is for '123-compute@developer.gserviceaccount.com', but attempt 1 "
                                     f"of bot/{RUN} runs as 'spotcron-vm@proj.iam.gserviceaccount.com'")
    assert_nothing_changed(running)


def test_wrong_project(running):
    r = running.callback("bot", RUN, token=running.token("bot", RUN, project="someone-else"))
    assert r.status_code == 403 and r.get_json()["error"] == "token is from project 'someone-else', not 'proj'"
    assert_nothing_changed(running)


def test_expired(running):
    token = running.token("bot", RUN, lifetime_s=60)
    running.clock.advance(3600)
    r = running.callback("bot", RUN, token=token)
    assert r.status_code == 401 and r.get_json()["error"] == "invalid token: token expired"
    assert running.compute.calls["delete"] == 0


def test_replayed(running):
    token = running.token("bot", RUN)
    assert running.callback("bot", RUN, token=token).status_code == 200
    assert running.callback("bot", RUN, token=token).status_code == 409


@pytest.mark.parametrize("respell", [
    lambda token: token + "!!!!",  # base64url decoders skip characters outside the alphabet
    # The standard alphabet decodes the same: only the signature segment, which is not signed.
    lambda token: token.rpartition(".")[0] + "." + token.rpartition(".")[2].replace("-", "+").replace("_", "/"),
])
def test_replayed_in_another_spelling(running, respell):
    token = running.token("bot", RUN)
    copy = respell(token)
    assert copy != token
    assert running.callback("bot", RUN, token=token).status_code == 200
    r = running.callback("bot", RUN, token=copy)
    assert r.status_code == 409 and r.get_json() == {"error": "this token was already used", "replay": True}


def test_vm_a_naming_vm_b_in_the_body(running):
    spec_b = make_spec(schedule="0 */4 * * *")
    running.start(spec_b.model_copy(update={"name": "other"}))
    token_a = running.token("bot", RUN)
    r = running.callback("other", RUN, token=token_a)
    assert r.status_code == 403
    assert r.get_json()["error"] == f"the token belongs to VM {VM}, which does not run other/{RUN} attempt 1"
    assert sorted(running.live_vms()) == sorted([VM, "sc-other-20261122-1200-a1"])
    assert running.record("other", RUN).state == "running"


def test_a_vm_without_our_label(h):
    foreign = Instance(name=VM, zone="us-central1-a", status="RUNNING", labels={}, machine_type="e2-small",
                       provisioning_model="SPOT", created_at=h.clock.now())
    h.compute.add_foreign(foreign)
    r = h.callback("bot", RUN, token=h.token("bot", RUN, zone="us-central1-a"))
    assert r.status_code == 403 and r.get_json()["error"] == f"VM {VM} is not a spotcron VM of this run; left alone"
    assert h.compute.all_instances() == [foreign]


@pytest.mark.parametrize("body", [
    {"job": "bot"},
    {"job": "bot", "run_id": RUN, "attempt": 1, "status": "exploded"},
    {"job": "bot", "run_id": RUN, "attempt": "one", "status": "exited"},
    [1, 2, 3],
    {"_unparsable": True},
])
def test_malformed_callback_bodies_get_400(running, body):
    r = running.callback("bot", RUN, body=body, token=running.token("bot", RUN))
    assert r.status_code == 400 and r.get_json()["error"] == "malformed callback body"
    assert_nothing_changed(running)


def test_get_is_not_allowed(running):
    from spotcron.testing.harness import app

    assert app("job_done").get("/").status_code == 405


def test_a_transient_failure_asks_the_runner_to_retry(running):
    from spotcron.core.errors import Transient

    class Unreachable:
        def verify(self, token, audience):
            raise Transient("could not fetch Google's certificates")

    running.deps.identity = Unreachable()
    r = running.callback("bot", RUN, token="x.y.z")
    assert r.status_code == 503 and r.get_json()["retry"] is True
    assert_nothing_changed(running)
