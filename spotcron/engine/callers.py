"""Who is calling: the one check of a VM's instance identity token, for job_done and the broker.

Both HTTP functions are called by a job's VM with a Google-signed instance identity token
(`format=full`) whose audience is the function's own URL. Both must believe the same things
before they act, so both call this module, in two steps:

1. `vm_caller(deps, authorization, audience)`: the token itself. The `Bearer` header, the
   signature, audience, issuer and expiry (deps.identity), the instance claims and the project.
   It says which VM is calling; it does not yet say which run that VM may speak for.
2. `attempt_problem(deps, caller, record, number)`: the caller is the VM of attempt `number` of
   `record`: the account it runs as (`expected_email`), and the instance's name, zone and id.

The token names the instance; a request body or a VM label only tells which record to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spotcron.core.errors import InvalidToken
from spotcron.core.runs import Attempt, RunRecord
from spotcron.core.settings import Settings
from spotcron.engine.deps import Deps


class CallerRefused(Exception):
    """The caller is not believed: answer `status` (401 or 403) with this message, change nothing."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class MissingToken(CallerRefused):
    """No bearer token at all: a caller that forgot to send one, told how, unlike a bad one."""


@dataclass(frozen=True)
class VmCaller:
    """A verified instance identity token: the VM it was issued to."""

    token: str
    email: str
    instance_name: str
    zone: str  # the short zone name (the claim is projects/NUMBER/zones/ZONE)
    instance_id: str
    claims: dict[str, Any]


@dataclass(frozen=True)
class Mismatch:
    """Why a verified caller may not speak for an attempt. `same_vm`: the caller is the VM of
    that name the attempt once ran on or would run on (a stray of the run), not a stranger."""

    message: str
    same_vm: bool = False


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header value, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def expected_email(settings: Settings, record: RunRecord | None = None, attempt: Attempt | None = None) -> str:
    """The service account the VM of `attempt` of `record` runs as: the one email both functions accept.

    The job's own account when its spec names one (the attempt records it, and start_job created
    the VM as it), else spotcron's VM account. A token of any other account, spotcron's VM
    account for a job with its own included, is never this attempt's VM.
    """
    if attempt is not None and attempt.service_account:
        return attempt.service_account
    return settings.vm_service_account_email


def vm_caller(deps: Deps, authorization: str | None, audience: str) -> VmCaller:
    """Step 1: the VM behind a request's `Authorization` header, or CallerRefused (401 / 403)."""
    token = bearer(authorization)
    if token is None:
        raise MissingToken(401, "missing bearer token")
    try:
        claims = deps.identity.verify(token, audience)
    except InvalidToken as exc:
        raise CallerRefused(401, f"invalid token: {exc}") from None
    engine = (claims.get("google") or {}).get("compute_engine") or {}
    if not engine.get("instance_name") or not engine.get("zone"):
        raise CallerRefused(403, "token has no instance claims; request it with format=full")
    if engine.get("project_id") != deps.settings.project:
        raise CallerRefused(403, f"token is from project {engine.get('project_id')!r}, not {deps.settings.project!r}")
    if not claims.get("email_verified", False):
        raise CallerRefused(403, f"token is for {claims.get('email')!r}, whose email is not verified")
    return VmCaller(token=token, email=str(claims.get("email") or ""), instance_name=str(engine["instance_name"]),
                    zone=str(engine["zone"]).rsplit("/", 1)[-1], instance_id=str(engine.get("instance_id") or ""),
                    claims=dict(claims))


def attempt_problem(deps: Deps, caller: VmCaller, record: RunRecord, number: int, *,
                    live: bool) -> Mismatch | None:
    """Step 2: why `caller` is not the VM of attempt `number` of `record`, or None when it is.

    `live`: the attempt must also be the run's current one, not ended (the broker: credentials
    only while the attempt runs). Without it (job_done), an attempt the record does not know is
    no mismatch: the transition refuses it and nothing changes. The name alone cannot tell: a
    stalled delivery can re-create a VM under the same name after the attempt ended, and a zone
    move leaves the name unchanged, so zone and instance id are compared too; an instance id the
    record does not hold yet (the VM asks before start_job wrote it) is compared by the caller.
    """
    attempt = next((a for a in record.attempts if a.number == number), None)
    email = expected_email(deps.settings, record, attempt)
    where = f"{record.job}/{record.run_id}"
    if caller.email != email:
        return Mismatch(f"token is for {caller.email!r}, but attempt {number} of {where} runs as {email!r}")
    if attempt is None:
        return Mismatch(f"run {where} has no attempt {number}") if live else None
    if caller.instance_name != attempt.vm_name:
        return Mismatch(f"the token belongs to VM {caller.instance_name}, which does not run {where} "
                        f"attempt {number}")
    if live and (record.terminal or record.current_attempt != attempt or attempt.outcome is not None):
        return Mismatch(f"VM {caller.instance_name} is not the live attempt of run {where}; no credentials",
                        same_vm=True)
    if attempt.zone and attempt.zone != caller.zone:
        return Mismatch(f"the token is from zone {caller.zone}, but attempt {number} of {where} runs in zone "
                        f"{attempt.zone}", same_vm=True)
    if attempt.instance_id and caller.instance_id != attempt.instance_id:
        return Mismatch(f"the token is from instance {caller.instance_id or '(none)'} named {attempt.vm_name}, "
                        f"but attempt {number} of {where} ran on instance {attempt.instance_id}", same_vm=True)
    return None
