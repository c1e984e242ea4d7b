"""Drive the three functions through functions-framework on in-memory backends and a fake clock."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import functions_framework

from spotcron.core import layout
from spotcron.core.cron.schedule import load_time_zone, parse_schedule
from spotcron.core.runs import RunRecord, vm_name
from spotcron.core.settings import Settings
from spotcron.core.spec import JobSpec
from spotcron.engine.deployed import SpecStore, start_message
from spotcron.engine.deps import Deps
from spotcron.engine.dispatch_specs import write_deployed
from spotcron.engine.messages import TICK_ATTRIBUTE, format_tick
from spotcron.local.signer import instance_claims
from spotcron.runtime import entrypoints
from spotcron.testing.identity import ClockedIdentity
from spotcron.testing.memory import FakeClock, MemoryBlobs, MemoryCompute, MemoryEvents, MemoryMinter

SOURCE = str(Path(__file__).resolve().parents[2] / "functions" / "main.py")
JOB_DONE_URL = "https://us-central1-proj.cloudfunctions.net/job_done"
CREDENTIALS_URL = "https://us-central1-proj.cloudfunctions.net/credentials"
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")

_apps: dict[str, Any] = {}


def app(target: str):
    """One functions-framework app per target, shared across tests (loading them is slow)."""
    if target not in _apps:
        _apps[target] = functions_framework.create_app(target=target, source=SOURCE).test_client()
    return _apps[target]


def make_spec(**fields: Any) -> JobSpec:
    data = {"name": "bot", "schedule": "0 */4 * * *", "image": "us-docker.pkg.dev/p/r/bot:1",
            "machine": {"type": "e2-small"}, "timeout": "10m"}
    data.update(fields)
    return JobSpec.model_validate(data)


class Harness:
    def __init__(self, now: datetime | None = None, **settings: Any):
        self.clock = FakeClock(now or datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC))
        self.compute = MemoryCompute(self.clock)
        self.blobs = MemoryBlobs("proj-results", self.clock)
        self.events = MemoryEvents()
        self.identity = ClockedIdentity(self.clock)
        self.settings = Settings(project="proj", zones=ZONES, bucket="proj-results", job_done_url=JOB_DONE_URL,
                                 credentials_url=CREDENTIALS_URL, **settings)
        self.minter = MemoryMinter()
        self.deps = Deps(settings=self.settings, compute=self.compute, blobs=self.blobs, events=self.events,
                         identity=self.identity, clock=self.clock, user_data=lambda: "#cloud-config\n",
                         minter=self.minter)
        entrypoints.use(self.deps)
        self._delivered = 0

    # --- triggers ----------------------------------------------------------------------------
    def start(self, spec: JobSpec | dict | bytes, *, publish_time: datetime | None = None,
              attributes: dict[str, str] | None = None):
        if isinstance(spec, JobSpec):
            # What deploy does, then what its scheduler entry publishes: the job's name and digest.
            SpecStore(self.blobs).write(spec)
            raw = start_message(spec)
            if self.settings.scheduling == "shared" and not attributes:
                # The message the dispatcher published at the tick's minute, delivered now.
                attributes = {TICK_ATTRIBUTE: self.dispatched_tick(spec, publish_time or self.clock.now())}
        elif isinstance(spec, dict):
            raw = json.dumps(spec).encode()
        else:
            raw = spec
        published = (publish_time or self.clock.now()).astimezone(UTC).isoformat().replace("+00:00", "Z")
        data = {"message": {"data": base64.b64encode(raw).decode(), "attributes": attributes or {},
                            "messageId": uuid.uuid4().hex, "publishTime": published},
                "subscription": "projects/proj/subscriptions/start"}
        return self.post_event("start_job", data)

    @staticmethod
    def dispatched_tick(spec: JobSpec, at: datetime) -> str:
        tick = parse_schedule(spec.schedule).latest_at_or_before(at, load_time_zone(spec.time_zone))
        assert tick is not None
        return format_tick(tick)

    def deploy(self, *specs: JobSpec) -> None:
        """What deploy leaves in the bucket for the dispatcher."""
        write_deployed(self.blobs, specs)

    def dispatch(self, version: str | None = None):
        """The dispatch entry's message; with `version`, as deploy writes it (engine/dispatch_specs.py)."""
        body = json.dumps({"dispatch": True, **({"specs": version} if version else {})}).encode()
        return self.post_event("dispatch", {"message": {"data": base64.b64encode(body).decode(), "messageId": "d"}})

    def deliver_starts(self) -> list[tuple[str, str]]:
        """Post every start message published since the last call to start_job; (job, tick) of each."""
        messages = [p for p in self.events.published if p.topic == self.settings.start_topic]
        fresh, self._delivered = messages[self._delivered:], len(messages)
        for message in fresh:
            self.start(dict(message.data), attributes=message.attributes)  # {job, digest}, as published
        return [(m.data["job"], m.attributes.get(TICK_ATTRIBUTE, "")) for m in fresh]

    def post_event(self, target: str, data: Any):
        headers = {"ce-id": uuid.uuid4().hex, "ce-source": "//pubsub.googleapis.com/projects/proj/topics/t",
                   "ce-type": "google.cloud.pubsub.topic.v1.messagePublished", "ce-specversion": "1.0",
                   "ce-time": self.clock.now().isoformat().replace("+00:00", "Z")}
        return app(target).post("/", json=data, headers=headers)

    def sweep(self):
        return self.post_event("sweep", {"message": {"data": "", "messageId": "s"}})

    # --- the VM's side -----------------------------------------------------------------------
    def token(self, job: str, run_id: str, attempt: int = 1, *, zone: str | None = None, audience: str = JOB_DONE_URL,
              email: str | None = None, project: str = "proj", instance_name: str | None = None,
              lifetime_s: int = 3600, issuer: ClockedIdentity | None = None, instance_id: str | None = None) -> str:
        name = instance_name or vm_name(job, run_id, attempt)
        if zone is None:
            record = self.record(job, run_id)
            zone = next(a.zone for a in record.attempts if a.number == attempt)
        claims = instance_claims(service_account=email or self.settings.vm_service_account_email,
                                 project_id=project, project_number=123, zone=f"projects/123/zones/{zone}",
                                 instance_id=instance_id or self._instance_id(zone, name), instance_name=name,
                                 created_at=self.clock.now())
        return (issuer or self.identity).issue(audience, claims, lifetime_s=lifetime_s)

    def _instance_id(self, zone: str, name: str) -> str:
        """The id Compute Engine gave the VM (the metadata server puts it in the token); "42" if none."""
        instance = self.compute._instances.get((zone, name))  # not get_instance: tests count those calls
        return instance.instance_id if instance is not None else "42"

    def upload(self, job: str, run_id: str, attempt: int = 1, *, exit_code: int = 0, manifest: bool = True) -> None:
        """What the runner writes to the bucket before calling back."""
        self.blobs.write(layout.logs(job, run_id, attempt), b"hello from the container\n")
        self.blobs.write(layout.results_prefix(job, run_id, attempt) + "out.json", b'{"ok": true}')
        if manifest:
            self.blobs.write(layout.manifest(job, run_id, attempt),
                             json.dumps({"exit_code": exit_code, "files": []}).encode())

    def callback(self, job: str, run_id: str, attempt: int = 1, *, status: str = "exited", exit_code: int | None = 0,
                 uploaded: bool = True, timed_out: bool = False, token: str | None = None, body: Any = None,
                 headers: dict[str, str] | None = None):
        if body is None:
            body = {"job": job, "run_id": run_id, "attempt": attempt, "status": status, "exit_code": exit_code,
                    "timed_out": timed_out, "uploaded": uploaded,
                    "started_at": self.clock.now().isoformat(), "finished_at": self.clock.now().isoformat()}
        if headers is None:
            headers = {"Authorization": f"Bearer {token or self.token(job, run_id, attempt)}"}
        return app("job_done").post("/", json=body, headers=headers)

    def finish_ok(self, job: str, run_id: str, attempt: int = 1):
        self.upload(job, run_id, attempt)
        return self.callback(job, run_id, attempt)

    # --- looking ------------------------------------------------------------------------------
    def record(self, job: str, run_id: str) -> RunRecord:
        blob = self.blobs.read(layout.run_record(job, run_id))
        assert blob is not None, f"no record for {job}/{run_id}"
        return RunRecord.from_json(blob.data)

    def records(self, job: str) -> list[RunRecord]:
        return self.deps.store.records(job)

    def live_vms(self) -> list[str]:
        return sorted(i.name for i in self.compute.all_instances())
