"""A manual run's overrides (`spotcron run JOB --env K=V --args ...`): what changes, and its digest.

Overrides never travel in a start message: whoever may publish there may only ask for the deployed
spec. The CLI (the control plane, like deploy) writes them to `overrides/DIGEST.json` in the bucket,
where no VM credential can write, and the start message names the digest; start_job reads the
object, checks its sha256 and applies it to the deployed spec's configurations. The run records
what it ran with (`RunRecord.overrides`), and such a run is no part of the job's health streak
(it did not run the job's own spec). The schedule and the deployed spec stay as they are.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from spotcron.core.spec import Argv, EnvMap, JobSpec

PREFIX = "overrides/"
MAX_BYTES = 64 << 10


class Overrides(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    env: EnvMap = Field({}, description="variables added to (or replacing) every configuration's env")
    args: Argv | None = Field(None, description="replaces every configuration's args")

    @property
    def empty(self) -> bool:
        return not self.env and self.args is None

    def canonical(self) -> bytes:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode()

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.canonical()).hexdigest()

    def applied(self, spec: JobSpec) -> JobSpec:
        """One resolved configuration (a `variants()` copy) with these overrides."""
        update: dict[str, Any] = {"env": {**spec.env, **self.env}}
        if self.args is not None:
            update["args"] = self.args
        return spec.model_copy(update=update)

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


def parse_env_pairs(pairs: tuple[str, ...]) -> dict[str, str]:
    """`K=V` words (from --env) → a mapping; ValueError naming the bad one."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--env {pair!r}: write NAME=VALUE, e.g. --env LOG_LEVEL=debug")
        env[name] = value
    return env
