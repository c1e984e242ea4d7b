"""The runner's secrets against a fake Secret Manager held to the published API: read with the VM's
own token, CRC32C checked, handed to the container only (a variable docker takes from its own
environment, or a read-only file), masked in the logs, the version reported, and a secret that
cannot be read fails the attempt before the job starts."""

from __future__ import annotations

import base64
import json
import os
import sys
from pathlib import Path
from urllib.parse import quote

import pytest

from spotcron.core.descriptor import SecretItem
from tests.fakes.secretmanager import FakeSecretManager
from tests.runner.harness import RunnerHarness, needs_runner_tools

pytestmark = [pytest.mark.slow, needs_runner_tools]

PROJECT = "proj-one"
JOB_ACCOUNT = "sc-hello-secrets@proj-one.iam.gserviceaccount.com"
VALUE = b"tok-\xc3\xa9 value/with+signs=\nsecond line of it"
SHOWN = ("import os, sys, base64, urllib.parse, pathlib, json; v = os.environ.get('TOKEN', '');"
         " print('raw', v); print('b64', base64.b64encode(v.encode()).decode());"
         " print('url', urllib.parse.quote(v, safe=''));"
         " f = os.environ.get('KEY_PATH'); k = open(f).read() if f else None;"
         " d = pathlib.Path(os.environ['SPOTCRON_RESULTS_DIR']);"
         " (d / 'seen.json').write_text(json.dumps({'token': v, 'key': k, 'key_path': f}))")


@pytest.fixture
def manager(harness):
    with FakeSecretManager() as fake:
        # The harness's VM token, as the local metadata server mints it: the VM runs as the job's account.
        fake.tokens[f"local-access-token.{harness.vm_name}"] = f"serviceAccount:{JOB_ACCOUNT}"
        harness.extra_env.update({"SPOTCRON_SECRETS_URL": fake.url,
                                  "SPOTCRON_SECRETS_DIR": str(harness.tmp / "tmpfs" / "secrets")})
        yield fake


def _descriptor(harness: RunnerHarness, *secrets: SecretItem, **overrides):
    return harness.descriptor(command=[sys.executable, "-c", SHOWN], args=[],
                              local_command=[sys.executable, "-c", SHOWN], secrets=list(secrets), **overrides)


def _item(name: str, secret: str, version: str = "latest", file: str | None = None) -> SecretItem:
    return SecretItem(name=name, version=f"projects/{PROJECT}/secrets/{secret}/versions/{version}", file=file)


def _every_stored_byte(harness: RunnerHarness) -> bytes:
    return b"\n".join(harness.objects().values())


def _forms(value: bytes) -> list[bytes]:
    text = value.decode()
    return [line.encode() for line in text.splitlines()] + [
        base64.b64encode(value).rstrip(b"="), quote(text, safe="").encode()]


@pytest.mark.parametrize("docker", ["none", "fake"])
def test_each_value_reaches_the_job_alone_masked_and_its_version_is_reported(harness, manager, docker):
    manager.add(f"projects/{PROJECT}/secrets/token", b"old", VALUE, readers=(JOB_ACCOUNT,))
    manager.add(f"projects/{PROJECT}/secrets/key", b"key-v1", b"key-v2", readers=(JOB_ACCOUNT,))
    descriptor = _descriptor(harness, _item("TOKEN", "token"),
                             _item("KEY_PATH", "key", "1", file="/run/secrets/key.pem"))
    result = harness.run(descriptor, docker=harness.fake_docker if docker == "fake" else "none")
    assert result.rc == 0, result.stderr
    [call] = harness.receiver.accepted
    assert call.body["status"] == "exited" and call.body["exit_code"] == 0, call.body
    assert call.body["secret_versions"] == {"TOKEN": "2", "KEY_PATH": "1"}  # latest resolved to 2; 1 was pinned
    seen = json.loads(harness.objects()[descriptor.prefix + "attempt-1/results/seen.json"])
    # The results hold what the job saw, written by the job itself: the runner never stores it.
    assert seen["token"] == VALUE.decode() and seen["key"] == "key-v1"
    if docker == "fake":
        [run] = [argv for argv in harness.docker_calls() if argv[:1] == ["run"]]
        # The value is on no command line: `-e TOKEN` takes it from docker's own environment.
        assert "TOKEN" in run and not any(VALUE.decode() in arg or "key-v1" in arg for arg in run)
        assert any(arg.endswith(":/run/secrets/key.pem:ro") for arg in run)
    logs = harness.objects()[descriptor.prefix + "attempt-1/logs.txt"]
    assert b"raw ***" in logs and b"b64 ***" in logs and b"url ***" in logs, logs
    stored = b"\n".join(v for k, v in harness.objects().items() if not k.endswith("results/seen.json"))
    for form in _forms(VALUE):
        assert form not in stored, form
    assert not (harness.tmp / "tmpfs" / "secrets").exists()  # gone with the attempt
    assert manager.request_shape_problems() == []
    assert len(manager.server.requests) == 2  # one access per secret per run


@pytest.mark.parametrize(("setup", "why"), [
    ("no-grant", "HTTP 403: the VM's account may not access it"),
    ("missing", "HTTP 403"),
    ("disabled", "HTTP 400: the version is disabled or destroyed"),
    ("no-version", "HTTP 404: no such secret or version"),
    ("corrupt", "arrived damaged: its CRC32C does not match"),
])
def test_a_secret_that_cannot_be_read_fails_the_attempt_before_the_job_starts(harness, manager, setup, why):
    name = f"projects/{PROJECT}/secrets/token"
    if setup != "missing":
        secret = manager.add(name, b"v1-value", readers=() if setup == "no-grant" else (JOB_ACCOUNT,))
        if setup == "disabled":
            secret.versions[1] = (b"v1-value", "DISABLED")
    manager.corrupt = setup == "corrupt"
    version = "7" if setup == "no-version" else "1" if setup == "disabled" else "latest"
    result = harness.run(_descriptor(harness, _item("TOKEN", "token", version)))
    assert result.rc == 0, result.stderr
    [call] = harness.receiver.accepted
    assert call.body["exit_code"] is None and call.body["started_at"] is None
    assert call.body["problem"].startswith(f"secret TOKEN ({name}"), call.body["problem"]
    assert why in call.body["problem"]
    assert "v1-value" not in json.dumps(call.body)
    assert "seen.json" not in " ".join(harness.objects())  # the job never ran
    assert manager.request_shape_problems() == []


def test_the_runner_computes_crc32c_as_secret_manager_does(tmp_path):
    """The bash CRC32C against Google's documented check value and the fake's."""
    import subprocess

    from spotcron.core.secret_refs import crc32c
    runner = Path(__file__).resolve().parents[2] / "vm_images" / "runner"
    for data in (b"123456789", b"", bytes(range(256)) * 3, VALUE):
        (tmp_path / "v").write_bytes(data)
        out = subprocess.run(["bash", "-c", f'source "{runner}/http.sh"; source "{runner}/secrets.sh";'
                              f' crc32c_file "{tmp_path}/v"; echo "$CRC"'], capture_output=True, text=True,
                             env={"PATH": os.environ["PATH"]})
        assert int(out.stdout) == crc32c(data)
    assert crc32c(b"123456789") == 0xE3069283  # CRC-32C's check value (RFC 3720, appendix B.4)
