"""A `notify:` webhook held in Secret Manager stays out of records and logs, whatever its value.

docs/security.md: "A secret never touches a file, a record or the bucket"; a webhook or ping
held in a secret (`notify: {webhook: {secret: NAME}}`, docs/jobs.md) is read by the functions at a
run's end (deploy grants them accessor on it). Its value is the credential: whoever holds a Slack
or Teams incoming-webhook URL posts to the channel. The hook sends to the value as read
(engine/notifications.resolve, then runtime/webhooks.post); when the value is not a URL urllib can
open (a scheme left out, a space or a line break pasted with it), urllib's error quotes it whole,
and a failed run-end effect is recorded as `TYPE: message` in the run record's `effect_failures`
(engine/writer.do_owed_effects), which every reader of the bucket reads, and in the functions'
warning line (Cloud Logging), on every try. Any job's author can name any secret of the project as
its webhook (deploy grants the functions accessor on it): a password that is no URL then lands in
that job's run records.
"""

from __future__ import annotations

import logging

import pytest

from spotcron.runtime import webhooks
from spotcron.runtime.run_end import install
from spotcron.testing.harness import make_spec

RUN = "20261122-1200"


@pytest.mark.parametrize("value", [
    "hooks.slack.com/services/T0SECRET1/B0SECRET2/abcdefSECRETxyz0123456789",  # the scheme left out
    "https://hooks.slack.com/services/T0SECRET1/B0SECRET2/abcdefSECRETxyz 0123456789",  # a space pasted in
], ids=["no scheme", "a space"])
def test_a_webhook_secret_that_is_no_url_never_reaches_the_record_or_the_log(h, caplog, value: str) -> None:
    install(h.deps, post=webhooks.post, secrets={"team-hook": value}.__getitem__)
    spec = make_spec(notify={"webhook": {"secret": "team-hook"}})
    h.start(spec)
    h.clock.advance(60)
    h.upload("bot", RUN, exit_code=1)
    with caplog.at_level(logging.INFO):
        assert h.callback("bot", RUN, exit_code=1).status_code == 200
        h.clock.advance(600)
        h.sweep()  # the owed notification tried again
    credential = "abcdefSECRETxyz"
    stored = [name for name in h.blobs.list_quietly("") if credential.encode() in h.blobs.peek(name).data]
    assert stored == [], f"the webhook secret's value is stored in {stored}"
    logged = [r.getMessage() for r in caplog.records if credential in r.getMessage()]
    assert logged == [], f"the webhook secret's value is logged: {logged[:1]}"


SECRET_URL = "https://hooks.slack.com/services/T0SECRET1/B0SECRET2/abcdefSECRETxyz0123456789"


def _failure_of(h, entry: str, post, value: str, kind: str = "webhook") -> str:
    install(h.deps, post=post, secrets={"team-hook": value}.__getitem__)
    h.start(make_spec(notify={kind: {"secret": "team-hook"}}))
    h.clock.advance(60)
    h.upload("bot", RUN, exit_code=1)
    h.callback("bot", RUN, exit_code=1)
    return h.record("bot", RUN).effect_failures[entry].error


@pytest.mark.parametrize(("answer", "said"), [
    (lambda url, data, headers: 500, "answered HTTP 500"),
    (lambda url, data, headers: (_ for _ in ()).throw(OSError(f"cannot reach {url}")), "could not be reached"),
    (lambda url, data, headers: (_ for _ in ()).throw(TimeoutError(f"{url} timed out")), "did not answer in time"),
    (lambda url, data, headers: (_ for _ in ()).throw(RuntimeError(f"odd {url}")), "could not be sent (RuntimeError)"),
], ids=["a status", "unreachable", "a timeout", "anything else"])
def test_each_failure_of_a_secret_webhook_is_recorded_by_its_kind_and_the_secrets_name(h, answer, said) -> None:
    error = _failure_of(h, "hook:notify", answer, SECRET_URL)
    assert said in error and "secret 'team-hook'" in error, error
    assert "SECRET" not in error and "hooks.slack.com" not in error, error


def test_a_ping_held_in_a_secret_that_is_no_url_is_recorded_without_its_value(h) -> None:
    sent: list[str] = []
    error = _failure_of(h, "hook:ping", lambda url, data, headers: sent.append(url) or 200,
                        "hc-ping.com/abcdefSECRETxyz", kind="ping")
    assert "not an http(s) URL" in error and "abcdefSECRETxyz" not in error and sent == [], error


def test_urllib_errors_never_quote_the_url() -> None:
    for value in ("hooks.slack.com/abcdefSECRETxyz", "https://hooks.example/abcdefSECRETxyz\n", "ftp://x/abcdefSECRETxyz"):
        with pytest.raises((ValueError, OSError)) as caught:
            webhooks.post(value, b"{}", {})
        assert "abcdefSECRETxyz" not in str(caught.value) and caught.value.__suppress_context__, caught.value
