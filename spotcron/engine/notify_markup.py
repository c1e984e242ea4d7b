"""A notification's text made inert for the chat that shows it: no mention, link or formatting that
the job's words (its reason, its log tail) could plant.

A message quotes what a job wrote, so everything it says is literal text. Each chat has its own
markup and its own documented way to say "this is text":

- Slack reads `&`, `<` and `>` as control characters: `<!channel>` pings the channel,
  `<https://example.com|words>` is a link that shows only the words. Its formatting reference
  says to replace these three with their HTML entities (`&amp;`, `&lt;`, `&gt;`) when they are not
  meant for parsing, and only these three
  (https://api.slack.com/reference/surfaces/formatting#escaping). Formatting (`*bold*`, `_`, `~`,
  backticks) is on by default for a message's top-level `text`; the body turns it off with
  `"mrkdwn": false` (https://api.slack.com/methods/chat.postMessage#arg_mrkdwn), which an
  incoming webhook's payload takes like any message (https://api.slack.com/messaging/webhooks).
- Discord renders Markdown in a webhook's `content`, masked links `[words](url)` included, and
  pings for `@everyone`, `@here`, `<@id>` and `<@&role>`. A webhook body's `allowed_mentions`
  with an empty `parse` list lets no mention in the content notify anyone
  (https://discord.com/developers/docs/resources/message#allowed-mentions-object); every
  Markdown character is escaped with a backslash besides, so no link, heading or emphasis forms.
"""

from __future__ import annotations

import re

DISCORD_MAX = 2000  # characters of a webhook's `content`
# Markdown Discord reads: emphasis, strike, spoiler, code, quotes, headings, lists, masked links,
# mentions and custom emoji in angle brackets, and the backslash that escapes them.
_DISCORD_SPECIAL = re.compile(r"([\\*_~`|>#\-\[\]()<:@!.+])")
_DISCORD_ESCAPED = re.compile(r"\\([\\*_~`|>#\-\[\]()<:@!.+])")
# Nothing in a message may notify anyone: mentions stay visible text.
DISCORD_NO_MENTIONS = {"parse": []}


def slack_text(text: str) -> str:
    """`text` literal in Slack: `&`, `<` and `>` as HTML entities (`&` first), nothing else."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def discord_text(text: str, limit: int = DISCORD_MAX) -> str:
    """`text` literal in Discord: every Markdown character escaped with a backslash, cut to
    `limit` characters without leaving an escape half written."""
    escaped = _DISCORD_SPECIAL.sub(r"\\\1", text)
    if len(escaped) <= limit:
        return escaped
    cut = escaped[:limit]
    trailing = len(cut) - len(cut.rstrip("\\"))
    return cut[:-1] if trailing % 2 else cut  # a lone backslash at the end would escape what follows


def slack_shown(text: str) -> str:
    """What Slack shows for escaped `text`: the three entities as their characters."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def discord_shown(text: str) -> str:
    """What Discord shows for escaped `text`: each backslash escape as the character it escapes."""
    return _DISCORD_ESCAPED.sub(r"\1", text)
