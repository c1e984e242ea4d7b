"""`secrets:` in local mode: the value from SPOTCRON_SECRET_<ID> or .spotcron/secrets.env reaches the
job, is masked in its logs, and is nowhere under the state directory afterwards."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pytest

from spotcron.core import layout
from spotcron.core.loader import load_jobs

from .conftest import python_job, write_job

pytestmark = pytest.mark.slow

VALUE = "s3cr3t-Value/with+odd=chars"
# The job prints the value raw, base64'd, URL-encoded, and writes a result naming what it saw.
SHOW = ("import os, base64, urllib.parse, pathlib; v = os.environ['BOT_TOKEN'];"
        " print('raw', v); print('b64', base64.b64encode(v.encode()).decode());"
        " print('url', urllib.parse.quote(v, safe=''));"
        " print('path', os.environ.get('KEYFILE'));"
        " k = open(os.environ['KEYFILE']).read() if os.environ.get('KEYFILE') else '';"
        " d = pathlib.Path(os.environ['SPOTCRON_RESULTS_DIR']);"
        " (d / 'seen.txt').write_text(str(len(v)) + ' ' + str(k == 'file-' + v) + ' '"
        " + str(sorted(x for x in os.environ if x.startswith(('SPOTCRON_SECRET', 'LEAKY')))))")


def _job(tmp_path, extra):
    write_job(tmp_path / "jobs", "bot", python_job(SHOW, extra=extra))
    return load_jobs([tmp_path / "jobs"])[0]


def _every_file_holds(root: Path, needle: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_a_secret_from_the_environment_reaches_the_job_masked_and_is_stored_nowhere(make_stack, tmp_path,
                                                                                  monkeypatch):
    monkeypatch.setenv("SPOTCRON_SECRET_BOT_TOKEN", VALUE)
    monkeypatch.setenv("LEAKY_SHELL_VARIABLE", "from the caller's shell")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "secrets.env").write_text("# file secrets come from here\nKEY_FILE=\"file-" + VALUE + "\"\n")
    stack = make_stack()
    spec = _job(tmp_path, "secrets:\n  BOT_TOKEN: bot-token\n  KEYFILE: {secret: key-file, file: /run/secrets/k}\n")
    runs = stack.run_now(spec)
    [record] = stack.wait(runs, timeout=90)
    assert record.state == "succeeded", record.reason
    job, run_id = runs[0]
    prefix = layout.attempt_prefix(job, run_id, 1)
    seen = stack.deps.blobs.read(prefix + "results/seen.txt").data.decode()
    # The value arrived whole, the file held its own value, and nothing of the caller's shell came along.
    assert seen == f"{len(VALUE)} True []"
    logs = stack.deps.blobs.read(prefix + "logs.txt").data.decode()
    assert "raw ***" in logs and "b64 ***" in logs and "url ***" in logs, logs
    # The record keeps which version each secret resolved to (locally: where the value came from).
    assert record.current_attempt.secret_versions == {"BOT_TOKEN": "local-env", "KEYFILE": "local-dotenv"}
    stack.stop()
    state = tmp_path / "state"
    for form in (VALUE, base64.b64encode(VALUE.encode()).decode().rstrip("="), quote(VALUE, safe="")):
        leaks = [p for p in _every_file_holds(state, form.encode()) if not p.endswith("secrets.env")]
        assert leaks == [], f"{form!r} found in {leaks}"
    assert json.dumps(record.model_dump(mode="json")).find(VALUE) == -1


def test_a_missing_value_fails_the_run_before_the_command_starts_naming_the_secret(make_stack, tmp_path,
                                                                                monkeypatch):
    monkeypatch.delenv("SPOTCRON_SECRET_BOT_TOKEN", raising=False)
    stack = make_stack()
    spec = _job(tmp_path, "secrets:\n  BOT_TOKEN: bot-token\n")
    runs = stack.run_now(spec)
    [record] = stack.wait(runs, timeout=90)
    assert record.state == "failed"
    assert "secret BOT_TOKEN" in record.reason and "bot-token" in record.reason, record.reason
    assert "SPOTCRON_SECRET_BOT_TOKEN" in record.reason
    job, run_id = runs[0]
    prefix = layout.attempt_prefix(job, run_id, 1)
    assert stack.deps.blobs.read(prefix + "results/seen.txt") is None  # the command never ran


def test_a_vm_reads_only_the_secrets_its_own_job_names(make_stack, tmp_path, monkeypatch):
    """A job that asks the local Secret Manager for another job's secret with its VM's token is refused."""
    monkeypatch.setenv("SPOTCRON_SECRET_OTHER_TOKEN", VALUE)
    monkeypatch.setenv("SPOTCRON_SECRET_MINE", "mine-value")
    stack = make_stack()
    probe = ("import os, urllib.request, json, pathlib;"
             " md = os.environ.get('SPOTCRON_METADATA_URL', ''); d = pathlib.Path(os.environ['SPOTCRON_RESULTS_DIR']);"
             " (d / 'env.txt').write_text(' '.join(sorted(k for k in os.environ if k.startswith('SPOTCRON_'))))")
    write_job(tmp_path / "jobs", "thief", python_job(probe, extra="secrets:\n  MINE: mine\n"))
    spec = load_jobs([tmp_path / "jobs"])[0]
    runs = stack.run_now(spec)
    [record] = stack.wait(runs, timeout=90)
    assert record.state == "succeeded", record.reason
    job, run_id = runs[0]
    env = stack.deps.blobs.read(layout.attempt_prefix(job, run_id, 1) + "results/env.txt").data.decode()
    # The job sees none of the runner's endpoints (metadata, secrets): only its own SPOTCRON_ facts.
    assert "SPOTCRON_METADATA_URL" not in env and "SPOTCRON_SECRETS_URL" not in env
    # And a token that is no VM's, or a VM token asking for a secret its job does not name, is refused.
    from spotcron.local.secret_manager import LocalSecrets
    resolver = stack.metadata.access_tokens.__self__
    assert isinstance(resolver, LocalSecrets)
    assert resolver("local-vm.guess", "spotcron-local", "other-token", "latest").status == 401


def test_every_line_break_and_backslash_in_a_local_value_survives_the_dotenv(tmp_path):
    from spotcron.cli.secrets import _store_locally
    from spotcron.local.secret_manager import LocalSecrets

    value = "a\nb\rc\vd\fe\x1cf\x1dg\x1eh\x85i\u2028j\u2029k\\nl\\\\m\"n"
    _store_locally(tmp_path, "odd", value.encode())
    _store_locally(tmp_path, "next", b"x")  # rewriting the file keeps the first value whole
    assert LocalSecrets({}, tmp_path).value("odd") == ("dotenv", value.encode())
    assert len((tmp_path / "secrets.env").read_bytes().split(b"\n")) == 3
