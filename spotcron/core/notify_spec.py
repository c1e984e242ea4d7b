"""`notify:`: where a job's notifications go and on what, as a job file (or infra/stack.yaml) says.

A destination is a webhook (Slack, Discord or generic JSON bodies) and/or a dead man's switch
ping (healthchecks.io or Cronitor: a start ping when the run's VM is up, an end ping with the
exit code). Either is a URL written inline or `{secret: ID}`, a secret holding the URL: a Slack or
Discord webhook URL is a credential (whoever holds it may post to the channel), so one written
inline gets a warning (`warnings`). The events are in EVENTS; by default one message on the first
failure (or missed tick), one on recovery, never one per failing run (engine/notifications.py decides).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)

from spotcron.core.durations import parse_duration

EVENTS: dict[str, str] = {
    "failure": "the run failed (first failure of a streak only)",
    "recovered": "a run succeeded after failures or missed ticks",
    "missed": "ticks were due and never started (first of a streak only)",
    "success": "every successful run",
    "preempted": "a run that ended preempted (every Spot retry used up)",
    "slow": "a run that took longer than `slow:`",
}
DEFAULT_EVENTS: tuple[str, ...] = ("failure", "recovered", "missed")
FORMATS = ("slack", "discord", "generic")
SECRET_ID = re.compile(r"^[A-Za-z0-9_-]{1,255}$")  # Secret Manager's secret id alphabet
# Hosts whose webhook URLs carry their own credential.
CREDENTIAL_HOSTS = {"hooks.slack.com": "Slack", "discord.com": "Discord", "discordapp.com": "Discord"}


def url_problem(url: str) -> str | None:
    """Why `url` is no http(s) URL a notification can be sent to, or None."""
    if not isinstance(url, str) or not url:
        return "is empty; write an http(s) URL or {secret: ID}"
    if any(c.isspace() for c in url):
        return f"{url[:80]!r} holds whitespace; write an http(s) URL or {{secret: ID}}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return (f"{url[:80]!r} is not an http(s) URL with a host; write e.g. https://example.com/hook "
                f"or {{secret: ID}}")
    try:
        parts.port  # noqa: B018 - raises for a port out of range
    except ValueError:
        return f"{url[:80]!r} has a bad port"
    return None


class WebhookSecret(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    secret: str = Field(description="the id of the secret holding the URL (Secret Manager; locally "
                                    "SPOTCRON_SECRET_<ID> or .spotcron/secrets.env)")

    @field_validator("secret")
    @classmethod
    def _id(cls, value: str) -> str:
        if not SECRET_ID.match(value):
            raise ValueError(f"{value!r} is not a secret id: letters, digits, _ and -, at most 255")
        return value


def _target(value: Any) -> Any:
    """An inline URL, or {secret: ID}: one message for whichever was meant."""
    if isinstance(value, WebhookSecret):
        return value
    if isinstance(value, dict):
        return WebhookSecret.model_validate(value)
    if not isinstance(value, str):
        raise ValueError("write an http(s) URL or {secret: ID}")
    problem = url_problem(value)
    if problem:
        raise ValueError(problem)
    return value


Target = Annotated[Any, BeforeValidator(_target, json_schema_input_type=str | WebhookSecret)]


def _events(value: Any) -> Any:
    return (value,) if isinstance(value, str) else value


def _duration_or_none(value: Any) -> Any:
    return None if value is None else parse_duration(value)


class Notify(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    webhook: Target | None = Field(None, description="where messages are POSTed: an http(s) URL, or {secret: ID} "
                                                     "naming a secret that holds it (use one for Slack/Discord)")
    format: Literal["slack", "discord", "generic"] | None = Field(
        None, description="the body: slack ({text}), discord ({content}) or generic JSON; left out: from the "
                          "webhook's host (hooks.slack.com, discord.com), else generic")
    ping: Target | None = Field(None, description="a healthchecks.io or Cronitor URL: pinged at start and at the "
                                                  "end with the exit code")
    on: Annotated[tuple[str, ...], BeforeValidator(_events)] = Field(
        DEFAULT_EVENTS, description=f"what to notify: {', '.join(EVENTS)}; default failure, recovered, missed")
    slow: Annotated[int | None, BeforeValidator(_duration_or_none), PlainSerializer(lambda v: v)] = Field(
        None, description="notify `slow` when a run takes longer than this (e.g. 20m); below the job's timeout")

    @model_validator(mode="before")
    @classmethod
    def _yaml_on(cls, data: Any) -> Any:
        # YAML 1.1 reads a bare `on:` key as the boolean true.
        if isinstance(data, dict) and True in data:
            data = {("on" if key is True else key): value for key, value in data.items()}
        return data

    @field_validator("on")
    @classmethod
    def _known(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for event in value:
            if event not in EVENTS:
                raise ValueError(f"{event!r} is not an event; use some of {', '.join(EVENTS)}")
        return tuple(dict.fromkeys(value))

    @property
    def events(self) -> tuple[str, ...]:
        """The events notified: `on`, plus `slow` when a `slow:` duration is given."""
        return (*self.on, "slow") if self.slow is not None and "slow" not in self.on else self.on

    def body_format(self, url: str | None) -> str:
        if self.format is not None:
            return self.format
        host = (urlsplit(url).hostname or "") if url else ""
        if host == "hooks.slack.com":
            return "slack"
        if host in ("discord.com", "discordapp.com"):
            return "discord"
        return "generic"

    def destinations(self) -> list[str]:
        """Where the messages go, in words without the URLs' secrets (for `status` and the page)."""
        out = []
        for kind, target in (("webhook", self.webhook), ("ping", self.ping)):
            if target is None:
                continue
            if isinstance(target, WebhookSecret):
                out.append(f"{kind} (secret {target.secret})")
            else:
                host = urlsplit(target).hostname or "?"
                out.append(f"webhook ({self.body_format(target)}) to {host}" if kind == "webhook" else f"ping to {host}")
        return out

    def warnings(self) -> list[tuple[str, str]]:
        """(field, warning) for an inline URL that carries a credential."""
        found = []
        for field, target in (("webhook", self.webhook), ("ping", self.ping)):
            if isinstance(target, str):
                host = urlsplit(target).hostname or ""
                kind = CREDENTIAL_HOSTS.get(host)
                if kind:
                    found.append((field, f"a {kind} webhook URL is a credential (anyone holding it may post to "
                                         f"the channel) and is now stored in the deployed spec and every run "
                                         f"record: keep it in a secret and write {{secret: ID}} (secrets:)"))
        return found

    def problem_with_timeout(self, timeout: int) -> str | None:
        if "slow" in self.on and self.slow is None:
            return "on: slow needs slow: a duration (e.g. slow: 20m)"
        if self.slow is not None and self.slow >= timeout:
            return (f"slow: {self.slow}s is at or past the job's timeout ({timeout}s): the run is killed first; "
                    f"use a duration below the timeout")
        return None
