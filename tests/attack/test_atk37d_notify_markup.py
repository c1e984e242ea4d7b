"""Job-written text reaches a Slack or Discord channel as live markup through notifications.

A failure notification carries the run's reason and the last lines of the job's log
(notifications.message, Message.text). log_tail replaces unprintable characters with `?` but
keeps `<`, `>` and `&`, which Slack reads as control characters: "Slack uses &, <, and > as
control characters for special parsing in text objects, so they must be converted to HTML
entities if they're not going to be used for their parsing purpose"
(https://api.slack.com/reference/surfaces/formatting#escaping). So a job that prints
`<!channel> <https://evil.example/login|Re-authenticate spotcron>` pings the whole channel and
posts a disguised link under the stack's webhook; on Discord, `@everyone` and `[text](url)` do the
same. docs/security.md neutralises the same text in CSV and Markdown exports, not here.
"""

from __future__ import annotations

import json

from spotcron.core import layout
from spotcron.runtime.run_end import install
from spotcron.testing.harness import make_spec

HOSTILE = "<!channel> <https://evil.example/login|Re-authenticate spotcron> @everyone [docs](https://evil.example)"


def test_a_slack_failure_message_carries_no_live_markup_from_the_job(h):
    sent: list[dict] = []

    def post(url, data, headers):
        sent.append(json.loads(data))
        return 200

    install(h.deps, post=post, secrets=None)
    spec = make_spec(notify={"webhook": "https://hooks.slack.com/services/T0/B0/x"})
    h.start(spec)
    h.clock.advance(60)
    h.upload("bot", "20261122-1200", exit_code=1)
    h.blobs.write(layout.logs("bot", "20261122-1200", 1), f"training...\n{HOSTILE}\n".encode())
    assert h.callback("bot", "20261122-1200", exit_code=1).status_code == 200
    [message] = sent
    text = message["text"]
    assert "<!channel>" not in text and "<https://" not in text, text
