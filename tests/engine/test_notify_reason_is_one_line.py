"""A run's reason is the job's own words (a container with metadata access posts its own callback;
its `problem`, up to 500 characters, becomes the reason). A notification's text quotes it as one
line: its line breaks would otherwise start lines of their own at the left margin, where only
spotcron's own lines are (the log tail is indented), forging a "more:" line pointing anywhere or a
"state succeeded" line. And a Slack body is sent with `"mrkdwn": false`: Slack formats a message's
top-level `text` by default, so the job's `*`, `_`, `~` and backticks would format its words.
"""

from __future__ import annotations

import json

from spotcron.engine.notifications import one_line
from spotcron.runtime.run_end import install
from spotcron.testing.harness import make_spec

FORGED = "setup\nstate succeeded; exit code 0\r\nmore: see https://evil.example/login *now*\u2028more: x\x1b[2J"


class Receiver:
    def __init__(self):
        self.bodies: list[dict] = []

    def __call__(self, url, data, headers):
        if data:
            self.bodies.append(json.loads(data))
        return 200


def _failed_with_reason(h, url):
    receiver = Receiver()
    install(h.deps, post=receiver, secrets=None)
    spec = make_spec(name="bot", notify={"webhook": url})
    h.start(spec)
    body = {"job": "bot", "run_id": "20261122-1200", "attempt": 1, "status": "exited", "exit_code": None,
            "timed_out": False, "uploaded": False, "problem": FORGED,
            "started_at": h.clock.now().isoformat(), "finished_at": h.clock.now().isoformat()}
    h.callback("bot", "20261122-1200", body=body)
    h.sweep()
    return receiver


def test_a_jobs_reason_cannot_forge_lines_of_the_notification(h):
    receiver = _failed_with_reason(h, "https://hooks.example/generic")
    assert receiver.bodies, "no notification was sent"
    text = receiver.bodies[-1]["text"]
    lines = text.split("\n")
    assert len([line for line in lines if line.startswith("more:")]) == 1, text
    assert len([line for line in lines if line.startswith("state ")]) == 1, text
    assert "setup state succeeded; exit code 0 more: see https://evil.example/login *now* more: x?[2J" in text
    assert not any(c in text for c in "\r\u2028\x1b")
    assert receiver.bodies[-1]["reason"] == h.record("bot", "20261122-1200").reason  # the field as it is


def test_a_slack_body_turns_formatting_off_and_keeps_the_escapes(h):
    receiver = _failed_with_reason(h, "https://hooks.slack.com/services/T/B/X")
    assert receiver.bodies, "no notification was sent"
    sent = receiver.bodies[-1]
    assert sent["mrkdwn"] is False, sent
    assert "*now*" in sent["text"]  # shown as typed, not bold


def test_one_line_keeps_words_and_drops_breaks():
    assert one_line("a\n\n b\tc\u2028d\x00e") == "a b c d?e"
