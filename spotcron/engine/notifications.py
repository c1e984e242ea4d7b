"""Notifications: owed run-end hooks (engine/hooks.py) that tell a job's owner what happened.

Two hooks, each owed and retried on its own: `notify` POSTs one message per event to the job's
webhook, `ping` tells a healthchecks.io/Cronitor check the run's start and its exit code. What is
notified is decided from the run and the job's previous counted run, so the owner hears once when
a job starts failing (or missing ticks) and once when it recovers, never once per failing run.
A manual run with overrides is not the job's own spec: it counts for nothing and notifies nothing.

Every message carries an id (`JOB/RUN/EVENT`, also in the `X-Spotcron-Notification-Id` header)
that is the same on every retry: a hook is done at least once (a crash after the POST and before
its "done" is written sends it again), and a receiver deduplicates on it. A receiver answering
anything but 2xx (or not answering) fails the hook, which the next toucher tries again; the run's
end is written before and does not wait for it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from spotcron.core import layout
from spotcron.core.notify_spec import Notify, WebhookSecret
from spotcron.core.runs import RunRecord, RunState
from spotcron.engine.hooks import RunEndHook
from spotcron.engine.log_parts import last_part

log = logging.getLogger("spotcron.notify")

# POST url, body, headers → the HTTP status; raises OSError when the receiver cannot be reached.
Post = Callable[[str, bytes, Mapping[str, str]], int]
# A secret's id → its value (the URL); raises LookupError when it is not there.
SecretLookup = Callable[[str], str]
Announce = Callable[[str], None]

BAD_STATES = frozenset({RunState.FAILED, RunState.TIMED_OUT, RunState.LOST, RunState.PREEMPTED})
# Records of each kind (scheduled, manual: a manual run's id starts with `m`) read at most to find
# the previous counted run. Apart, because anyone who may publish a start can ask for manual runs:
# however many of them there are, skipped or run, the last LOOK_BACK ticks are still read.
LOOK_BACK = 30
TAIL_LINES = 20
TAIL_BYTES = 8 << 10
ID_HEADER = "X-Spotcron-Notification-Id"


def config_for(record: RunRecord, default: Notify | None) -> Notify | None:
    """The run's notify: its spec's, else the stack's."""
    raw = (record.spec or {}).get("notify")
    if raw:
        try:
            return Notify.model_validate(raw)
        except ValueError:
            log.warning("%s/%s: its spec's notify: does not parse; the stack's is used", record.job, record.run_id)
    return default


def counts(record: RunRecord) -> str | None:
    """What the run says about the job's health: "good", "bad", "missed", or None (it says nothing:
    skipped by concurrency, cancelled, still live, or a manual run with overrides)."""
    if record.overrides or not record.terminal:
        return None
    if record.state == RunState.SUCCEEDED:
        return "good"
    if record.state in BAD_STATES:
        return "bad"
    if record.state == RunState.MISSED:
        return "missed"
    return None


def previous_counted(deps, record: RunRecord) -> RunRecord | None:
    """The newest run of the same job (and matrix entry) before `record` that counts, among the
    last LOOK_BACK scheduled runs and the last LOOK_BACK manual runs before it."""
    from spotcron.engine.store import TooManyFolders, run_sort_key

    key = run_sort_key(record.run_id)
    try:  # the run folders only, never the objects in them
        earlier = [run_id for run_id in deps.store.run_ids(record.job) if run_sort_key(run_id) < key]
    except TooManyFolders as exc:  # the message goes out without "recovered" rather than not at all
        log.warning("%s/%s: no previous run to compare with: %s", record.job, record.run_id, exc)
        return None
    read = {False: 0, True: 0}  # manual? → records of that kind read
    for run_id in reversed(earlier):
        manual = run_id.startswith("m")
        if read[manual] >= LOOK_BACK:
            if read[not manual] >= LOOK_BACK:
                break
            continue  # past this kind's share: its ids are stepped over unread
        read[manual] += 1
        other = deps.store.read(record.job, run_id)
        if other is None or (other.state != RunState.MISSED and other.variant != record.variant):
            continue
        if counts(other) is not None:
            return other
    return None


def events_for(record: RunRecord, previous: RunRecord | None, config: Notify) -> list[str]:
    """The events `record`'s end notifies, given the previous counted run of its job."""
    kind = counts(record)
    if kind is None:
        return []
    before = counts(previous) if previous is not None else None
    wanted = config.events
    events: list[str] = []
    if kind == "good":
        if before in ("bad", "missed"):
            events.append("recovered")
        events.append("success")
    elif kind == "bad" and before not in ("bad", "missed"):
        events.append("failure")
    elif kind == "missed" and before not in ("bad", "missed"):
        events.append("missed")
    if record.state == RunState.PREEMPTED:
        events.append("preempted")
    duration = record.duration_seconds
    if config.slow is not None and duration is not None and duration > config.slow:
        events.append("slow")
    return [event for event in events if event in wanted]


def notification_id(record: RunRecord, event: str) -> str:
    return f"{record.job}/{record.run_id}/{event}"


def log_tail(deps, record: RunRecord, lines: int = TAIL_LINES) -> list[str]:
    """The last lines of the run's last attempt's log, bounded (a job's log is hostile input)."""
    attempt = record.current_attempt
    if attempt is None:
        return []
    try:
        last = last_part(deps.blobs, layout.log_parts(record.job, record.run_id, attempt.number))
        name = last or layout.logs(record.job, record.run_id, attempt.number)
        data = deps.blobs.read_range(name, 0, TAIL_BYTES) or b""
    except Exception as exc:  # noqa: BLE001 - a message without its log tail is still worth sending
        log.warning("%s/%s: no log tail for the notification: %s", record.job, record.run_id, exc)
        return []
    text = data.decode("utf-8", "replace")
    clean = ["".join(c if c.isprintable() or c == "\t" else "?" for c in line)[:300] for line in text.splitlines()]
    return clean[-lines:]


def one_line(text: str) -> str:
    """The job's words (a run's reason) as one line of a message: every run of whitespace, line
    breaks included, one space, and any other control or invisible character a `?`, so no line of
    the message starts where the job chose (a forged "more:" or "state" line)."""
    return "".join(c if c.isprintable() else "?" for c in " ".join(text.split()))


@dataclass(frozen=True)
class Message:
    id: str
    event: str
    job: str
    run: str
    state: str
    reason: str | None
    exit_code: int | None
    duration_s: float | None
    cost_usd: float | None
    log_tail: tuple[str, ...]
    more: str
    missed_ticks: int | None = None

    @property
    def title(self) -> str:
        words = {"failure": "failed", "recovered": "recovered", "missed": "missed ticks", "success": "succeeded",
                 "preempted": "was preempted", "slow": "was slow", "test": "test message"}
        return f"spotcron: {self.job} {words.get(self.event, self.event)} (run {self.run})"

    def text(self) -> str:
        facts = [f"state {self.state}" + (f": {one_line(self.reason)}" if self.reason else "")]
        if self.missed_ticks:
            facts.append(f"{self.missed_ticks} tick(s) missed")
        if self.exit_code is not None:
            facts.append(f"exit code {self.exit_code}")
        if self.duration_s is not None:
            facts.append(f"took {self.duration_s:.0f}s")
        if self.cost_usd is not None:
            facts.append(f"cost ${self.cost_usd:.4f}")
        lines = [self.title, "; ".join(facts)]
        if self.log_tail:
            lines += ["last log lines:", *(f"  {line}" for line in self.log_tail)]
        lines.append(f"more: {self.more}")
        return "\n".join(lines)

    def fields(self) -> dict:
        return {"id": self.id, "event": self.event, "job": self.job, "run": self.run, "state": self.state,
                "reason": self.reason, "exit_code": self.exit_code, "duration_s": self.duration_s,
                "cost_usd": self.cost_usd, "missed_ticks": self.missed_ticks, "log_tail": list(self.log_tail),
                "more": self.more, "text": self.text()}


def message(record: RunRecord, event: str, tail: list[str], bucket: str) -> Message:
    where = f" --bucket gs://{bucket}" if bucket else ""
    more = (f"spotcron logs {record.job}/{record.run_id}{where}; spotcron status {record.job}{where}; "
            f"the results page: spotcron page{where}")
    return Message(id=notification_id(record, event), event=event, job=record.job, run=record.run_id,
                   state=str(record.state), reason=record.reason, exit_code=record.exit_code,
                   duration_s=record.duration_seconds, cost_usd=record.cost_usd, log_tail=tuple(tail),
                   more=more, missed_ticks=record.missed_ticks)


def body(note: Message, fmt: str) -> bytes:
    """The POST body in the receiver's format (Slack: {text} with formatting off; Discord: {content},
    2,000 characters).

    The text quotes the job (its reason, its log tail): for a chat it is escaped by that chat's
    rules (notify_markup), so nothing the job printed pings a channel or becomes a link."""
    from spotcron.engine.notify_markup import DISCORD_NO_MENTIONS, discord_text, slack_text

    if fmt == "slack":
        return json.dumps({"text": slack_text(note.text()), "mrkdwn": False}).encode()
    if fmt == "discord":
        return json.dumps({"content": discord_text(note.text()), "allowed_mentions": DISCORD_NO_MENTIONS}).encode()
    return json.dumps(note.fields()).encode()


class NotifyFailed(RuntimeError):
    """A receiver did not take the message; the hook stays owed and is tried again.

    Its text is recorded on the run (`effect_failures`) and logged on every try, so it is one of a
    few fixed descriptions and never quotes the URL: a webhook's URL is its credential, and one
    held in a secret is the secret's value (nor is the underlying error chained: its text may
    quote the URL whole)."""


def resolve(target: str | WebhookSecret, secrets: SecretLookup | None) -> str:
    if isinstance(target, WebhookSecret):
        if secrets is None:
            raise LookupError(f"secret {target.secret!r}: no secret store is configured here")
        return secrets(target.secret)
    return target


def destination(target: str | WebhookSecret) -> str:
    """How a destination is named in records and logs: a plain URL by its host, one held in a
    secret by the secret's name only (every part of its value is the secret)."""
    if isinstance(target, WebhookSecret):
        return f"the URL in secret {target.secret!r}"
    try:
        host = urlsplit(target).hostname
    except ValueError:
        host = None
    return host or "the configured URL"


def url_problem(url: str) -> str | None:
    """Why `url` cannot be sent to, in words that quote no part of it; None when it is an
    absolute http(s) URL with a host and no whitespace or control characters."""
    if not isinstance(url, str) or any(c.isspace() or not c.isprintable() for c in url):
        return "it is not an http(s) URL (it holds whitespace or control characters)"
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return "it is not an http(s) URL (it does not parse)"
    if parts.scheme not in ("http", "https") or not host:
        return "it is not an http(s) URL (write it as https://HOST/PATH)"
    return None


def failure_kind(exc: BaseException) -> str:
    """A fixed description of why a POST did not reach its receiver, from the error's kind alone."""
    if isinstance(exc, TimeoutError):
        return "the receiver did not answer in time"
    if isinstance(exc, ConnectionRefusedError):
        return "the receiver refused the connection"
    if isinstance(exc, OSError):
        return "the receiver could not be reached (name lookup, connection or TLS failed)"
    return f"the request could not be sent ({type(exc).__name__})"


def send(post: Post, url: str, payload: bytes, note_id: str, *, to: str = "its URL") -> None:
    """POST `payload` to `url`; NotifyFailed naming `to` (never the URL) when it is not taken."""
    problem = url_problem(url)
    if problem:
        raise NotifyFailed(f"the receiver ({to}) cannot be sent {note_id}: {problem}")
    try:
        status = post(url, payload, {"Content-Type": "application/json", ID_HEADER: note_id})
    except Exception as exc:  # noqa: BLE001 - described by its kind: its text may quote the URL
        raise NotifyFailed(f"the receiver ({to}) did not take {note_id}: {failure_kind(exc)}") from None
    if not 200 <= status < 300:
        raise NotifyFailed(f"the receiver ({to}) answered HTTP {status} to {note_id}")


def ping_url(base: str, what: str, exit_code: int | None) -> str:
    """healthchecks.io: BASE/start, BASE/<exit code> (0 success), BASE/fail; Cronitor (cronitor.link):
    ?state=run|complete|fail with status_code."""
    parts = urlsplit(base)
    if parts.hostname and parts.hostname.endswith("cronitor.link"):
        state = {"start": "run", "fail": "fail"}.get(what, "complete" if exit_code == 0 else "fail")
        query = f"state={state}" + (f"&status_code={exit_code}" if exit_code is not None else "")
        return urlunsplit(parts._replace(query=f"{parts.query}&{query}" if parts.query else query))
    suffix = "start" if what == "start" else ("fail" if exit_code is None else str(exit_code))
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/" + suffix))


def _ping(base: str, what: str, exit_code: int | None, to: str) -> str:
    """ping_url, refusing a base that is no http(s) URL before it is taken apart (its error would
    quote it)."""
    problem = url_problem(base)
    if problem:
        raise NotifyFailed(f"the receiver ({to}) cannot be pinged: {problem}")
    try:
        return ping_url(base, what, exit_code)
    except ValueError:
        raise NotifyFailed(f"the receiver ({to}) cannot be pinged: it is not an http(s) URL (it does not parse)") from None


def run_end_hooks(post: Post, secrets: SecretLookup | None, default: Notify | None,
                  announce: Announce | None = None, *, local: bool = False) -> list[RunEndHook]:
    """The `notify` and `ping` hooks, sending through `post`. `local`: the messages' "how to see
    more" names the local bucket (no --bucket)."""

    def say(line: str) -> None:
        log.info("%s", line)
        if announce is not None:
            announce(line)

    def notify(deps, record: RunRecord) -> None:
        config = config_for(record, default)
        if config is None or config.webhook is None:
            return
        events = events_for(record, previous_counted(deps, record), config)
        if not events:
            return
        url, to = resolve(config.webhook, secrets), destination(config.webhook)
        tail = log_tail(deps, record)
        for event in events:
            note = message(record, event, tail, "" if local else deps.settings.bucket)
            send(post, url, body(note, config.body_format(url)), note.id, to=to)
            say(f"notified {event} of {record.job}/{record.run_id} to {to} (id {note.id})")

    def ping_end(deps, record: RunRecord) -> None:
        config = config_for(record, default)
        if config is None or config.ping is None or record.overrides:
            return
        if record.trigger == "manual" and counts(record) is None:
            # A manual run skipped for, or ended by, a scheduled run of its job says nothing of the
            # job's health: a "fail" ping for it would be a false alarm anyone publishing starts
            # could raise at will. The tick's own pings follow.
            return
        ran = record.state in (RunState.SUCCEEDED, *BAD_STATES)
        to = destination(config.ping)
        url = _ping(resolve(config.ping, secrets), "end" if ran else "fail", record.exit_code if ran else None, to)
        send(post, url, b"", notification_id(record, "ping"), to=to)
        say(f"pinged the end of {record.job}/{record.run_id} to {to}")

    def ping_start(deps, record: RunRecord) -> None:
        config = config_for(record, default)
        if config is None or config.ping is None or record.overrides:
            return
        to = destination(config.ping)
        send(post, _ping(resolve(config.ping, secrets), "start", None, to), b"", notification_id(record, "start"), to=to)

    def wants(kind: str) -> Callable[[RunRecord], bool]:
        def applies(record: RunRecord) -> bool:
            config = config_for(record, default)
            return config is not None and getattr(config, kind) is not None and not record.overrides
        return applies

    return [RunEndHook("notify", notify, applies=wants("webhook")),
            RunEndHook("ping", ping_end, applies=wants("ping"), on_start=ping_start)]


def send_test(config: Notify, job: str, post: Post, secrets: SecretLookup | None, bucket: str = "",
              now_id: str = "test") -> list[tuple[str, str | None]]:
    """`spotcron notify test JOB`: one test message to each destination; (destination, error or None)."""
    results: list[tuple[str, str | None]] = []
    note = Message(id=f"{job}/{now_id}/test", event="test", job=job, run=now_id, state="test",
                   reason="a test message from `spotcron notify test`", exit_code=None, duration_s=None,
                   cost_usd=None, log_tail=(), more=f"spotcron status {job}" + (f" --bucket gs://{bucket}" if bucket else ""))
    for kind, target in (("webhook", config.webhook), ("ping", config.ping)):
        if target is None:
            continue
        to = destination(target)
        label = kind if isinstance(target, str) else f"{kind} (secret {target.secret})"
        try:
            url = resolve(target, secrets)
            if kind == "webhook":
                send(post, url, body(note, config.body_format(url)), note.id, to=to)
            else:
                send(post, _ping(url, "end", 0, to), b"", note.id, to=to)
            # The operator's own terminal: the host of a secret's URL tells them which it reached.
            results.append((f"{label} {urlsplit(url).hostname}", None))
        except NotifyFailed as exc:
            results.append((label, str(exc)))
        except Exception as exc:  # noqa: BLE001 - each destination is reported on its own, by kind only
            results.append((label, f"{type(exc).__name__}: {exc}" if isinstance(exc, LookupError)
                            else failure_kind(exc)))
    return results
