"""`notify:` in a job file: what is refused (with file and line) and what is only warned about."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotcron.core.loader import check_job_file
from spotcron.core.notify_spec import DEFAULT_EVENTS, Notify

HEAD = 'schedule: "0 * * * *"\nimage: us-docker.pkg.dev/p/r/bot:1\ntimeout: 10m\n'


def problems(tmp_path: Path, notify: str) -> list[str]:
    (tmp_path / "jobs").mkdir(exist_ok=True)
    path = tmp_path / "jobs" / "bot.yaml"
    path.write_text(HEAD + notify)
    spec, found = check_job_file(path)
    return [f"{Path(p.file).name}:{p.line}: {p.field}: {p.message}" for p in found]


def test_a_webhook_alone_works_with_the_default_events(tmp_path):
    (tmp_path / "jobs").mkdir()
    path = tmp_path / "jobs" / "bot.yaml"
    path.write_text(HEAD + "notify: {webhook: 'https://example.com/hook'}\n")
    spec, found = check_job_file(path)
    assert found == [] and spec.notify.events == DEFAULT_EVENTS


def test_an_unknown_event_lists_the_valid_ones(tmp_path):
    assert problems(tmp_path, "notify:\n  webhook: https://example.com/h\n  on: [failure, exploded]\n") == [
        "bot.yaml:6: notify.on: 'exploded' is not an event; use some of failure, recovered, missed, success, "
        "preempted, slow"]


@pytest.mark.parametrize("url", ["htp:/bad", "https://", "not a url", "ftp://example.com/x"])
def test_a_malformed_url_is_refused_with_its_line(tmp_path, url):
    [problem] = problems(tmp_path, f"notify:\n  on: [failure]\n  webhook: '{url}'\n")
    assert problem.startswith("bot.yaml:6: notify.webhook: ") and "http(s) URL" in problem


def test_slow_at_or_past_the_timeout_is_refused(tmp_path):
    assert problems(tmp_path, "notify:\n  webhook: https://example.com/h\n  slow: 10m\n") == [
        "bot.yaml:6: notify.slow: slow: 600s is at or past the job's timeout (600s): the run is killed first; "
        "use a duration below the timeout"]
    assert problems(tmp_path, "notify:\n  webhook: https://example.com/h\n  on: [slow]\n") == [
        "bot.yaml:6: notify.on: on: slow needs slow: a duration (e.g. slow: 20m)"]


def test_a_bad_secret_id_is_refused(tmp_path):
    [problem] = problems(tmp_path, "notify:\n  webhook: {secret: 'no spaces'}\n")
    assert problem.startswith("bot.yaml:5: notify.webhook") and "is not a secret id" in problem


def test_an_inline_slack_or_discord_url_gets_a_warning_pointing_to_secrets():
    slack = Notify(webhook="https://hooks.slack.com/services/T/B/x")
    [(field, text)] = slack.warnings()
    assert field == "webhook" and "Slack webhook URL is a credential" in text and "{secret: ID}" in text
    assert Notify(webhook="https://discord.com/api/webhooks/1/x").warnings()[0][1].startswith("a Discord")
    assert Notify(webhook={"secret": "team"}).warnings() == []
    assert Notify(webhook="https://example.com/h").warnings() == []


def test_validate_prints_the_warning(tmp_path):
    from click.testing import CliRunner

    from spotcron.cli import cli

    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(
        HEAD + "local: {command: 'true'}\nnotify: {webhook: 'https://hooks.slack.com/services/T/B/x'}\n")
    result = CliRunner().invoke(cli, ["validate", str(tmp_path / "jobs")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "warning: bot: notify.webhook: a Slack webhook URL is a credential" in " ".join(result.output.split())
