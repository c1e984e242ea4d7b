"""One verifier of instance identity tokens (engine/callers.py) behind job_done and the broker.

Each forged or misplaced token below is sent to both endpoints, each with its own audience:
both refuse it, with the same status and the same words, and neither changes anything.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from spotcron.testing.harness import CREDENTIALS_URL, JOB_DONE_URL, app
from spotcron.testing.token_issuer import ClockedIdentity

RUN = "20261122-1200"
VM = "sc-bot-20261122-1200-a1"


def ask_broker(h, token):
    return app("credentials").post("/", headers={"Authorization": f"Bearer {token}"})


def both(h, **token_args):
    """(status, error) from job_done and from the broker for the same forged token."""
    done = h.callback("bot", RUN, token=h.token("bot", RUN, audience=JOB_DONE_URL, **token_args))
    broker = ask_broker(h, h.token("bot", RUN, audience=CREDENTIALS_URL, **token_args))
    return (done.status_code, done.get_json()["error"]), (broker.status_code, broker.get_json()["error"])


@pytest.mark.parametrize(("token_args", "status", "error"), [
    ({"email": "attacker@proj.iam.gserviceaccount.com"}, 403,
     f"token is for 'attacker@proj.iam.gserviceaccount.com', but attempt 1 of bot/{RUN} runs as "
     "'spotcron-vm@proj.iam.gserviceaccount.com'"),
    ({"project": "someone-else"}, 403, "token is from project 'someone-else', not 'proj'"),
    ({"issuer": "forger"}, 401, "invalid token: signature does not verify"),
    ({"zone": "us-central1-f"}, 403, None),
], ids=["other-account", "other-project", "forged-signature", "other-zone"])
def test_job_done_and_the_broker_refuse_the_same_tokens_in_the_same_words(running, token_args, status, error):
    h = running
    if token_args.get("issuer") == "forger":
        token_args = {**token_args, "issuer": ClockedIdentity(h.clock)}
    if "zone" in token_args:
        # A VM of the same name in another zone (left behind by a zone move) is not the attempt's.
        token_args = {**token_args, "instance_id": h.record("bot", RUN).current_attempt.instance_id}
    done, broker = both(h, **token_args)
    assert done[0] == broker[0] == status
    if error is not None:
        assert done[1] == broker[1] == error
    assert h.minter.minted == []
    assert h.record("bot", RUN).state == "running" and h.live_vms() == [VM]


def test_the_broker_compares_the_recorded_instance_id_too(running):
    """A VM re-created under the attempt's name (a stalled delivery) is a new instance: it is
    live and managed, its token is genuine, but the attempt runs on the instance the record holds."""
    h = running
    attempt = h.record("bot", RUN).current_attempt
    live = h.compute.peek(attempt.zone, VM)
    h.compute.add_foreign(replace(live, instance_id="9999"))
    response = ask_broker(h, h.token("bot", RUN, audience=CREDENTIALS_URL, instance_id="9999"))
    assert response.status_code == 403
    assert response.get_json()["error"] == (f"the token is from instance 9999 named {VM}, but attempt 1 of "
                                            f"bot/{RUN} ran on instance {attempt.instance_id}")
    assert h.minter.minted == []

