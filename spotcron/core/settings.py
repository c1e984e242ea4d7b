"""Deployment settings: infra/stack.yaml, every value overridable by a SPOTCRON_* variable.

Loaded and validated like a job spec. Library code never reads os.environ itself: callers pass
the environment mapping in (the CLI and the functions pass os.environ).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from spotcron.core.durations import parse_duration
from spotcron.core.errors import ConfigError, Problem
from spotcron.core.names import REGION, ZONE


class Limits(BaseModel):
    """Stack-wide spend guards, enforced by the functions before every VM insert.

    They hold whatever a start message or a deployed spec asks for: a run that would cross one
    ends `failed` with the limit named in its reason, and no VM is created. The defaults fit the
    example jobs with room to spare; raise them in infra/stack.yaml for bigger workloads.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_live_vms: int = Field(10, ge=1, le=10000, description="job VMs alive at once, across all jobs")
    max_gpus: int = Field(4, ge=0, le=10000, description="GPUs attached to live job VMs at once")
    max_vm_hours_per_day: float = Field(
        48.0, gt=0, le=1_000_000,
        description="VM-hours per UTC day: each attempt reserves timeout + grace when it starts and is "
                    "charged what it really used when its run ends")


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    project: str = "my-project"
    region: str = "us-central1"
    zones: tuple[str, ...] = ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f")
    bucket: str = "my-project-spotcron"
    functions_service_account: str = "spotcron-functions"
    vm_service_account: str = "spotcron-vm"
    sweep_interval: int = 300
    start_topic: str = "spotcron-start"
    sweep_topic: str = "spotcron-sweep"
    events_topic: str = "spotcron-events"
    # per-job: one Cloud Scheduler entry per job (and one for the sweep). shared: one entry fires
    # every minute and the dispatch function starts the jobs due then (engine/dispatch.py).
    scheduling: Literal["per-job", "shared"] = "per-job"
    dispatch_topic: str = "spotcron-dispatch"
    # The one Artifact Registry repository (Docker, in `region`) deploy creates: the functions'
    # builds push there and job images are pulled from there; every registry role sits on it.
    repository: str = "spotcron"
    job_done_url: str = ""  # filled in by deploy once the function exists; local mode sets its own
    credentials_url: str = ""  # the credentials broker's URL, learned like job_done_url
    image_family: str = "projects/cos-cloud/global/images/family/cos-stable"
    grace: int = Field(300, description="seconds a VM may outlive its job's timeout (boot, pull, upload)")
    results_retention_days: int = Field(90, ge=1)
    limits: Limits = Limits()

    @field_validator("sweep_interval", "grace", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> int:
        return parse_duration(value)

    @field_validator("zones")
    @classmethod
    def _zones(cls, zones: tuple[str, ...]) -> tuple[str, ...]:
        for zone in zones:
            if not ZONE.match(zone):
                raise ValueError(f"{zone!r} is not a zone name like us-central1-a")
        if not zones:
            raise ValueError("at least one zone is needed")
        return zones

    @field_validator("region")
    @classmethod
    def _region(cls, region: str) -> str:
        if not REGION.match(region):
            raise ValueError(f"{region!r} is not a region name like us-central1")
        return region

    def account_email(self, account: str) -> str:
        return account if "@" in account else f"{account}@{self.project}.iam.gserviceaccount.com"

    @property
    def vm_service_account_email(self) -> str:
        return self.account_email(self.vm_service_account)

    @property
    def functions_service_account_email(self) -> str:
        return self.account_email(self.functions_service_account)


ENV_PREFIX = "SPOTCRON_"


def env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """SPOTCRON_PROJECT=x → {"project": "x"}; SPOTCRON_ZONES is comma-separated."""
    overrides: dict[str, Any] = {}
    for field in Settings.model_fields:
        value = environ.get(ENV_PREFIX + field.upper())
        if value is None or value == "":
            continue
        if field == "zones":
            overrides[field] = tuple(z.strip() for z in value.split(",") if z.strip())
        elif field == "limits":
            overrides[field] = _json_object(ENV_PREFIX + field.upper(), value)
        else:
            overrides[field] = value
    return overrides


def _json_object(variable: str, value: str) -> dict[str, Any]:
    import json

    try:
        parsed = json.loads(value)
    except ValueError as exc:
        raise ConfigError([Problem("<environment>", None, variable,
                                   f"is not JSON ({exc}); write e.g. {{\"max_live_vms\": 10}} (got {value!r})")]) from None
    if not isinstance(parsed, dict):
        raise ConfigError([Problem("<environment>", None, variable,
                                   f"must be a JSON object like {{\"max_live_vms\": 10}} (got {value!r})")])
    return parsed


def load_settings(path: Path | None, environ: Mapping[str, str], *, required: tuple[str, ...] = ()) -> Settings:
    """Settings from `path` (when it exists) with SPOTCRON_* overrides; ConfigError lists every problem.

    `required` names fields that must be given, not defaulted: a deployed function without
    SPOTCRON_PROJECT must stop, not act on a placeholder project."""
    raw: dict[str, Any] = {}
    name = str(path) if path else "<environment>"
    if path is not None and path.exists():
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            line = exc.problem_mark.line + 1 if getattr(exc, "problem_mark", None) else None
            raise ConfigError([Problem(name, line, "", f"not valid YAML: {exc}")]) from None
        if not isinstance(loaded, dict):
            raise ConfigError([Problem(name, 1, "", "must be a mapping of settings")])
        raw.update(loaded)
    raw.update(env_overrides(environ))
    missing = [Problem(name, None, field, f"not set: set {ENV_PREFIX}{field.upper()} (deploy sets it on every "
                                          f"function){' or ' + field + ' in ' + name if path else ''}")
               for field in required if not raw.get(field)]
    if missing:
        raise ConfigError(missing)
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        problems = [
            Problem(name, None, ".".join(str(p) for p in err["loc"]),
                    err["msg"].removeprefix("Value error, ") + f" (got {err.get('input')!r})")
            for err in exc.errors()
        ]
        raise ConfigError(problems) from None
