"""Each job with secrets runs as an account of its own.

docs/security.md, "Each job reads only its own secrets": a job with secrets and no
`service_account:` runs as an account deploy makes for it, `sc-JOB-HASH`, "which holds
roles/secretmanager.secretAccessor on exactly its secrets". deploy/secret_grants.secrets_account
names it from the job name's first 19 characters and 6 hex digits (24 bits) of its SHA-256, so two
job names that share those characters and collide in 24 bits, a few million tries (seconds) for
anyone who knows the other job's name, get one account. Deploy then refuses both jobs together
(jobs that share an account must name the same secrets), naming an account neither job names; and
once the first job is removed, the second runs as its account, which still holds every accessor
binding deploy left on secrets no job names any more ("Limits of what is built"), and reads the
removed job's repository (its container gets no metadata access, so it is the VM's runner, not the
job's code, that holds those grants).
"""

from __future__ import annotations

from spotcron.core.spec import JobSpec
from spotcron.deploy.secret_grants import secrets_account, with_secret_accounts
from spotcron.deploy.validate import run_account
from tests.deploy.conftest import make_settings

VICTIM = "nightly-payroll-export"
# Found by trying names VICTIM[:19] + "-" + six characters until the 6-hex hashes agreed (6.5 million tries).
OTHER = "nightly-payroll-exp-hxm6da"


def _job(name: str, secret: str) -> JobSpec:
    return JobSpec.model_validate({"name": name, "schedule": "0 1 * * *", "image": "python:3.12",
                                   "secrets": {"TOKEN": secret}})


def test_two_jobs_with_secrets_never_get_one_made_account() -> None:
    settings = make_settings()
    assert VICTIM != OTHER
    victim, other = with_secret_accounts(settings, [_job(VICTIM, "payroll-db"), _job(OTHER, "weather-api")])
    assert victim.service_account != other.service_account, (
        f"jobs {VICTIM} and {OTHER} both run as {victim.service_account}: the made account's name keeps "
        f"only 24 bits of the job's name past its 19th character")
    assert run_account(settings, victim) != run_account(settings, other)
    assert secrets_account(settings, VICTIM) != secrets_account(settings, OTHER)
