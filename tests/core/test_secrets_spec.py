"""`secrets:` in a job file: names only, placed errors for values pasted in, clashes and leaks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotcron.core.errors import ConfigError
from spotcron.core.loader import load_jobs
from spotcron.core.secret_refs import credential_problem, local_variable
from spotcron.core.spec import JobSpec, job_file_schema

OK = 'schedule: "0 * * * *"\nimage: spotcron/bot:latest\n'


def _problems(tmp_path: Path, text: str) -> list[str]:
    (tmp_path / "jobs").mkdir(exist_ok=True)
    (tmp_path / "jobs" / "bot.yaml").write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_jobs([tmp_path / "jobs"])
    return [str(p).removeprefix(str(tmp_path) + "/") for p in caught.value.problems]


def _load(tmp_path: Path, text: str) -> JobSpec:
    (tmp_path / "jobs").mkdir(exist_ok=True)
    (tmp_path / "jobs" / "bot.yaml").write_text(text)
    return load_jobs([tmp_path / "jobs"])[0]


def test_the_three_forms_load_and_entries_add_or_replace(tmp_path):
    spec = _load(tmp_path, OK + "secrets:\n  TOKEN: bot-token\n  KEY: {secret: openai-key, version: 7}\n"
                 "  SA: {secret: projects/other-proj/secrets/sa-key, file: /run/secrets/sa.json}\n"
                 "matrix:\n  - name: a\n  - name: b\n    secrets:\n      TOKEN: {secret: other-token, version: 2}\n")
    assert spec.secrets["TOKEN"].secret == "bot-token" and spec.secrets["TOKEN"].version == "latest"
    assert spec.secrets["KEY"].version == "7"
    assert spec.secrets["SA"].file == "/run/secrets/sa.json"
    a, b = spec.configurations()
    assert a.secrets["TOKEN"].secret == "bot-token"
    assert b.secrets["TOKEN"].secret == "other-token" and b.secrets["TOKEN"].version == "2"
    assert spec.secret_names("proj-one") == ["projects/other-proj/secrets/sa-key", "projects/proj-one/secrets/bot-token",
                                            "projects/proj-one/secrets/openai-key",
                                            "projects/proj-one/secrets/other-token"]
    # The deployed payload names the secrets and round-trips; a job without any keeps its old digest.
    assert JobSpec.from_payload(spec.to_payload()) == spec
    assert "secrets" not in _load(tmp_path, OK).to_payload()


@pytest.mark.parametrize("value", ["ghp_0123456789abcdefghijABCDEFGHIJ0123", "sk-proj-abc123", "xoxb-12-34-abc",
                                   "a" * 256, "hunter2 with spaces", "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
                                   "-----BEGIN PRIVATE KEY-----"])
def test_a_pasted_credential_is_refused_with_its_line_and_the_command_to_store_it(tmp_path, value):
    lines = _problems(tmp_path, OK + f"secrets:\n  TOKEN: {json.dumps(value)}\n")
    assert len(lines) == 1, lines
    assert lines[0].startswith("jobs/bot.yaml:4: secrets.TOKEN")
    assert "spotcron secrets set" in lines[0]
    assert value not in lines[0]  # an error message never repeats what may be the credential


def test_names_that_are_names_pass():
    for name in ("bot-token", "OPENAI_KEY", "projects/my-proj/secrets/x", "projects/123456789/secrets/y"):
        assert credential_problem(name) is None, name


def test_same_name_in_env_and_secrets_is_refused_at_its_line(tmp_path):
    lines = _problems(tmp_path, OK + "env:\n  TOKEN: x\nsecrets:\n  TOKEN: bot-token\n"
                      "matrix:\n  - name: a\n    env:\n      OTHER: y\n    secrets:\n      OTHER: other\n")
    assert lines == [
        "jobs/bot.yaml:6: secrets.TOKEN: 'TOKEN' is set in both env and secrets; a variable comes from one place: "
        "keep it in secrets (its value then never appears in a file)",
        "jobs/bot.yaml:12: matrix[0].secrets.OTHER: 'OTHER' is set in both env and secrets; a variable comes from "
        "one place: keep it in secrets (its value then never appears in a file)",
    ]


def test_a_secret_file_inside_an_uploaded_directory_is_refused(tmp_path):
    lines = _problems(tmp_path, OK + "checkpoint: /ckpt\nsecrets:\n  A: {secret: a, file: /results/a}\n"
                      "  B: {secret: b, file: /ckpt/b}\n  C: {secret: c, file: relative/c}\n")
    assert lines[0].startswith("jobs/bot.yaml:5: secrets.A.file: '/results/a' is inside the results directory")
    assert lines[1].startswith("jobs/bot.yaml:6: secrets.B.file: '/ckpt/b' is inside the checkpoint directory")
    assert lines[2].startswith("jobs/bot.yaml:7: secrets.C.file: 'relative/c' is not an absolute file path")


def test_bad_versions_and_names(tmp_path):
    lines = _problems(tmp_path, OK + "secrets:\n  A: {secret: a, version: 0}\n  B: {secret: b, version: -3}\n"
                      "  C: projects/p/locations/us/secrets/c\n  1X: a\n")
    text = "\n".join(lines)
    # A refused value is not echoed: a version field is where a pasted credential may land.
    assert "jobs/bot.yaml:4: secrets.A.version: is not a secret version" in text
    assert "jobs/bot.yaml:5: secrets.B.version: is not a secret version" in text
    assert "-3" not in text
    assert "jobs/bot.yaml:6: secrets.C" in text and "regional secrets are not supported" in text
    assert "'1X' is not a valid environment variable name" in text


def test_secrets_with_metadata_access_need_the_jobs_own_account(tmp_path):
    lines = _problems(tmp_path, OK + "metadata_access: true\nsecrets:\n  A: a\n")
    assert lines == ["jobs/bot.yaml:3: metadata_access: a job with secrets may not share the VM's identity with its "
                     "container through spotcron's VM account: name the job's own service_account, or remove "
                     "metadata_access"]


def test_credential_looking_env_keys_are_warned_about(tmp_path):
    spec = _load(tmp_path, OK + "env:\n  API_TOKEN: x\n  DB_PASSWORD: y\n  GREETING: hi\n"
                 "matrix:\n  - name: a\n    env:\n      SIGNING_KEY: z\n")
    warned = spec.env_warnings()
    assert [w.split("'")[1] for w in warned] == ["API_TOKEN", "DB_PASSWORD", "SIGNING_KEY"]
    assert all("secrets:" in w and "spotcron secrets set" in w for w in warned)


def test_the_schema_knows_secrets():
    schema = job_file_schema()
    assert "secrets" in schema["properties"]
    assert "secrets" in schema["$defs"]["MatrixEntry"]["properties"]
    on_disk = json.loads((Path(__file__).resolve().parents[2] / "jobs" / "schema.json").read_text())
    assert on_disk["properties"]["secrets"] == json.loads(json.dumps(schema["properties"]["secrets"]))


def test_local_variable_names():
    assert local_variable("bot-token") == "SPOTCRON_SECRET_BOT_TOKEN"
    assert local_variable("projects/p-123456/secrets/sa-key") == "SPOTCRON_SECRET_SA_KEY"


def _write(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / "jobs").mkdir(exist_ok=True)
    (tmp_path / "jobs" / f"{name}.yaml").write_text(OK + text)


ACCOUNT = "service_account: runner@proj-one.iam.gserviceaccount.com\n"


def test_jobs_sharing_an_account_must_name_the_same_secrets(tmp_path):
    _write(tmp_path, "bot", ACCOUNT + "secrets:\n  TOKEN: bot-token\n")
    _write(tmp_path, "nightly", ACCOUNT)
    with pytest.raises(ConfigError) as caught:
        load_jobs([tmp_path / "jobs"])
    problems = [str(p) for p in caught.value.problems]
    assert len(problems) == 2
    assert all("service_account: service account runner@proj-one.iam.gserviceaccount.com is also the account "
               "of job(s)" in p for p in problems), problems


def test_jobs_may_share_an_account_without_secrets_or_with_the_same_ones(tmp_path):
    _write(tmp_path, "bot", ACCOUNT)
    _write(tmp_path, "nightly", ACCOUNT)
    assert len(load_jobs([tmp_path / "jobs"])) == 2
    _write(tmp_path, "bot", ACCOUNT + "secrets:\n  TOKEN: bot-token\n")
    _write(tmp_path, "nightly", ACCOUNT + "secrets:\n  OTHER_NAME: {secret: bot-token, version: 2}\n")
    assert len(load_jobs([tmp_path / "jobs"])) == 2


def test_a_job_may_not_name_an_account_deploy_makes(tmp_path):
    [problem] = _problems(tmp_path, OK + "service_account: sc-bot-1a2b3c@proj-one.iam.gserviceaccount.com\n")
    assert "bot.yaml" in problem and "service_account" in problem
    assert "the accounts deploy makes for one job's secrets" in problem


def test_a_refused_version_is_not_echoed(tmp_path):
    pasted = "ghp_R3alLookingT0kenValue0123456789abcd"
    text = "\n".join(_problems(tmp_path, OK + f"secrets:\n  A: {{secret: a, version: {pasted}}}\n"))
    assert "secrets.A.version: is not a secret version" in text and pasted not in text


@pytest.mark.parametrize("name", ["bot-token", "nightly-key", "my-service-prod-api-token-2024", "openai-api-key",
                                  "stripe_live_secret_2025", "pat-for-github", "key-rotation", "s3-bucket-key",
                                  "projects/demo-proj/secrets/bot-token"])
def test_ordinary_secret_names_are_not_taken_for_credentials(name):
    assert credential_problem(name) is None


def test_a_known_token_in_env_is_refused_without_echoing_it_and_a_random_one_is_warned_about(tmp_path):
    token = "glpat-" + "x1Y2z3W4v5U6t7S8r9Q0"
    [problem] = _problems(tmp_path, OK + f"env:\n  GL: {token}\n")
    assert "bot.yaml:3: env: GL: the value looks like a credential" in problem and token not in problem
    spec = _load(tmp_path, OK + "env:\n  REQUEST_ID: 550e8400-e29b-41d4-a716-446655440000\n  MODE: fast\n")
    [warning] = spec.env_warnings()
    assert "REQUEST_ID" in warning and "550e8400" not in warning
