"""The `spotcron-run` instance metadata value: the whole contract between the engine and the VM.

The engine writes it when it creates a VM; vm_images/runner/ reads it from the metadata server
and needs nothing else to run the job, upload its output and call back.

The runner is bash on Container-Optimized OS, which has no JSON parser, so the value is flat:
one `key=value` line per field. Scalars are validated here to hold no line break or NUL, so a
line is a field. Lists (command, args, local_command) and env (as `KEY=VALUE` items) are the
base64 of their items, each followed by a NUL byte, which the runner reads with `mapfile -d ''`:
every item reaches docker as one argv element or one environment variable, never through a shell.

`secrets` names Secret Manager versions only (`VARIABLE<TAB>projects/P/secrets/S/versions/V<TAB>FILE`
items); their values never pass through the metadata server: the runner reads them itself.
"""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

METADATA_KEY = "spotcron-run"
VERSION = 2

_LISTS = ("command", "args", "local_command")
_SCALARS = ("version", "job", "run_id", "attempt", "image", "results_path", "checkpoint_path",
            "checkpoint_object", "bucket", "prefix", "job_done_url", "credentials_url", "deadline", "timeout_s",
            "metadata_access", "egress")
_ENV_KEY = re.compile(r"[^=\x00]+")
_SECRET_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SECRET_VERSION = re.compile(r"projects/[a-z0-9-]{1,30}/secrets/[A-Za-z0-9_-]{1,255}/versions/(latest|[1-9][0-9]{0,9})")
_SECRET_FILE = re.compile(r"/[^\t\n\r\x00]{1,4095}")


class SecretItem(BaseModel):
    """One secret the runner reads at boot: where it goes (a variable, or a file whose path the
    variable holds) and which version of which secret."""

    model_config = ConfigDict(frozen=True)
    name: str
    version: str  # projects/P/secrets/S/versions/V
    file: str | None = None

    @model_validator(mode="after")
    def _shape(self) -> SecretItem:
        if not _SECRET_VAR.fullmatch(self.name) or not _SECRET_VERSION.fullmatch(self.version) or \
                (self.file is not None and not _SECRET_FILE.fullmatch(self.file)):
            raise ValueError(f"secret {self.name!r}: a variable name, projects/P/secrets/S/versions/V and an "
                             f"absolute file path without tabs or line breaks are needed")
        return self


class GpuSpec(BaseModel):
    model_config = ConfigDict(frozen=True)
    type: str
    count: int


class RunDescriptor(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    version: int = VERSION
    job: str
    run_id: str
    attempt: int
    image: str
    command: list[str] | None = None  # overrides the image's entrypoint when set
    args: list[str] = []
    env: dict[str, str] = {}
    results_path: str = "/results"
    checkpoint_path: str | None = None
    # The one object holding the checkpoint archive; by default PREFIX/checkpoint/checkpoint.tar.
    checkpoint_object: str
    bucket: str
    prefix: str  # runs/JOB/RUN/ : the runner writes under PREFIX/attempt-N/
    job_done_url: str
    # The broker that hands the runner its storage token; empty: the VM's own token.
    credentials_url: str = ""
    deadline: datetime  # the container is killed at this instant (UTC)
    timeout_s: int
    gpu: GpuSpec | None = None
    local_command: list[str] | None = None  # what runs when no container runtime has the image
    metadata_access: bool = False  # the container may reach the metadata server (and the VM's identity)
    secrets: list[SecretItem] = []
    # Whether the job's VM reaches the internet; local mode takes the network from a job without it.
    egress: bool = True
    # A run of a comparison (a matrix entry or one of several repeats): local mode runs the job's
    # compared runs one at a time, each with the whole host (spotcron/local/turns.py).
    compared: bool = False

    @model_validator(mode="before")
    @classmethod
    def _checkpoint_object(cls, data: object) -> object:
        if isinstance(data, dict) and not data.get("checkpoint_object") and isinstance(data.get("prefix"), str):
            data = {**data, "checkpoint_object": f"{data['prefix'].rstrip('/')}/checkpoint/checkpoint.tar"}
        return data

    @field_validator("job", "run_id", "image", "results_path", "checkpoint_path", "checkpoint_object", "bucket",
                     "prefix", "job_done_url", "credentials_url")
    @classmethod
    def _one_line(cls, value: str | None) -> str | None:
        if value is not None and any(c in value for c in "\r\n\x00"):
            raise ValueError(f"{value!r} holds a line break or NUL; a descriptor field is one line")
        return value

    @field_validator("command", "args", "local_command")
    @classmethod
    def _no_nul(cls, value: list[str] | None) -> list[str] | None:
        for item in value or ():
            if "\x00" in item:
                raise ValueError(f"{item!r} holds a NUL byte, which no argv element can carry")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        for key, item in value.items():
            if not _ENV_KEY.fullmatch(key) or "\x00" in item:
                raise ValueError(f"env {key!r}: a name without '=' or NUL and a value without NUL are needed")
        return value

    def to_metadata(self) -> str:
        values = {
            "version": str(self.version), "job": self.job, "run_id": self.run_id, "attempt": str(self.attempt),
            "image": self.image, "results_path": self.results_path, "checkpoint_path": self.checkpoint_path or "",
            "checkpoint_object": self.checkpoint_object, "bucket": self.bucket, "prefix": self.prefix,
            "job_done_url": self.job_done_url, "credentials_url": self.credentials_url,
            "deadline": self.deadline.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "timeout_s": str(self.timeout_s), "metadata_access": "true" if self.metadata_access else "false",
            "egress": "true" if self.egress else "false",
        }
        lines = [f"{key}={value}" for key, value in values.items()]
        if self.compared:  # only when set: the descriptors of other runs keep their exact shape
            lines.append("compared=true")
        if self.gpu is not None:
            lines += [f"gpu_type={self.gpu.type}", f"gpu_count={self.gpu.count}"]
        for key in _LISTS:
            items = getattr(self, key)
            if items is not None:
                lines.append(f"{key}={_pack(items)}")
        lines.append(f"env={_pack([f'{k}={v}' for k, v in self.env.items()])}")
        if self.secrets:
            items = ["\t".join((s.name, s.version, s.file or "")) for s in self.secrets]
            lines.append(f"secrets={_pack(items)}")
        return "\n".join(lines) + "\n"

    @classmethod
    def from_metadata(cls, value: str) -> RunDescriptor:
        raw: dict[str, str] = {}
        for number, line in enumerate(value.splitlines(), 1):
            key, sep, item = line.partition("=")
            if not sep:
                raise ValueError(f"{METADATA_KEY} line {number}: {line[:40]!r} is not key=value")
            raw[key] = item
        fields: dict[str, object] = {k: v for k, v in raw.items() if k in _SCALARS}
        fields["checkpoint_path"] = raw.get("checkpoint_path") or None
        fields["metadata_access"] = raw.get("metadata_access") == "true"
        fields["egress"] = raw.get("egress", "true") != "false"
        fields["compared"] = raw.get("compared") == "true"
        if "gpu_type" in raw:
            fields["gpu"] = GpuSpec(type=raw["gpu_type"], count=int(raw.get("gpu_count", "1")))
        for key in _LISTS:
            if key in raw:
                fields[key] = _unpack(raw[key])
        fields["env"] = dict(item.split("=", 1) for item in _unpack(raw.get("env", "")))
        fields["secrets"] = [SecretItem(name=name, version=version, file=path or None)
                             for name, version, path in (item.split("\t", 2) for item in _unpack(raw.get("secrets", "")))]
        return cls.model_validate(fields)


def _pack(items: list[str]) -> str:
    return base64.b64encode(b"".join(item.encode("utf-8", "surrogateescape") + b"\0" for item in items)).decode()


def _unpack(text: str) -> list[str]:
    data = base64.b64decode(text)
    return [item.decode("utf-8", "surrogateescape") for item in data.split(b"\0")[:-1]]
