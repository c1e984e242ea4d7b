"""Deployment settings: infra/stack.yaml, every value overridable by a SPOTCRON_* variable.

Loaded and validated like a job spec. Library code never reads os.environ itself: callers pass
the environment mapping in (the CLI and the functions pass os.environ).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from spotcron.core.durations import parse_duration
from spotcron.core.errors import ConfigError, Problem
from spotcron.core.names import REGION, ZONE
from spotcron.core.notify_spec import Notify

# Compute Engine resource names (RFC 1035): networks and subnetworks.
NETWORK_NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")


class Limits(BaseModel):
    """Stack-wide spend guards, enforced by the functions before every VM insert.

    They hold whatever a start message or a deployed spec asks for: a run that would cross one
    ends `failed` with the limit named in its reason, and no VM is created. The defaults fit the
    example jobs with room to spare; raise them in infra/stack.yaml for bigger workloads.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_live_vms: int = Field(20, ge=1, le=10000, description="job VMs alive at once, across all jobs")
    max_gpus: int = Field(4, ge=0, le=10000, description="GPUs attached to live job VMs at once")
    max_vm_hours_per_day: float = Field(
        48.0, gt=0, le=1_000_000,
        description="VM-hours per UTC day: each attempt's admission counts timeout + grace when it "
                    "starts and is settled to what it really used when its run ends")
    manual_share: float = Field(
        0.5, ge=0, le=1,
        description="the most of each limit that manual runs (`spotcron run --cloud`, any publisher of a manual "
                    "start) may hold together; the rest (rounded up) is kept for scheduled ticks. 1 lets manual "
                    "runs take everything, 0 stops them on Google Cloud")

    def manual_caps(self) -> tuple[int, int, float]:
        """(live VMs, GPUs, VM-hours per day) that manual runs may hold together: each limit less the
        share kept for scheduled ticks, rounded up in the ticks' favour."""
        keep = 1.0 - self.manual_share
        return (self.max_live_vms - math.ceil(keep * self.max_live_vms - 1e-9),
                self.max_gpus - math.ceil(keep * self.max_gpus - 1e-9),
                self.max_vm_hours_per_day * self.manual_share)


# Zones of the US regions (Google's regions-and-zones list): placement tries these in a region
# other than the stack's unless `placement.zones` names them.
KNOWN_ZONES: dict[str, tuple[str, ...]] = {
    "us-central1": ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"),
    "us-east1": ("us-east1-b", "us-east1-c", "us-east1-d"),
    "us-east4": ("us-east4-a", "us-east4-b", "us-east4-c"),
    "us-east5": ("us-east5-a", "us-east5-b", "us-east5-c"),
    "us-south1": ("us-south1-a", "us-south1-b", "us-south1-c"),
    "us-west1": ("us-west1-a", "us-west1-b", "us-west1-c"),
    "us-west2": ("us-west2-a", "us-west2-b", "us-west2-c"),
    "us-west3": ("us-west3-a", "us-west3-b", "us-west3-c"),
    "us-west4": ("us-west4-a", "us-west4-b", "us-west4-c"),
}


class PlacementSettings(BaseModel):
    """Where runs may go beyond the stack's region, and what placement assumes about each run.

    With no `regions` (the default) every run goes to the stack's zones in their fixed order, as
    before: placement is off.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    regions: tuple[str, ...] = Field((), description="regions a job may run in; empty: the stack's region only")
    zones: dict[str, tuple[str, ...]] = Field(
        default_factory=dict, description="zones per region, for a region not in the built-in list")
    max_advice_age: int = Field(3600, description="advice older than this is stale: runs use the fixed order")
    image_gb: float = Field(0.5, ge=0, description="compressed size of a job image, pulled by every VM")
    results_gb: float = Field(0.001, ge=0, description="what one run uploads to the bucket")

    @field_validator("max_advice_age", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> int:
        return parse_duration(value)

    @field_validator("regions")
    @classmethod
    def _regions(cls, regions: tuple[str, ...]) -> tuple[str, ...]:
        for region in regions:
            if not REGION.match(region):
                raise ValueError(f"{region!r} is not a region name like us-west4")
        return regions

    def zones_of(self, region: str) -> tuple[str, ...]:
        return self.zones.get(region) or KNOWN_ZONES.get(region, ())


NOTIFICATION_CHANNEL = re.compile(r"^projects/[^/\s]+/notificationChannels/[^/\s]+$")


class AlertSettings(BaseModel):
    """`alerts:`: Cloud Monitoring alert policies deploy creates on the run-end log entries."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    failed_runs: bool = Field(False, description="create the log-based alert policy spotcron-failed-runs")
    notification_channels: tuple[str, ...] = Field(
        (), description="where it notifies: projects/PROJECT/notificationChannels/ID (made in Cloud Monitoring)")
    rate_limit: int = Field(3600, description="at most one notification per this long (Cloud Monitoring needs one)")

    @field_validator("rate_limit", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> int:
        return parse_duration(value)

    @field_validator("notification_channels")
    @classmethod
    def _channels(cls, channels: tuple[str, ...]) -> tuple[str, ...]:
        for channel in channels:
            if not NOTIFICATION_CHANNEL.match(channel):
                raise ValueError(f"{channel!r} is not a notification channel name like "
                                 f"projects/my-project/notificationChannels/1234567890")
        return channels


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
    # The functions' Artifact Registry repository (Docker, in `region`) deploy creates; the job
    # images go to REPOSITORY-jobs (jobs that run as the VM account, which reads it) and to
    # REPOSITORY-jobs-HASH for each job's own account (which alone reads it): only the job
    # images' build account writes them (core/job_repositories.py).
    repository: str = "spotcron"
    # Versions of each image (package) the repository keeps; older ones are deleted once a month
    # old, by Artifact Registry's cleanup policies (deploy/desired.py).
    image_versions_kept: int = Field(10, ge=1)
    job_done_url: str = ""  # filled in by deploy once the function exists; local mode sets its own
    credentials_url: str = ""  # the credentials broker's URL, learned like job_done_url
    image_family: str = "projects/cos-cloud/global/images/family/cos-stable"
    # The VPC network job VMs join, in this project, and its subnet in each region they run in
    # (empty: the subnet named like the network, as an auto-mode network names its subnets).
    # An organisation that skips the default network names its own here.
    network: str = "default"
    subnetwork: str = ""
    grace: int = Field(300, description="seconds a VM may outlive its job's timeout (boot, pull, upload)")
    results_retention_days: int = Field(90, ge=1)
    limits: Limits = Limits()
    placement: PlacementSettings = PlacementSettings()
    # Every job's notifications unless its job file has a notify: of its own (core/notify_spec.py).
    notify: Notify | None = None
    alerts: AlertSettings = AlertSettings()

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

    @field_validator("network", "subnetwork")
    @classmethod
    def _network_name(cls, name: str, info: Any) -> str:
        if info.field_name == "subnetwork" and name == "":
            return name
        if not NETWORK_NAME.match(name):
            raise ValueError(f"{name!r} is not a {info.field_name} name (1-63 characters: lower-case letters, digits "
                             f"and '-', starting with a letter; the name only, not a path)")
        return name

    @field_validator("region")
    @classmethod
    def _region(cls, region: str) -> str:
        if not REGION.match(region):
            raise ValueError(f"{region!r} is not a region name like us-central1")
        return region

    @model_validator(mode="after")
    def _placement_zones_known(self) -> Settings:
        unknown = [r for r in self.placement.regions if r != self.region and not self.placement.zones_of(r)]
        if unknown:
            raise ValueError(f"placement.regions: no zones known for {', '.join(unknown)}; name them under "
                             f"placement.zones, e.g. {{{unknown[0]}: [{unknown[0]}-a, {unknown[0]}-b]}}")
        return self

    def placement_regions(self, job_regions: tuple[str, ...] | None = None) -> tuple[str, ...]:
        """The regions a job may run in, the stack's first; just the stack's when placement is off."""
        chosen = job_regions if job_regions is not None else self.placement.regions
        return (self.region, *(r for r in dict.fromkeys(chosen) if r != self.region))

    def zones_in(self, region: str) -> tuple[str, ...]:
        return self.zones if region == self.region else self.placement.zones_of(region)

    def account_email(self, account: str) -> str:
        return account if "@" in account else f"{account}@{self.project}.iam.gserviceaccount.com"

    @property
    def network_path(self) -> str:
        """The VMs' network as Compute Engine names it in an instance or firewall body."""
        return f"global/networks/{self.network}"

    def subnetwork_path(self, region: str) -> str:
        """The VMs' subnet in `region`, as an instance body names it."""
        return f"regions/{region}/subnetworks/{self.subnetwork or self.network}"

    @property
    def registry(self) -> str:
        """Where the images of jobs that run as the VM account are pushed: the stack's jobs
        repository, apart from the functions' images, REGION-docker.pkg.dev/PROJECT/REPOSITORY-jobs."""
        return self.registry_for(None)

    def registry_for(self, account: str | None) -> str:
        """Where the images of jobs that run as `account` go (None: the VM account): the one
        repository that account reads (core/job_repositories.py)."""
        from spotcron.core.job_repositories import jobs_repository, registry

        return registry(self.region, self.project, jobs_repository(self.repository, account))

    def built_registry_for(self, account: str | None) -> str:
        """Where deploy's builds push the images of jobs that run as `account` (None: the VM
        account): a repository that account reads and the job build account writes, apart from
        the one owners push prebuilt images to (core/job_repositories.py)."""
        from spotcron.core.job_repositories import built_repository, registry

        return registry(self.region, self.project, built_repository(self.repository, account))

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
        elif field in ("limits", "placement", "notify", "alerts"):
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
    text = ""
    if path is not None and path.exists():
        text = path.read_text()
        try:
            loaded = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            line = exc.problem_mark.line + 1 if getattr(exc, "problem_mark", None) else None
            raise ConfigError([Problem(name, line, "", f"not valid YAML: {exc}")]) from None
        if not isinstance(loaded, dict):
            raise ConfigError([Problem(name, 1, "", "must be a mapping of settings")])
        raw.update(loaded)
    overrides = env_overrides(environ)
    raw.update(overrides)
    missing = [Problem(name, None, field, f"not set: set {ENV_PREFIX}{field.upper()} (deploy sets it on every "
                                          f"function){' or ' + field + ' in ' + name if path else ''}")
               for field in required if not raw.get(field)]
    if missing:
        raise ConfigError(missing)
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        from spotcron.core.settings_problems import key_lines, settings_problems

        raise ConfigError(settings_problems(exc.errors(), name, key_lines(text),
                                            {f: ENV_PREFIX + f.upper() for f in overrides},
                                            Settings.model_fields)) from None
