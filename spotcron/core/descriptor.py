"""The `spotcron-run` instance metadata value: the whole contract between the engine and the VM.

The engine writes it when it creates a VM; vm_images/runner/runner.sh reads it from the
metadata server and needs nothing else to run the job, upload its output and call back.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

METADATA_KEY = "spotcron-run"
VERSION = 1


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
    bucket: str
    prefix: str  # runs/JOB/RUN/ : the runner writes under PREFIX/attempt-N/ and PREFIX/checkpoint/
    job_done_url: str
    deadline: datetime  # the container is killed at this instant (UTC)
    timeout_s: int
    gpu: GpuSpec | None = None
    local_command: list[str] | None = None  # what runs when no container runtime has the image

    def to_metadata(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_metadata(cls, value: str) -> RunDescriptor:
        return cls.model_validate_json(value)
