"""Job-written text reaches a Slack or Discord channel as text, never as live markup.

A failure notification carries the run's reason and the last lines of the job's log. Slack reads
`&`, `<` and `>` as control characters ("they must be converted to HTML entities if they're not
going to be used for their parsing purpose",
https://api.slack.com/reference/surfaces/formatting#escaping), so a job printing
`<!channel> <https://evil.example/login|Re-authenticate spotcron>` would ping the channel and post
a disguised link under the stack's webhook. Discord reads Markdown (masked links) in a webhook's
content and pings `@everyone` unless `allowed_mentions` says otherwise
(https://discord.com/developers/docs/resources/message#allowed-mentions-object).
"""

from __future__ import annotations

import json
import re

from spotcron.core import layout
from spotcron.engine.notifications import Message, body
from spotcron.engine.notify_markup import discord_shown, discord_text, slack_shown, slack_text
from spotcron.runtime.run_end import install
from spotcron.testing.harness import make_spec

HOSTILE = "<!channel> <https://evil.example/login|Re-authenticate spotcron> @everyone [docs](https://evil.example)"


def _sent(h, webhook: str) -> dict:
    sent: list[dict] = []

    def post(url, data, headers):
        sent.append(json.loads(data))
        return 200

    install(h.deps, post=post, secrets=None)
    h.start(make_spec(notify={"webhook": webhook}))
    h.clock.advance(60)
    h.upload("bot", "20261122-1200", exit_code=1)
    h.blobs.write(layout.logs("bot", "20261122-1200", 1), f"training... a < b && c > d\n{HOSTILE}\n".encode())
    assert h.callback("bot", "20261122-1200", exit_code=1).status_code == 200
    [message] = sent
    return message


def test_a_slack_failure_message_carries_no_live_markup_from_the_job(h):
    text = _sent(h, "https://hooks.slack.com/services/T0/B0/x")["text"]
    assert "<" not in text and ">" not in text, text  # no mention, no link, no channel reference
    assert re.search(r"&(?!amp;|lt;|gt;)", text) is None, text  # every & starts one of the three entities
    # What the job printed is still there to read: Slack shows the entities as the characters.
    assert "&lt;!channel&gt; &lt;https://evil.example/login|Re-authenticate spotcron&gt;" in text
    assert "a &lt; b &amp;&amp; c &gt; d" in text


def test_a_discord_failure_message_mentions_nobody_and_links_nothing(h):
    message = _sent(h, "https://discord.com/api/webhooks/1/x")
    assert message["allowed_mentions"] == {"parse": []}  # @everyone, @here, roles and users stay text
    content = message["content"]
    assert "[docs](" not in content and "|Re-authenticate" not in content, content
    unescaped = re.sub(r"\\.", "", content)
    assert not re.search(r"[\[\]()<>*_~`|]", unescaped), content  # every Markdown character escaped
    assert len(content) <= 2000


def test_slack_text_escapes_only_the_three_control_characters():
    assert slack_text("a & b <!here> c > d 'quoted' *bold*") == "a &amp; b &lt;!here&gt; c &gt; d 'quoted' *bold*"
    assert slack_text("&lt;") == "&amp;lt;"  # an entity the job wrote is shown, not decoded


def test_discord_text_escapes_markdown_and_never_ends_on_a_lone_backslash():
    assert discord_text("[docs](https://x) **b**") == r"\[docs\]\(https\://x\) \*\*b\*\*"
    cut = discord_text("a" * 1999 + "*")
    assert cut == "a" * 1999  # the escape of `*` did not fit whole: left out, no lone backslash
    long = discord_text("(" * 3000)
    assert len(long) == 2000 and long.endswith("\\(")  # whole escapes only


def test_generic_bodies_keep_the_fields_as_they_are():
    note = Message(id="bot/r/failure", event="failure", job="bot", run="r", state="failed", reason=HOSTILE,
                   exit_code=1, duration_s=None, cost_usd=None, log_tail=(HOSTILE,), more="spotcron logs bot/r")
    fields = json.loads(body(note, "generic"))
    assert fields["reason"] == HOSTILE and fields["log_tail"] == [HOSTILE]  # the receiver's to render


def test_what_each_chat_shows_is_the_text_the_job_wrote():
    text = f"a & b {HOSTILE} \\ *x* 1. - # `c`"
    assert slack_shown(slack_text(text)) == text
    assert discord_shown(discord_text(text)) == text
