"""The credentials broker, through its function entry point: who gets a storage token, and for what.

The VM account holds no storage role; the runner's only storage credential is what this
endpoint mints, so each refusal here is a wall between a job and everything else in the bucket.
"""

from __future__ import annotations

import pytest

from spotcron.engine.broker import boundary_rules
from spotcron.testing.harness import CREDENTIALS_URL, JOB_DONE_URL, app, make_spec

RUN = "20261122-1200"
VM = "sc-bot-20261122-1200-a1"


def ask(h, token: str | None):
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return app("credentials").post("/", headers=headers)


@pytest.fixture
def running(h):
    h.start(make_spec())
    assert h.record("bot", RUN).state == "running"
    return h


def test_the_live_attempts_vm_gets_a_token_for_its_own_prefixes_only(running):
    h = running
    response = ask(h, h.token("bot", RUN, audience=CREDENTIALS_URL))
    assert response.status_code == 200, response.json
    body = response.json
    assert body["token_type"] == "Bearer" and body["expires_in"] > 0
    assert h.minter.rules_of(body["access_token"]) == boundary_rules("proj-results", "bot", RUN, 1)


def test_the_rules_reach_the_attempt_and_the_checkpoint_and_nothing_else():
    rules = boundary_rules("b", "bot", RUN, 1)
    expressions = [r["availabilityCondition"]["expression"] for r in rules]
    listing = "api.getAttribute('storage.googleapis.com/objectListPrefix', '')"
    assert expressions == [
        f"resource.name.startsWith('projects/_/buckets/b/objects/runs/bot/{RUN}/attempt-1/') || "
        f"{listing}.startsWith('runs/bot/{RUN}/attempt-1/')",
        f"resource.name.startsWith('projects/_/buckets/b/objects/runs/bot/{RUN}/checkpoint/') || "
        f"{listing}.startsWith('runs/bot/{RUN}/checkpoint/')",
    ]
    assert {r["availableResource"] for r in rules} == {"//storage.googleapis.com/projects/_/buckets/b"}
    assert [r["availablePermissions"] for r in rules] == [
        ["inRole:roles/storage.objectViewer", "inRole:roles/storage.legacyBucketWriter"]] * 2


def test_the_vms_token_writes_replaces_reads_and_deletes_its_objects_but_cannot_place_a_hold():
    from spotcron.local.grants import Access, Grant

    grant = Grant(expires_at=2**40, rules=tuple(boundary_rules("b", "bot", RUN, 1)))
    own = f"runs/bot/{RUN}/attempt-1/results/out.csv"
    for permission in ("storage.objects.create", "storage.objects.delete", "storage.objects.get"):
        assert grant.allows(Access(permission, "b", own)), permission
    assert grant.allows(Access("storage.objects.list", "b", list_prefix=f"runs/bot/{RUN}/attempt-1/"))
    # objects.patch with temporaryHold / eventBasedHold asks storage.objects.update.
    assert not grant.allows(Access("storage.objects.update", "b", own))
    assert not grant.allows(Access("storage.objects.update", "b", f"runs/bot/{RUN}/checkpoint/state.tar"))
    assert not grant.allows(Access("storage.buckets.get", "b"))


def test_a_job_done_token_is_not_a_credentials_token(running):
    h = running
    assert ask(h, h.token("bot", RUN, audience=JOB_DONE_URL)).status_code == 401
    assert h.minter.minted == []


def test_no_token_or_another_account_gets_nothing(running):
    h = running
    assert ask(h, None).status_code == 401
    other = h.token("bot", RUN, audience=CREDENTIALS_URL, email="attacker@proj.iam.gserviceaccount.com")
    assert ask(h, other).status_code == 403
    assert h.minter.minted == []


def test_a_vm_that_is_not_the_runs_live_attempt_gets_nothing(running):
    h = running
    # Another run's name: no such VM.
    ghost = h.token("bot", RUN, audience=CREDENTIALS_URL, instance_name="sc-bot-20261122-0800-a1")
    assert ask(h, ghost).status_code == 403
    # The same VM after its run ended (job_done deleted it, or a stale token): nothing.
    h.finish_ok("bot", RUN)
    assert ask(h, h.token("bot", RUN, audience=CREDENTIALS_URL)).status_code == 403
    assert h.minter.minted == []


def test_an_instance_id_from_another_vm_of_the_same_name_gets_nothing(running):
    h = running
    token = h.token("bot", RUN, audience=CREDENTIALS_URL, instance_id="7")
    response = ask(h, token)
    assert response.status_code == 403 and "instance id" in response.json["error"]
