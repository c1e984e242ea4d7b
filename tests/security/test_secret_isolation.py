"""A job's secrets stay its own: no leak past masking, no pasted credential taken for a name, no job
reading another job's secret. Each test mounts one such attempt and checks that spotcron holds."""

from __future__ import annotations

import json
import os
import sys

import pytest
from google.cloud.iam_admin_v1 import types

from spotcron.core.descriptor import SecretItem
from tests.deploy.conftest import PROJECT as DEPLOY_PROJECT
from tests.deploy.conftest import cloud, deployer, jobs_dir, settings, source  # noqa: F401  (fixtures)
from tests.fakes.secretmanager import FakeSecretManager
from tests.runner.conftest import broker, bucket, harness, metadata, receiver, signer  # noqa: F401  (fixtures)
from tests.runner.harness import needs_runner_tools

PROJECT = "proj-one"
JOB_ACCOUNT = "sc-hello-secrets@proj-one.iam.gserviceaccount.com"


# --- (a) one job reads another job's secret on Google Cloud -------------------------------------

def test_a_job_sharing_a_service_account_cannot_read_another_jobs_secret(deployer, cloud, jobs_dir):  # noqa: F811
    _share_an_account(deployer, cloud, jobs_dir, made=False)


def test_a_job_naming_the_account_deploy_made_for_another_job_cannot_read_its_secret(deployer, cloud,  # noqa: F811
                                                                               jobs_dir):  # noqa: F811
    """bot names bot-token and no service_account: deploy makes sc-bot-HASH for it (a name anyone
    computes: secrets_account). Once it exists, nightly writes `service_account: sc-bot-HASH@...`: it
    runs as bot's account and, naming its own service_account, its container reaches the metadata
    server, whose token reads bot-token."""
    _share_an_account(deployer, cloud, jobs_dir, made=True)


def _share_an_account(deployer, cloud, jobs_dir, *, made: bool):  # noqa: F811
    """bot names bot-token and runs as bot-runner; nightly names no secret but names the same
    service_account. A job with its own service_account gets metadata access in its container
    (JobSpec.reaches_metadata), so nightly's container takes bot-runner's token from the metadata
    server and reads bot-token, which deploy bound to bot-runner. Deploy must refuse this (or at
    least never give such a container the account's token)."""
    from spotcron.core.errors import ConfigError
    from spotcron.core.spec import JobSpec
    from spotcron.gcp.admin.calls import DeployError

    cloud.enable_apis()  # a project in use: its owner made the secret (and an account)
    token = f"projects/{DEPLOY_PROJECT}/secrets/bot-token"
    cloud.secrets.add(token, b"v1")
    bot, nightly = jobs_dir / "bot.yaml", jobs_dir / "nightly.yaml"
    if made:
        from spotcron.deploy.secret_grants import secrets_account
        from tests.deploy.conftest import make_settings
        account = secrets_account(make_settings(), "bot")
        bot.write_text(bot.read_text() + "secrets:\n  BOT_TOKEN: bot-token\n")
        deployer.deploy(deployer.jobs(jobs_dir))  # bot alone first: deploy makes its account
    else:
        account = f"bot-runner@{DEPLOY_PROJECT}.iam.gserviceaccount.com"
        cloud.clients().iam.create_service_account(request=types.CreateServiceAccountRequest(
            name=f"projects/{DEPLOY_PROJECT}", account_id="bot-runner"))
        bot.write_text(bot.read_text() + f"service_account: {account}\nsecrets:\n  BOT_TOKEN: bot-token\n")
    nightly.write_text(nightly.read_text() + f"service_account: {account}\n")
    try:
        deployer.deploy(deployer.jobs(jobs_dir))
    except (ConfigError, DeployError):
        return  # refused (by the job files' check or by deploy): the attack held
    data, _ = next(v for k, v in cloud.storage.objects.items() if k[1] == "deployed/nightly.json")
    deployed = JobSpec.from_payload(json.loads(data))
    readers = cloud.secrets.readers(token)
    assert not (deployed.reaches_metadata and f"serviceAccount:{deployed.service_account}" in readers), (
        f"nightly names no secret, yet its container reaches the metadata server as {deployed.service_account}, "
        f"which may read {token} (readers {readers})")


# --- (b) leaks past the runner's log masking ---------------------------------------------------

@pytest.fixture
def manager(harness):  # noqa: F811
    with FakeSecretManager() as fake:
        fake.tokens[f"local-access-token.{harness.vm_name}"] = f"serviceAccount:{JOB_ACCOUNT}"
        harness.extra_env.update({"SPOTCRON_SECRETS_URL": fake.url,
                                  "SPOTCRON_SECRETS_DIR": str(harness.tmp / "tmpfs" / "secrets")})
        yield fake


def _run_printing(harness, manager, value: bytes, program: str, expected_gone: list[bytes]) -> bytes:  # noqa: F811
    manager.add(f"projects/{PROJECT}/secrets/token", value, readers=(JOB_ACCOUNT,))
    code = "import os, sys, base64, binascii, json; v = os.environ['TOKEN']; " + program
    descriptor = harness.descriptor(command=[sys.executable, "-c", code], args=[],
                                    local_command=[sys.executable, "-c", code],
                                    secrets=[SecretItem(name="TOKEN",
                                                        version=f"projects/{PROJECT}/secrets/token/versions/latest")])
    result = harness.run(descriptor, docker="none")
    assert result.rc == 0, result.stderr
    logs = harness.objects()[descriptor.prefix + "attempt-1/logs.txt"]
    stored = b"\n".join(harness.objects().values())
    for form in expected_gone:
        assert form not in stored, (form, logs)
    return logs


LONG = b"AbCdEfGh-0123456789-ijklmnopqrst-UVWXYZ-9876543210-qwertyuiop-ASDFGHJKL"  # 70 bytes, a typical API key


@needs_runner_tools
@pytest.mark.slow
def test_basic_auth_header_of_the_secret_is_masked(harness, manager):  # noqa: F811
    """An HTTP client's debug output prints `Authorization: Basic base64(user:password)`: the
    base64 of the value at another offset is not masked; it decodes to the value."""
    import base64
    shown = base64.b64encode(b"user:" + LONG)
    _run_printing(harness, manager, LONG,
                  "print('Authorization: Basic ' + base64.b64encode(b'user:' + v.encode()).decode())",
                  [shown[8:-4]])


@needs_runner_tools
@pytest.mark.slow
def test_wrapped_base64_of_the_secret_is_masked(harness, manager):  # noqa: F811
    """`base64` (coreutils, Python's encodebytes) wraps at 76 columns: the mask is one line, so a
    value over 57 bytes, once encoded, is masked on no line."""
    import base64
    wrapped = base64.encodebytes(LONG)
    _run_printing(harness, manager, LONG, "sys.stdout.write(base64.encodebytes(v.encode()).decode())",
                  [line for line in wrapped.splitlines() if len(line) > 8])


@needs_runner_tools
@pytest.mark.slow
def test_hex_of_the_secret_is_masked(harness, manager):  # noqa: F811
    """A hexdump (xxd, a bytes value's .hex(), a debug dump of a request) is not masked."""
    _run_printing(harness, manager, LONG, "print(v.encode().hex())", [LONG.hex().encode()])


@needs_runner_tools
@pytest.mark.slow
def test_escaped_form_of_the_secret_is_masked(harness, manager):  # noqa: F811
    """Printing a config dict or json.dumps (the commonest accident) escapes a backslash or a quote:
    a password with one is then stored whole."""
    value = b'Pa\\ss"w0rd-long-enough'
    _run_printing(harness, manager, value, "print(json.dumps({'password': v})); print(repr({'password': v}))",
                  [b'Pa\\\\ss\\"w0rd-long-enough', b'Pa\\\\ss"w0rd-long-enough'])


# --- (a) one job reads another job's secret locally --------------------------------------------

@needs_runner_tools
@pytest.mark.slow
def test_a_file_secret_is_not_readable_by_other_local_users(harness, manager):  # noqa: F811
    """A `file:` secret lies in SECRETS_DIR (locally /dev/shm/spotcron-UID-VM-RANDOM, whose name any
    user sees by listing /dev/shm) as `SECRETS_DIR/1`, mode 0444, in a directory of mode 0711: any
    user of the machine (another job of another user, a stray process) reads it by its guessable
    name without listing the directory."""
    import stat

    manager.add(f"projects/{PROJECT}/secrets/key", b"key-value-for-a-file", readers=(JOB_ACCOUNT,))
    code = ("import os, json, pathlib; p = os.environ['KEY_PATH'];"
            " d = os.path.dirname(p); f = os.path.basename(p);"
            " (pathlib.Path(os.environ['SPOTCRON_RESULTS_DIR']) / 'modes.json').write_text(json.dumps("
            "{'dir': os.stat(d).st_mode, 'file': os.stat(p).st_mode, 'name': f}))")
    descriptor = harness.descriptor(command=[sys.executable, "-c", code], args=[],
                                    local_command=[sys.executable, "-c", code],
                                    secrets=[SecretItem(name="KEY_PATH", file="/run/secrets/key",
                                                        version=f"projects/{PROJECT}/secrets/key/versions/latest")])
    result = harness.run(descriptor, docker="none")
    assert result.rc == 0, result.stderr
    modes = json.loads(harness.objects()[descriptor.prefix + "attempt-1/results/modes.json"])
    others_reach = bool(modes["dir"] & stat.S_IXOTH) and bool(modes["file"] & stat.S_IROTH)
    guessable = len(modes["name"]) < 16
    assert not (others_reach and guessable), (
        f"the secret's file {modes['name']!r} ({oct(modes['file'])}) in a directory of mode {oct(modes['dir'])}: "
        f"any user opens it by name")


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="a local job runs as the user and can open .spotcron/secrets.env by its "
                                       "path; documented in docs/security.md and docs/jobs.md (local mode does not "
                                       "isolate jobs' secrets)")
def test_a_local_job_cannot_read_another_jobs_secret_from_the_stand_ins_dotenv(tmp_path, monkeypatch):
    """Locally, a job's command runs as the user, and the local Secret Manager's values lie in
    .spotcron/secrets.env, readable by every job: a job naming no secret reads them all."""
    from spotcron.core import layout
    from spotcron.core.loader import load_jobs
    from spotcron.local.stack import LocalStack
    from tests.local.conftest import no_container_runtime, python_job, write_job

    monkeypatch.delenv("SPOTCRON_SECRET_BOT_TOKEN", raising=False)
    state = tmp_path / "state"
    state.mkdir()
    (state / "secrets.env").write_text('BOT_TOKEN="bots-own-secret-value-42"\n')
    thief = ("import pathlib, os, glob;"
             " found = [open(p).read() for p in glob.glob(os.path.join(os.getcwd(), '*', 'secrets.env'))"
             " + glob.glob(" + repr(str(state / "secrets.env")) + ")];"
             " (pathlib.Path(os.environ['SPOTCRON_RESULTS_DIR']) / 'loot.txt').write_text(''.join(found))")
    write_job(tmp_path / "jobs", "thief", python_job(thief))
    spec = load_jobs([tmp_path / "jobs"])[0]
    stack = LocalStack(state, environ=dict(os.environ), cwd=tmp_path, runtime_for=no_container_runtime,
                       sweep_interval=2, grace=4).start()
    try:
        runs = stack.run_now(spec)
        [record] = stack.wait(runs, timeout=90)
        assert record.state == "succeeded", record.reason
        job, run_id = runs[0]
        loot = stack.deps.blobs.read(layout.attempt_prefix(job, run_id, 1) + "results/loot.txt")
        assert loot is None or b"bots-own-secret-value-42" not in loot.data, (
            "a job that names no secret read bot's secret from the local stand-in's secrets.env")
    finally:
        stack.stop()


# --- bad input: a pasted credential that is taken for a name, or kept in plain env ---------------

@pytest.mark.parametrize("pasted", [
    "9f2c4e7a1b3d5f60718293a4b5c6d7e8f9012345",                          # a 40-hex token (GitHub classic, many APIs)
    "5f4dcc3b5aa765d61d8327deb882cf99",                                  # a 32-hex API key (Datadog, Mailgun, ...)
    "550e8400-e29b-41d4-a716-446655440000",                              # a UUID API key (Heroku, many SaaS)
    "glsa_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6_1a2b3c4d",               # a Grafana service-account token
])
def test_a_pasted_token_is_refused_as_a_secrets_name(tmp_path, pasted):
    """A token without one of the known prefixes, or with a '-'/'_' in it, passes as a secret id; it
    then travels as a name: job file, deployed spec, descriptor, instance metadata, run record,
    `secrets list`, and the not-found message of deploy and of the runner (which echo it)."""
    from spotcron.core.errors import SpotcronError
    from spotcron.core.loader import load_jobs

    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "bot.yaml").write_text('schedule: "0 3 * * *"\nimage: python:3.12\nmachine: {type: e2-small}\n'
                                   f'command: ["python", "-c", "print(1)"]\nsecrets:\n  API: {pasted}\n')
    try:
        load_jobs([jobs])
    except SpotcronError as refused:
        assert pasted not in str(refused)  # refused, without echoing it
        return
    pytest.fail(f"{pasted!r} was accepted as the name of a secret")


def test_a_token_pasted_into_env_is_flagged(tmp_path):
    """env: values are stored in the deployed spec and the VM's metadata. A value with a well-known
    token prefix under a key that does not say TOKEN/KEY/... gets no warning and no error."""
    from spotcron.core.errors import SpotcronError
    from spotcron.core.loader import load_jobs

    jobs = tmp_path / "jobs"
    jobs.mkdir()
    token = "ghp_R3alLookingT0kenValue0123456789abcd"
    (jobs / "bot.yaml").write_text('schedule: "0 3 * * *"\nimage: python:3.12\nmachine: {type: e2-small}\n'
                                   f'command: ["python", "-c", "print(1)"]\nenv:\n  GH: {token}\n')
    try:
        [spec] = load_jobs([jobs])
    except SpotcronError:
        return
    assert spec.env_warnings(), "a GitHub token in env: GH passes silently into the deployed spec and VM metadata"


def test_a_local_value_with_a_backslash_n_survives_the_dotenv(tmp_path):
    """`spotcron secrets set --local` writes secrets.env and the stand-in reads it back: the
    unescaping replaces \\n before \\\\, so `C:\\new` comes back with a backslash and a newline in it."""
    from spotcron.cli.secrets import _store_locally
    from spotcron.local.secret_manager import LocalSecrets

    _store_locally(tmp_path, "win-path", b"C:\\new\\token-value")
    assert LocalSecrets({}, tmp_path).value("win-path") == ("dotenv", b"C:\\new\\token-value")


def test_a_local_value_with_a_carriage_return_cannot_define_another_secret(tmp_path):
    """A '\\r' in a value stored by `spotcron secrets set --local` is written raw; the stand-in's
    splitlines() cuts there, and the rest is read as another job's secret."""
    from spotcron.cli.secrets import _store_locally
    from spotcron.local.secret_manager import LocalSecrets

    _store_locally(tmp_path, "bot-token", b"first\rSPOTCRON_SECRET_OTHER_JOB=injected")
    secrets = LocalSecrets({}, tmp_path)
    assert secrets.value("other-job") is None, "a value stored for bot-token defined other-job's secret"
    assert secrets.value("bot-token") == ("dotenv", b"first\rSPOTCRON_SECRET_OTHER_JOB=injected")


@needs_runner_tools
@pytest.mark.slow
@pytest.mark.parametrize(("program", "shown"), [
    # urllib's default quote() keeps '/', as a URL in a traceback or a request log shows a query value.
    ("import urllib.parse; print('GET /api?key=' + urllib.parse.quote(v))", b"%3Fzz/yy%2Bxx%3D%3D~ab%20cd"),
    # quote_plus (form bodies, query strings): a space is '+'.
    ("import urllib.parse; print(urllib.parse.quote_plus(v))", b"%3Fzz%2Fyy%2Bxx%3D%3D~ab+cd"),
    # Lower-case percent-escapes (JavaScript-style encoders, some HTTP libraries' logs).
    ("import urllib.parse; print(urllib.parse.quote(v, safe='').lower())", b"%3fzz%2fyy%2bxx%3d%3d~ab%20cd"),
    # base64url (JWTs, signed URLs): '-' and '_' for '+' and '/'.
    ("print(base64.urlsafe_b64encode(v.encode()).decode())", b"P3p6L3l5K3h4PT1-YWIgY2"),
])
def test_other_common_encodings_of_the_secret_are_masked(harness, manager, program, shown):  # noqa: F811
    """The masker knows the raw lines, standard base64 and one percent-encoding (everything but
    unreserved, upper-case). Other encodings an HTTP client or a logger commonly writes pass."""
    _run_printing(harness, manager, b"?zz/yy+xx==~ab cd", program, [shown])


@needs_runner_tools
@pytest.mark.slow
def test_a_binary_file_secret_is_masked_past_its_first_nul(harness, manager):  # noqa: F811
    """fetch_secrets reads the value with `read -r -d ''`, which stops at the first NUL byte: the
    masks are made from that prefix alone. A binary secret (a DER key, a keystore, a keytab)
    delivered as a file and dumped by the job is stored unmasked after its first NUL."""
    value = b"\x00\x01HDR" + b"tail-of-the-binary-key-0123456789abcdef" + b"\n"
    manager.add(f"projects/{PROJECT}/secrets/key", value, readers=(JOB_ACCOUNT,))
    code = "import os, sys; sys.stdout.buffer.write(open(os.environ['KEY_PATH'], 'rb').read())"
    descriptor = harness.descriptor(command=[sys.executable, "-c", code], args=[],
                                    local_command=[sys.executable, "-c", code],
                                    secrets=[SecretItem(name="KEY_PATH", file="/run/secrets/key.der",
                                                        version=f"projects/{PROJECT}/secrets/key/versions/latest")])
    result = harness.run(descriptor, docker="none")
    assert result.rc == 0, result.stderr
    stored = b"\n".join(harness.objects().values())
    assert b"tail-of-the-binary-key-0123456789abcdef" not in stored
