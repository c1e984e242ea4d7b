"""A manual run's overrides (`spotcron run JOB --env K=V --args ...`): what changes, and its digest.

Overrides never travel in a start message: whoever may publish there may only ask for the deployed
spec. The CLI (the control plane, like deploy) writes them to `overrides/DIGEST.json` in the bucket,
where no VM credential can write, and the start message names the digest; start_job reads the
object, checks its sha256 and applies it to the deployed spec's configurations. The run records
what it ran with (`RunRecord.overrides`), and such a run is no part of the job's health streak
(it did not run the job's own spec). The schedule and the deployed spec stay as they are.

An override may not name a variable the job (or a matrix entry) declares in `secrets:`: its value
would be a secret kept as plain text in the overrides object, the run record and the VM's metadata.
The CLI refuses it before it writes anything (secret_problem), and applied() validates the copy it
makes against every rule of the spec, so whoever writes an overrides object some other way gets
the manual start refused by start_job, before any record exists.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spotcron.core.spec import Argv, EnvMap, JobSpec

PREFIX = "overrides/"
MAX_BYTES = 64 << 10
# How long an overrides object can still be used: only start_job reads it, for the start message
# that names it, and Pub/Sub redelivers a message for 7 days at most (a run that then waits in the
# queue or for a retry runs from its record's copy). The bucket's lifecycle rule deletes the
# prefix after this many days (deploy/desired.py), and start_job refuses an object older than that
# wherever no such rule runs (the local bucket).
KEEP_DAYS = 8


class Overrides(BaseModel):
    """What changes for one manual run, and which run it is for.

    `job` and `nonce` bind the object to the one request the CLI wrote it for (its start message
    names the job and carries the nonce): start_job refuses it for any other job or request. Both
    are part of the digest. The nonce and the digest are no secret (the run id holds the one, the
    run record the other), so the first start that uses the object also consumes it
    (`overrides/DIGEST.used`, created only if absent, naming the run): a later message with the
    same job, digest and nonce is refused, a redelivery of the same message names the same run and
    goes on. Whoever may publish on the start topic can therefore replay one run's args and env
    neither onto another job nor onto a later run of the same job."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    env: EnvMap = Field({}, description="variables added to (or replacing) every configuration's env")
    args: Argv | None = Field(None, description="replaces every configuration's args")
    job: str | None = Field(None, description="the job whose run these are for (set by the CLI)")
    nonce: str | None = Field(None, description="the start request's nonce (set by the CLI)")

    def for_run(self, job: str, nonce: str) -> Overrides:
        """These overrides bound to the manual run of `job` its start message asks for with `nonce`."""
        return self.model_copy(update={"job": job, "nonce": nonce})

    def binding_problem(self, job: str, nonce: str | None) -> str | None:
        """Why these overrides may not be applied to the start of `job` with `nonce`; None when
        they were written for exactly that request."""
        if self.job is None or self.nonce is None:
            return "they name no job and no request, so they could be applied to any run"
        if self.job != job:
            return f"they were written for a run of job {self.job!r}, not of job {job!r}"
        if self.nonce != nonce:
            return "they were written for another start request of this job (its nonce differs)"
        return None

    @property
    def empty(self) -> bool:
        return not self.env and self.args is None

    def canonical(self) -> bytes:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode()

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()

    def applied(self, spec: JobSpec) -> JobSpec:
        """One resolved configuration (a `variants()` copy) with these overrides, validated as a
        whole: pydantic.ValidationError when the copy breaks a rule of the spec (a name in both
        env and secrets, say). A model_copy would skip the validators, and the copy is what the run
        record, the VM's metadata and the container get."""
        payload = spec.to_payload()
        payload["env"] = {**spec.env, **self.env}
        if self.args is not None:
            payload["args"] = list(self.args)
        return JobSpec.from_payload(payload)

    def secret_problem(self, spec: JobSpec) -> str | None:
        """Why these overrides may not run `spec` because they set a variable that the job or one of
        its matrix entries declares in `secrets:`; None when they set none."""
        declared = {name: ref.secret for variant in spec.configurations() for name, ref in variant.secrets.items()}
        clash = sorted(set(self.env) & set(declared))
        if not clash:
            return None
        which = ", ".join(f"{name} (secret {declared[name]})" for name in clash)
        first = declared[clash[0]]
        return (f"--env {', '.join(clash)}: job {spec.name} declares {which} in `secrets:`, so the value is a "
                f"secret, and an --env value is kept as plain text in the bucket, the run record and the VM's "
                f"metadata. Store another value of the secret instead (`spotcron secrets set {first} --cloud`, or "
                f"--local for local runs) and run the job again")

    def problem(self, spec: JobSpec) -> str | None:
        """Why these overrides cannot run `spec` (every matrix entry and repeat of it), in words that
        never quote a value; None when each configuration with them is a valid spec."""
        secret = self.secret_problem(spec)
        if secret:
            return secret
        for variant in spec.variants():
            try:
                self.applied(variant)
            except ValidationError as exc:
                return "; ".join(str(error["msg"]) for error in exc.errors(include_input=False))
        return None

    def recorded(self) -> dict[str, Any]:
        """What the run record keeps: the variable names and the args (values of env may be secrets
        of a sort; the record names them only)."""
        out: dict[str, Any] = {"digest": self.digest}
        if self.env:
            out["env"] = sorted(self.env)
        if self.args is not None:
            out["args"] = list(self.args)
        return out


def object_name(digest: str) -> str:
    return f"{PREFIX}{digest}.json"


def used_name(digest: str) -> str:
    """The create-only mark that overrides `digest` served a run (engine/run_overrides.claim)."""
    return f"{PREFIX}{digest}.used"


def parse_env_pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    """`K=V` words (from --env) → a mapping; ValueError naming the bad one."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--env {pair!r}: write NAME=VALUE, e.g. --env LOG_LEVEL=debug")
        env[name] = value
    return env
