"""The job spec: one YAML file in jobs/, parsed once into this validated, frozen model.

Nothing downstream of `spotcron.core.loader` sees raw dicts. The loader turns pydantic's errors
into file:line messages; the field validators here say what is wrong and what is allowed.
Checks that need outside knowledge (the cron grammar, the time zone database, the machine
catalog, the deployment's grace period) live in the loader, so a payload that was valid when it
was deployed still loads in the start function.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from spotcron.core import catalog
from spotcron.core import secret_refs as secret_names
from spotcron.core.account_sharing import made_account_problem
from spotcron.core.axes import expand_axes
from spotcron.core.durations import parse_duration
from spotcron.core.names import REGION, ZONE
from spotcron.core.notify_spec import Notify

JOB_NAME_MAX = 30  # "sc-" + job + "-" + run id (13) + "-" + entry (12) + "-a1" = 63, Compute Engine's limit
ENTRY_NAME_MAX = 12
_NAME = re.compile(r"^[a-z](?:[a-z0-9-]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A container image reference: [host[:port]/]path[:tag][@digest]; the path is lowercase.
_IMAGE = re.compile(
    r"^(?:(?:[a-zA-Z0-9-]+\.)*[a-zA-Z0-9-]+(?::[0-9]+)?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)
DESCRIPTION_MAX = 500  # Cloud Scheduler refuses a longer description on the job's entry
# Each matrix entry is its own VM per tick. A cap keeps one spec (or one edit of it) from asking
# for thousands of VMs at once; the stack's limits (infra/stack.yaml) then bound what runs.
MAX_MATRIX_ENTRIES = 32
MAX_RUN_SECONDS = 120 * 86400  # Compute Engine's longest scheduling.maxRunDuration
MIN_RUN_SECONDS = 30  # and its shortest
MAX_REPEAT = 20  # runs per configuration and tick: enough for a spread, bounded like the rest of a tick
# A user-managed service account: ACCOUNT_ID@PROJECT_ID.iam.gserviceaccount.com (ids: 6-30
# characters, lower-case letters, digits, '-'). Google's default accounts (PROJECT_NUMBER-compute@
# developer..., PROJECT@appspot...) hold Editor in most projects: a job must never run as one.
_ACCOUNT_ID = r"[a-z](?:[a-z0-9-]{4,28})[a-z0-9]"
SERVICE_ACCOUNT = re.compile(rf"^{_ACCOUNT_ID}@[a-z][a-z0-9.-]*[a-z0-9]\.iam\.gserviceaccount\.com$")
_DEFAULT_ACCOUNT = re.compile(r"^(\d+-compute@developer|[^@]+@appspot)\.gserviceaccount\.com$")

# Rules that span fields raise errors of their own pydantic type (errors()[i]["type"]), so the
# loader places each problem without reading its words, which stay free to change. A model-level
# error sits on the whole model: RULE_FIELDS names the field each such rule points at.
ENTRY_NAME_REUSED = "entry_name_reused"
IMAGE_MISSING = "image_missing"
DIRS_OVERLAP = "dirs_overlap"
HISTORY_BELOW_TICK = "history_below_tick"
ACCOUNT_RULE = "account_rule"  # a job names an account deploy makes for another job's secrets
SECRETS_RULE = "secrets_rule"  # env/secrets clash, a file in an uploaded directory: the loader places each
RULE_FIELDS: dict[str, str] = {IMAGE_MISSING: "image", DIRS_OVERLAP: "checkpoint", HISTORY_BELOW_TICK: "history_limit",
                               SECRETS_RULE: "secrets", ACCOUNT_RULE: "service_account"}


def service_account_problem(value: str) -> str | None:
    """Why `value` cannot be a job's service account, or None when it can."""
    if _DEFAULT_ACCOUNT.match(value):
        return (f"{value!r} is one of Google's default service accounts, which hold broad roles in most "
                f"projects; create an account for this job (gcloud iam service-accounts create NAME), grant it "
                f"only what the job needs, and write NAME@PROJECT.iam.gserviceaccount.com here")
    if not SERVICE_ACCOUNT.match(value):
        hint = (f"; write the full email, e.g. {value}@PROJECT.iam.gserviceaccount.com" if "@" not in value
                else "; write e.g. my-job@my-project.iam.gserviceaccount.com")
        return f"{value!r} is not a service account email (ACCOUNT_ID@PROJECT_ID.iam.gserviceaccount.com){hint}"
    return None


def name_problem(name: str, limit: int, what: str) -> str | None:
    """Why `name` cannot be a job or matrix entry name (it goes into VM names and labels)."""
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > limit:
        return (f"{name!r} is not a valid {what}: use lowercase letters, digits and hyphens, start with a "
                f"letter, end with a letter or digit, at most {limit} characters (it becomes part of "
                f"VM names and labels)")
    return None


def _argv(value: Any) -> Any:
    """A command is an argv list; a string is split like a shell would, but never run by one."""
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise ValueError(f"{value!r} cannot be split into words ({exc}); write it as a list") from None
    if isinstance(value, list | tuple):
        # YAML reads `--steps, 20` as a string and an int; both are words of the command line.
        return tuple(_scalar_text(item) for item in value)
    return value


def _scalar_text(value: Any) -> Any:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    return value


def _env_values(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _scalar_text(v) for k, v in value.items()}
    return value


def _env_name(name: str) -> str:
    if not _ENV_NAME.match(name):
        raise ValueError(f"{name!r} is not a valid environment variable name: use letters, digits and "
                         f"underscores, not starting with a digit (e.g. MY_SETTING)")
    return name


def _zone(zone: str) -> str:
    if REGION.match(zone):
        raise ValueError(f"{zone!r} is a region, not a zone; name zones in it, e.g. {zone}-a")
    if not ZONE.match(zone):
        raise ValueError(f"{zone!r} is not a zone name; write e.g. us-central1-a (region-letter)")
    return zone


Argv = Annotated[tuple[str, ...], BeforeValidator(_argv, json_schema_input_type=str | list[str | int | float])]
EnvName = Annotated[str, AfterValidator(_env_name)]
def _no_tokens(value: dict[str, str]) -> dict[str, str]:
    # env is plain text in the job file, the deployed spec and the VM's metadata. The message
    # names the key, never the value: it is the credential.
    for key, text in value.items():
        if secret_names.known_token(text):
            raise ValueError(f"{key}: the value looks like a credential (a well-known token prefix); env is plain "
                             f"text in the job file, the deployed spec and the VM's metadata; move it to secrets: "
                             f"({key}: SECRET_NAME) and {secret_names.SET_HINT.replace(' and write NAME here', '')}")
    return value


EnvMap = Annotated[dict[EnvName, str],
                   BeforeValidator(_env_values, json_schema_input_type=dict[str, str | int | float | bool]),
                   AfterValidator(_no_tokens)]
Zone = Annotated[str, AfterValidator(_zone)]


def _region(region: str) -> str:
    if not REGION.match(region):
        raise ValueError(f"{region!r} is not a region name; write e.g. us-west4")
    return region


Region = Annotated[str, AfterValidator(_region)]


def _image_ref(value: str) -> str:
    if not _IMAGE.match(value):
        raise ValueError(f"{value!r} is not a container image reference; write e.g. "
                         f"us-docker.pkg.dev/my-project/spotcron/bot:latest (lowercase path, no spaces)")
    return value


Image = Annotated[str, AfterValidator(_image_ref)]


def _build_context(value: str) -> str:
    parts = value.replace("\\", "/").split("/")
    if value.startswith("/") or ".." in parts or not value.strip():
        raise ValueError(f"{value!r} is not a folder inside the repository; write a path relative to the folder "
                         f"that holds jobs/, e.g. vm_images/bot")
    return value


def _build_shorthand(value: Any) -> Any:
    """`build: vm_images/bot` is short for `build: {context: vm_images/bot}`."""
    return {"context": value} if isinstance(value, str) else value
Duration = Annotated[int, BeforeValidator(parse_duration, json_schema_input_type=int | str), PlainSerializer(int)]


def built_image_name(name: str) -> str:
    """The image name of a job (or entry) that says build: and no image:."""
    return f"spotcron/{name}"


def _with_bundled_gpu(data: Any) -> Any:
    """Accelerator-optimized types (g2, a2, a3) always come with their GPUs: record them in `gpu`."""
    if isinstance(data, Mapping) and data.get("gpu") is None and isinstance(data.get("type"), str):
        machine = catalog.machine_type(data["type"])
        if machine is not None and machine.bundled_gpu:
            return {**data, "gpu": {"type": machine.gpu_type, "count": machine.gpu_count}}
    return data


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Gpu(_Model):
    type: str = Field(description="GPU model as Compute Engine names it, e.g. nvidia-tesla-t4 or nvidia-l4")
    count: int = Field(1, ge=1, le=16, description="how many GPUs; g2/a2/a3 machine types fix this number")


class Machine(_Model):
    type: str = Field("e2-small", description="Compute Engine machine type, e.g. e2-small, n1-standard-1, g2-standard-8")
    spot: bool = Field(True, description="run as a Spot VM (60-91% cheaper, may be preempted); false for on-demand")
    zones: tuple[Zone, ...] = Field(
        (), description="zones to try in order (stockout moves on to the next); empty: the stack's zones")
    disk_gb: int = Field(10, ge=10, le=2048, description="boot disk size in GB (deleted with the VM)")
    gpu: Gpu | None = Field(None, description="GPUs to attach (N1 types) or built in (g2/a2/a3: filled in for you)")

    @model_validator(mode="before")
    @classmethod
    def _bundled(cls, data: Any) -> Any:
        return _with_bundled_gpu(data)


class MachineOverride(_Model):
    """A matrix entry's changes to `machine`; unset fields keep the job's value."""

    type: str | None = Field(None, description="machine type for this entry")
    spot: bool | None = Field(None, description="Spot (true) or on-demand (false) for this entry")
    zones: tuple[Zone, ...] | None = Field(None, description="zones for this entry")
    disk_gb: int | None = Field(None, ge=10, le=2048, description="boot disk size in GB for this entry")
    gpu: Gpu | None = Field(None, description="GPUs for this entry")

    @model_validator(mode="before")
    @classmethod
    def _bundled(cls, data: Any) -> Any:
        return _with_bundled_gpu(data)


class Build(_Model):
    """Where the job's image is built from: a folder with a Dockerfile, relative to the folder that
    holds jobs/ (the repository root), like `local.command` runs from there."""

    context: Annotated[str, AfterValidator(_build_context)] = Field(
        description="the build context: a folder relative to the repository root, e.g. vm_images/bot")
    dockerfile: Annotated[str, AfterValidator(_build_context)] = Field(
        "Dockerfile", description="the Dockerfile, relative to the context folder")
    args: EnvMap = Field({}, description="build arguments (docker build --build-arg NAME=VALUE)")


BuildField = Annotated[Build, BeforeValidator(_build_shorthand, json_schema_input_type=str | Build)]


def _secret_name(value: str) -> str:
    problem = secret_names.credential_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _secret_version(value: Any) -> Any:
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not secret_names.VERSION.match(text):
        raise ValueError("is not a secret version; write a version number (1, 2, ...) or latest")
    return text


def _secret_file(value: str | None) -> str | None:
    problem = secret_names.file_problem(value, "", None) if value is not None else None
    if problem:
        raise ValueError(problem)
    return value


class SecretRef(_Model):
    """One secret a job reads: its name in Secret Manager, the version, how it is delivered."""

    secret: Annotated[str, AfterValidator(_secret_name)] = Field(
        description="the secret's id in the stack's project (e.g. bot-token) or its full name "
                    "projects/PROJECT/secrets/SECRET; never the value (spotcron secrets set stores that)")
    version: Annotated[str, BeforeValidator(_secret_version, json_schema_input_type=int | str)] = Field(
        "latest", description="a version number to pin, or latest (the newest enabled version, read at each run)")
    file: Annotated[str | None, AfterValidator(_secret_file)] = Field(
        None, description="deliver the value as a read-only file at this absolute container path (the "
                          "variable then holds the path) instead of as the variable's value")


SecretMap = Annotated[dict[EnvName, SecretRef],
                      BeforeValidator(lambda v: {k: secret_names.secret_text(x) for k, x in v.items()}
                                      if isinstance(v, Mapping) else v,
                                      json_schema_input_type=dict[str, str | SecretRef])]


class Retries(_Model):
    preemption: int = Field(3, ge=0, le=10, description="new attempts (in the next zone) after a Spot preemption")
    failure: int = Field(0, ge=0, le=5, description="new attempts after the container exits non-zero")


class LocalRun(_Model):
    command: Argv = Field(description="what `spotcron up` runs when no container runtime has the image, "
                                      "from the repository root, e.g. python3 vm_images/bot/bot.py --out "
                                      "{results}; {results} and {checkpoint} become the run's directories")
    build: bool = Field(True, description="false: `spotcron up` never builds the job's image here, even where "
                                          "podman or docker works, and runs the command instead (for images "
                                          "too large to build for a quick local run, such as PyTorch's)")

    @field_validator("command")
    @classmethod
    def _not_empty(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("is empty; write the command to run, e.g. python3 vm_images/bot/bot.py")
        return value


class MatrixEntry(_Model):
    name: str = Field(description=f"entry name: lowercase letters, digits, hyphens, at most {ENTRY_NAME_MAX} "
                                  f"characters, unique within the job")
    machine: MachineOverride = Field(MachineOverride(), description="changes to the job's machine")
    env: EnvMap = Field({}, description="variables added to (or replacing) the job's env")
    secrets: SecretMap = Field({}, description="secrets added to (or replacing) the job's secrets")
    args: Argv | None = Field(None, description="replaces the job's args for this entry")
    repeat: int | None = Field(None, ge=1, le=MAX_REPEAT, description="runs of this entry per tick, each on its "
                                                                     "own VM; default: the job's repeat")
    image: Image | None = Field(None, description="replaces the job's image for this entry, e.g. a CUDA image "
                                                  "for an entry with a GPU")
    build: BuildField | None = Field(None, description="builds this entry's image from a folder with a Dockerfile "
                                                       "(e.g. a CUDA build), instead of the job's")
    local: LocalRun | None = Field(None, description="replaces the job's local block for this entry")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        problem = name_problem(value, ENTRY_NAME_MAX, "matrix entry name")
        if problem:
            raise ValueError(problem)
        return value


class Benchmark(_Model):
    """How `spotcron report` and the results page compare a matrix job's configurations."""

    base: str | None = Field(None, description="the matrix entry the others are compared with (1.00x) by "
                                               "`spotcron report` and the results page; default: the first entry")
    time_metric: str | None = Field(None, description="a metrics.json metric in seconds taken as a run's time "
                                                      "instead of the container's wall time, e.g. train_seconds")
    compare: tuple[str, ...] = Field((), description="more metrics.json metrics in seconds, each compared on its "
                                                     "own (its ratio, interval, verdict and chart panel), e.g. "
                                                     "the tasks of a benchmark: [mlp_seconds, cnn_seconds]")
    overall: bool = Field(False, description="with compare: also one overall figure per configuration, the "
                                             "geometric mean of its per-metric ratios")

    @field_validator("compare")
    @classmethod
    def _compare(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("names a metric twice; name each once")
        if len(value) > 16:
            raise ValueError(f"names {len(value)} metrics; compare at most 16 (a panel each)")
        return value


Concurrency = Literal["allow", "forbid", "replace"]


MIN_TICKS_KEPT = 12  # ticks a matrix job keeps when its history_limit is left out


class JobSpec(_Model):
    name: str = Field(description="the job's name; always the file name without .yaml (optional in the file, "
                                  "and when present it must equal the file name)")
    schedule: str = Field(description="when to run: a 5-field cron expression as Cloud Scheduler reads it, "
                                      "e.g. '0 */4 * * *' (every 4 hours)")
    time_zone: str = Field("Etc/UTC", description="IANA time zone the schedule is read in, e.g. Europe/Berlin")
    description: str = Field("", description="free text shown in listings and on the scheduler entry")
    paused: bool = Field(False, description="true: deploy the schedule paused; no runs until resumed")
    image: Image | None = Field(None, description="container image to run, e.g. us-docker.pkg.dev/PROJECT/REPO/"
                                                  "IMAGE:TAG; with build: the image's name (left out: the job's)")
    build: BuildField | None = Field(None, description="build the image from a folder with a Dockerfile, e.g. "
                                                       "vm_images/bot: `spotcron build` and deploy build it with "
                                                       "Cloud Build and run it by digest; `spotcron up` builds it "
                                                       "with podman or docker when present")
    command: Argv | None = Field(None, description="replaces the image's entrypoint (string or list)")
    args: Argv = Field((), description="arguments passed to the entrypoint (string or list)")
    env: EnvMap = Field({}, description="environment variables for the container (plain text: no credentials)")
    secrets: SecretMap = Field({}, description="variables whose values come from Secret Manager at each run: "
                                               "NAME: SECRET, or NAME: {secret: SECRET, version: N, file: /path}")
    machine: Machine = Field(Machine(), description="the VM that runs the job")
    timeout: Duration = Field(600, description="kill the container after this long (90s, 10m, 2h, 1d); the VM "
                                               "deletes itself at timeout + the stack's grace")
    retries: Retries = Field(Retries(), description="how often to try again")
    on_demand_fallback: bool = Field(False, description="when every zone is out of Spot capacity, run on-demand")
    regions: tuple[Region, ...] | None = Field(
        None, description="regions this job may run in, cheapest expected cost first (placement); left out: "
                          "the stack's placement.regions; [] or a job with machine.zones: the stack's zones only")
    concurrency: Concurrency = Field("forbid", description="if the previous run is still going: forbid (skip "
                                                          "this one), allow (run both), replace (stop the old)")
    starting_deadline: Duration = Field(600, description="a trigger later than this after its scheduled time "
                                                         "is recorded as skipped (missed), not run")
    results: str = Field("/results", description="container directory uploaded to the bucket when the run ends")
    checkpoint: str | None = Field(None, description="container directory saved to the bucket and restored on "
                                                     "the next attempt after a preemption, e.g. /checkpoint")
    history_limit: int = Field(50, ge=1, le=10000, description="how many runs of this job to keep, in whole ticks "
                                                                "(left out: 50, or 12 ticks of a matrix job if more)")
    matrix: tuple[MatrixEntry, ...] = Field((), description="run once per entry on each tick (e.g. one per "
                                                            "machine type); entries override machine/env/args")
    local: LocalRun | None = Field(None, description="how `spotcron up` runs the job without a container runtime")
    benchmark: Benchmark = Field(Benchmark(), description="the base configuration and the time basis of "
                                                          "`spotcron report` and the results page's charts")
    external_ip: bool = Field(False, description="true: the VM gets an external IPv4 address (billed per hour) "
                                                 "and reaches the internet; left out, it reaches only Google's "
                                                 "APIs, Artifact Registry and Cloud Storage (Private Google Access)")
    internet: bool = Field(False, description="true: the job reaches the internet (not only Google's APIs): its VM "
                                              "gets an external IPv4 address (unless external_ip: false says a "
                                              "Cloud NAT provides it), and locally it gets a network; left out, "
                                              "locally it runs without one where the system allows")
    metadata_access: bool = Field(False, description="true: the container may reach the VM's metadata server, and "
                                                     "with it the VM's identity and tokens; by default it cannot")
    service_account: str | None = Field(
        None, description="the job's own service account (full email): its VM runs as this account, so the "
                          "container gets exactly the roles its owner granted it (and reaches the metadata "
                          "server for its tokens); left out, the VM runs as spotcron's VM account and the "
                          "container gets no credentials")
    notify: Notify | None = Field(None, description="where to send notifications and on what (failure, "
                                                    "recovered, missed, success, preempted, slow); left out: "
                                                    "the stack's notify: in infra/stack.yaml, if any")
    repeat: int = Field(1, ge=1, le=MAX_REPEAT, description="runs per tick of the job (of each matrix entry), "
                                                             "each on its own VM with its own record, logs and "
                                                             "results: repeats measure the spread between machines")
    # Set only on the resolved copies that `variants()` returns; never written in a job file.
    variant: str | None = None
    repeat_index: int | None = None  # 1..repeat when the configuration runs more than once per tick
    # Set by deploy only: service_account is the account it made for the job's secrets, whose
    # container gets no metadata access (it asked for none).
    deploy_account: bool = False

    @model_validator(mode="before")
    @classmethod
    def _axes(cls, data: Any) -> Any:
        # `axes:` is a matrix written as its cross product (core/axes.py): the spec holds the entries.
        return expand_axes(data)

    @field_validator("name")
    @classmethod
    def _job_name(cls, value: str) -> str:
        problem = name_problem(value, JOB_NAME_MAX, "job name")
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("description")
    @classmethod
    def _description(cls, value: str) -> str:
        if len(value) > DESCRIPTION_MAX:
            raise ValueError(f"is {len(value)} characters long; the job's Cloud Scheduler entry takes at most "
                             f"{DESCRIPTION_MAX}: shorten it")
        return value

    @field_validator("service_account")
    @classmethod
    def _service_account(cls, value: str | None) -> str | None:
        problem = service_account_problem(value) if value is not None else None
        if problem:
            raise ValueError(problem)
        return value

    @property
    def reaches_metadata(self) -> bool:
        """Whether the container may reach the VM's metadata server: asked for, or implied by a job
        account (its tokens come from there; the account is the job's own, not spotcron's)."""
        return self.metadata_access or (self.service_account is not None and not self.deploy_account)

    @field_validator("command")
    @classmethod
    def _command(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and not value:
            raise ValueError("is empty; leave command out to use the image's entrypoint")
        return value

    @field_validator("timeout")
    @classmethod
    def _timeout(cls, value: int) -> int:
        # The VM's maxRunDuration is timeout + grace; the loader checks that sum against 30s..120d.
        if not 1 <= value <= MAX_RUN_SECONDS:
            raise ValueError(f"{value}s is outside 1s..120d; Compute Engine deletes a VM after at most "
                             f"120 days (maxRunDuration)")
        return value

    @field_validator("starting_deadline")
    @classmethod
    def _starting_deadline(cls, value: int) -> int:
        if not 30 <= value <= 86400:
            raise ValueError(f"{value}s is outside 30s..1d; shorter would skip runs whose trigger was merely "
                             f"slow (delivery and a cold start take seconds), longer would start a day-old run")
        return value

    @field_validator("results", "checkpoint")
    @classmethod
    def _absolute_path(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith("/") or value.rstrip("/") == ""):
            raise ValueError(f"{value!r} is not an absolute container directory; write e.g. /results")
        return value

    @field_validator("matrix")
    @classmethod
    def _unique_entries(cls, entries: tuple[MatrixEntry, ...]) -> tuple[MatrixEntry, ...]:
        if len(entries) > MAX_MATRIX_ENTRIES:
            raise ValueError(f"has {len(entries)} entries; a job may have at most {MAX_MATRIX_ENTRIES} (each entry "
                             f"is a VM on every tick): split the job into several jobs")
        seen: set[str] = set()
        for entry in entries:
            if entry.name in seen:
                raise PydanticCustomError(ENTRY_NAME_REUSED, f"matrix entry name {entry.name!r} is used twice; "
                                                             f"names must be unique within the job")
            seen.add(entry.name)
        return entries

    @model_validator(mode="after")
    def _image_or_build(self) -> JobSpec:
        if self.image is None:
            if self.build is None:
                raise PydanticCustomError(IMAGE_MISSING, "the job names no image: write image: (an image to run, "
                                                         "e.g. us-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG) or build: "
                                                         "(a folder with a Dockerfile, e.g. vm_images/bot)")
            # A name for the image until it is built; what runs is the built, pinned reference.
            object.__setattr__(self, "image", built_image_name(self.name))
        return self

    @model_validator(mode="after")
    def _internet_needs_an_address(self) -> JobSpec:
        # What gives the VM the internet: its own external IPv4 address, unless the file says otherwise.
        if self.internet and "external_ip" not in self.model_fields_set:
            object.__setattr__(self, "external_ip", True)
        return self

    @property
    def has_egress(self) -> bool:
        """Whether the job's VM reaches the internet (an external IPv4 address, or a NAT it says it has)."""
        return self.internet or self.external_ip

    @model_validator(mode="after")
    def _secrets_apart(self) -> JobSpec:
        # The loader reports each of these at its line (loader._check_secrets); this keeps a
        # payload that bypassed the loader from deploying one.
        for spec in self.configurations():
            clash = sorted(set(spec.env) & set(spec.secrets))
            if clash:
                raise PydanticCustomError(SECRETS_RULE, f"{clash[0]!r} is set in both env and secrets")
            for ref in spec.secrets.values():
                if ref.file and secret_names.file_problem(ref.file, spec.results, spec.checkpoint):
                    raise PydanticCustomError(SECRETS_RULE, f"secret file {ref.file!r} is in an uploaded directory")
        if self.all_secrets() and self.metadata_access and self.service_account is None:
            raise PydanticCustomError(SECRETS_RULE, "a job with secrets and metadata_access needs its own "
                                                    "service_account")
        return self

    @model_validator(mode="after")
    def _own_account(self) -> JobSpec:
        problem = made_account_problem(self.service_account) if self.service_account and not self.deploy_account \
            else None
        if problem:
            raise PydanticCustomError(ACCOUNT_RULE, problem)
        return self

    def all_secrets(self) -> dict[str, SecretRef]:
        """Every secret the job or any matrix entry names, by `VARIABLE@entry` (the job's: by VARIABLE)."""
        found = dict(self.secrets)
        for entry in self.matrix:
            found.update({f"{name}@{entry.name}": ref for name, ref in entry.secrets.items()})
        return found

    def secret_names(self, project: str) -> list[str]:
        """The full names of the secrets the job reads, sorted, each once."""
        return sorted({secret_names.resource(ref.secret, project) for ref in self.all_secrets().values()})

    @model_validator(mode="after")
    def _distinct_dirs(self) -> JobSpec:
        if self.checkpoint is not None:
            a, b = self.results.rstrip("/") + "/", self.checkpoint.rstrip("/") + "/"
            if a.startswith(b) or b.startswith(a):
                raise PydanticCustomError(DIRS_OVERLAP, f"checkpoint {self.checkpoint!r} and results "
                                                        f"{self.results!r} overlap; use separate directories such "
                                                        f"as /checkpoint and /results")
        return self

    @model_validator(mode="after")
    def _history_of_twelve_ticks(self) -> JobSpec:
        # The report's regression rule compares a tick with the 12 before it: a matrix job that
        # leaves history_limit out keeps at least that many ticks, not 50 runs (5 ticks of 9 entries).
        if "history_limit" not in self.model_fields_set and (self.matrix or self.repeat > 1):
            object.__setattr__(self, "history_limit", max(50, MIN_TICKS_KEPT * len(self.variants())))
        return self

    @model_validator(mode="after")
    def _history_holds_a_tick(self) -> JobSpec:
        # Each tick makes one run per matrix entry and repeat, and each run's end prunes history to
        # the limit: a limit below that count deletes fresh results the moment another run ends.
        runs = len(self.variants()) if self.matrix or self.repeat > 1 else 1
        if self.history_limit < runs:
            what = f"{len(self.matrix)} matrix entries" if self.matrix else f"repeat {self.repeat}"
            if self.matrix and runs != len(self.matrix):
                what += " with their repeats"
            raise PydanticCustomError(HISTORY_BELOW_TICK, f"history_limit {self.history_limit} is below the job's "
                                                          f"{what}: every tick makes {runs} runs, so fresh results "
                                                          f"would be pruned as soon as they land; set history_limit "
                                                          f"to at least {runs} (e.g. {runs * 10} to keep ten ticks)")
        return self

    @property
    def benchmark_base(self) -> str | None:
        """The configuration others are compared with: `benchmark.base`, else the first matrix entry.

        The resolved copies that `variants()` returns carry it in `benchmark.base`, so every run
        record names the same base and the report and the page never disagree about it.
        """
        if self.benchmark.base is not None:
            return self.benchmark.base
        return self.matrix[0].name if self.matrix else None

    @property
    def key(self) -> str:
        """The job name plus the matrix entry, as it appears in run ids and tables."""
        return f"{self.name}/{self.variant}" if self.variant else self.name

    @property
    def run_suffix(self) -> str | None:
        """What a run id adds to the tick for this copy: `t4`, `t4-r2`, `r2` or nothing."""
        repeat = f"r{self.repeat_index}" if self.repeat_index is not None else None
        parts = [part for part in (self.variant, repeat) if part]
        return "-".join(parts) or None

    def variants(self) -> list[JobSpec]:
        """One resolved spec per run of a tick: the matrix entries (or the job itself), each
        `repeat` times.

        Repeats are separate runs on separate VMs, so each has its own record, logs and results,
        and their spread includes the differences between machines (host, CPU platform,
        neighbours), which is what a benchmark on cloud VMs must measure.
        """
        return [copy for configuration in self.configurations() for copy in configuration.repeats()]

    def configurations(self) -> list[JobSpec]:
        """One resolved spec per configuration (matrix entry), without its repeats."""
        if not self.matrix:
            return [self]
        resolved = []
        for entry in self.matrix:
            overrides = entry.machine.model_dump(exclude_none=True)
            if entry.machine.gpu is not None:
                overrides["gpu"] = entry.machine.gpu
            machine = self.machine.model_copy(update=overrides)
            update: dict[str, Any] = {
                "machine": machine,
                "env": {**self.env, **entry.env},
                "secrets": {**self.secrets, **entry.secrets},
                "matrix": (),
                "variant": entry.name,
                "benchmark": self.benchmark.model_copy(update={"base": self.benchmark_base}),
            }
            if entry.args is not None:
                update["args"] = entry.args
            if entry.repeat is not None:
                update["repeat"] = entry.repeat
            if entry.image is not None:
                update["image"] = entry.image
            if entry.build is not None:
                update["build"] = entry.build
                if entry.image is None:  # its own build: its own name, not the job's image
                    update["image"] = built_image_name(f"{self.name}-{entry.name}")
            if entry.local is not None:
                update["local"] = entry.local
            resolved.append(self.model_copy(update=update))
        return resolved

    def repeats(self) -> list[JobSpec]:
        if self.repeat == 1 or self.repeat_index is not None:
            return [self]
        return [self.model_copy(update={"repeat_index": index}) for index in range(1, self.repeat + 1)]

    def image_warnings(self) -> list[str]:
        """Entries that ask for a GPU but run the image of entries without one.

        A CPU image on a GPU VM usually runs its CPU code path and pays for an idle GPU; each
        entry may name its own image (a CUDA build for the GPU entries).
        """
        configurations = self.configurations() if self.matrix else []
        cpu_images = {c.image: c.variant for c in configurations if c.machine.gpu is None}
        warnings = []
        for configuration in configurations:
            gpu = configuration.machine.gpu
            if gpu is not None and configuration.image in cpu_images:
                warnings.append(
                    f"matrix entry {configuration.variant!r} asks for {gpu.type} x{gpu.count} but runs "
                    f"{configuration.image!r}, the image of the CPU entry {cpu_images[configuration.image]!r}: "
                    f"a CPU build would leave the GPU idle; give the entry its own image (image: a CUDA build)")
        if self.notify is not None:
            warnings.extend(f"notify.{field}: {text}" for field, text in self.notify.warnings())
        return warnings

    def env_warnings(self) -> list[str]:
        """`env` keys (of the job and its entries) whose names say they hold a credential."""
        pairs = [*self.env.items(), *(item for entry in self.matrix for item in entry.env.items())]
        keys = dict.fromkeys([key for key, _ in pairs])
        # A value's shape counts as much as its key's name; the warning names the key, never the value.
        keys.update(dict.fromkeys(key for key, value in pairs if secret_names.token_like(value)))
        return [f"env {key!r} looks like a credential: env is plain text in the job file, the deployed spec and "
                f"the VM's metadata; move it to secrets: ({key}: SECRET_NAME) and store the value with "
                f"`spotcron secrets set SECRET_NAME`" for key in dict.fromkeys(
                    [*secret_names.credential_env_keys(keys),
                     *(key for key, value in pairs if secret_names.token_like(value))])]

    def variant_named(self, name: str | None) -> JobSpec:
        for spec in self.configurations():
            if spec.variant == name:
                return spec
        raise KeyError(f"job {self.name!r} has no matrix entry {name!r}")

    def to_payload(self) -> dict[str, Any]:
        """The JSON that Cloud Scheduler publishes to the start topic for this job."""
        payload = self.model_dump(mode="json")
        # Absent rather than null: the digests of specs deployed before these fields existed stay valid.
        for holder, key in [(payload, "service_account"), (payload, "build"), (payload, "secrets"),
                            (payload, "deploy_account"), (payload, "internet"),
                            *((entry, key) for entry in payload.get("matrix") or () for key in ("build", "secrets"))]:
            if not holder.get(key):
                holder.pop(key, None)
        for holder in (payload, *(payload.get("matrix") or ())):
            for ref in (holder.get("secrets") or {}).values():
                if ref.get("file") is None:
                    ref.pop("file", None)
        # Left out when unset, for the same reason: a spec that does not compare metrics keeps its digest.
        benchmark = payload.get("benchmark") or {}
        if not benchmark.get("compare"):
            benchmark.pop("compare", None)
        if not benchmark.get("overall"):
            benchmark.pop("overall", None)
        return payload

    @classmethod
    def from_payload(cls, data: Mapping[str, Any]) -> JobSpec:
        return cls.model_validate(data)


def job_file_schema() -> dict[str, Any]:
    """JSON Schema of a job file, for editors (`# yaml-language-server: $schema=./schema.json`).

    The model's own schema, minus what a file never says (`variant`; `name` comes from the file
    name), plus the patterns and choices the validators enforce, so editors flag them early.
    """
    schema = JobSpec.model_json_schema(mode="validation")
    defs = schema["$defs"]
    props = schema["properties"]
    del props["variant"], props["repeat_index"], props["deploy_account"]
    schema["required"] = [name for name in schema["required"] if name != "name"]
    schema["anyOf"] = [{"required": ["image"]}, {"required": ["build"]}]  # one of them names what runs
    props["name"].update(pattern=_NAME.pattern, maxLength=JOB_NAME_MAX)
    defs["MatrixEntry"]["properties"]["name"].update(pattern=_NAME.pattern, maxLength=ENTRY_NAME_MAX)
    defs["MatrixEntry"]["properties"]["image"]["anyOf"][0]["pattern"] = _IMAGE.pattern
    props["matrix"]["maxItems"] = MAX_MATRIX_ENTRIES
    props["axes"] = {"type": "array", "minItems": 1, "maxItems": 4,
                     "description": "the matrix as a cross product: a list of axes, each a mapping of labels to "
                                    "matrix-entry fields; entries are named by their labels joined with '-' "
                                    "(instead of matrix)",
                     "items": {"type": "object", "additionalProperties": {"type": "object"}}}
    duration = {"type": "string", "pattern": r"^\s*\d+\s*[smhd]?\s*$"}
    for key in ("timeout", "starting_deadline"):
        props[key]["anyOf"] = [{"type": "integer", "minimum": 0}, duration]
    for env in (props["env"], defs["MatrixEntry"]["properties"]["env"], props["secrets"],
                defs["MatrixEntry"]["properties"]["secrets"]):
        env["propertyNames"] = {"pattern": _ENV_NAME.pattern}
    secret = defs["SecretRef"]["properties"]
    secret["secret"]["pattern"] = rf"{secret_names.SECRET_ID.pattern}|{secret_names.FULL_NAME.pattern}"
    secret["version"]["anyOf"] = [{"type": "integer", "minimum": 1}, {"type": "string", "pattern": secret_names.VERSION.pattern}]
    secret["file"]["anyOf"][0]["pattern"] = r"^/"
    for holder in (props["secrets"], defs["MatrixEntry"]["properties"]["secrets"]):
        holder["additionalProperties"] = {"anyOf": [{"type": "string", "pattern": secret["secret"]["pattern"]},
                                                    {"$ref": "#/$defs/SecretRef"}]}
    machine_types = sorted(catalog.MACHINE_TYPES)
    gpu_types = sorted(name for name, gpu in catalog.GPU_TYPES.items() if not gpu.retired)
    defs["Machine"]["properties"]["type"]["enum"] = machine_types
    defs["Machine"]["properties"]["zones"]["items"]["pattern"] = ZONE.pattern
    override = defs["MachineOverride"]["properties"]
    override["type"]["anyOf"][0]["enum"] = machine_types
    override["zones"]["anyOf"][0]["items"]["pattern"] = ZONE.pattern
    defs["Gpu"]["properties"]["type"]["enum"] = gpu_types
    props["image"]["anyOf"][0]["pattern"] = _IMAGE.pattern
    props["service_account"]["anyOf"][0]["pattern"] = SERVICE_ACCOUNT.pattern
    props["regions"]["anyOf"][0]["items"]["pattern"] = REGION.pattern
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "spotcron job",
        "description": "One scheduled job: jobs/NAME.yaml. Generated by `spotcron schema`; see docs/jobs.md.",
        **{k: v for k, v in schema.items() if k != "title"},
    }
