"""The one front door to the three functions on in-memory backends, for tests, the simulation and the bench.

`Functions` posts to start_job, job_done and sweep exactly as Pub/Sub and a VM would: through
functions-framework test clients built from functions/main.py, so the wiring, the CloudEvent
parsing and the HTTP answers are the deployed ones. `Harness` adds a world to call them in: a
fake clock, `MemoryCompute`, `MemoryBlobs` and `MemoryEvents` (each with fault hooks), a local
token issuer standing in for Google's, and the VM's side (uploads, callbacks with the VM's own
instance identity token). Nothing here ships to the functions.

    h = Harness()
    h.start(make_spec())                      # a scheduled tick, as Cloud Scheduler publishes it
    h.finish_ok("bot", "20261122-1200")       # the runner uploads, then calls job_done
    h.sweep()
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from spotcron.core import layout
from spotcron.core.cron.schedule import load_time_zone, parse_schedule
from spotcron.core.errors import SpotcronError
from spotcron.core.runs import RunRecord, vm_name
from spotcron.core.settings import Settings
from spotcron.core.spec import JobSpec
from spotcron.engine.deployed import SpecStore, digest, start_message, write_deployed
from spotcron.engine.deps import Deps
from spotcron.engine.messages import TICK_ATTRIBUTE, format_tick
from spotcron.engine.tick_trust import ON_TIME
from spotcron.local.signer import instance_claims
from spotcron.runtime import assets, entrypoints
from spotcron.testing.memory import FakeClock, MemoryBlobs, MemoryCompute, MemoryEvents, MemoryMinter
from spotcron.testing.token_issuer import ClockedIdentity

JOB_DONE_URL = "https://us-central1-proj.cloudfunctions.net/job_done"
CREDENTIALS_URL = "https://us-central1-proj.cloudfunctions.net/credentials"
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
TARGETS = ("start_job", "job_done", "sweep", "dispatch", "credentials")

_apps: dict[str, Any] = {}


def app(target: str):
    """One functions-framework test client per target and process (building one takes a while)."""
    if target not in _apps:
        import functions_framework

        source = assets.functions_dir() / "main.py"
        _apps[target] = functions_framework.create_app(target=target, source=str(source)).test_client()
    return _apps[target]


def iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def make_spec(**fields: Any) -> JobSpec:
    data = {"name": "bot", "schedule": "0 */4 * * *", "image": "us-docker.pkg.dev/p/r/bot:1",
            "machine": {"type": "e2-small"}, "timeout": "10m"}
    data.update(fields)
    return JobSpec.model_validate(data)


def start_envelope(raw: bytes, published: datetime, attributes: Mapping[str, str] | None = None,
                   message_id: str | None = None) -> dict[str, Any]:
    """A Pub/Sub push envelope as start_job receives it. A redelivery keeps the message id."""
    return {"message": {"data": base64.b64encode(raw).decode(), "attributes": dict(attributes or {}),
                        "messageId": message_id or uuid.uuid4().hex, "publishTime": iso(published)},
            "subscription": "projects/proj/subscriptions/start"}


class Functions:
    """start_job, job_done and sweep as their callers reach them. Answers are HTTP responses."""

    def __init__(self, clock):
        self.clock = clock

    def post(self, target: str, **kwargs: Any):
        return app(target).post("/", **kwargs)

    def event(self, target: str, data: Any):
        headers = {"ce-id": uuid.uuid4().hex, "ce-source": "//pubsub.googleapis.com/projects/proj/topics/t",
                   "ce-type": "google.cloud.pubsub.topic.v1.messagePublished", "ce-specversion": "1.0",
                   "ce-time": iso(self.clock.now())}
        return self.post(target, json=data, headers=headers)

    def start(self, raw: bytes, published: datetime, attributes: Mapping[str, str] | None = None,
              message_id: str | None = None):
        return self.event("start_job", start_envelope(raw, published, attributes, message_id))

    def sweep(self):
        return self.event("sweep", {"message": {"data": "", "messageId": "sweep"}})

    def dispatch(self, version: str | None = None):
        """The dispatch entry's message; with `version`, as deploy writes it (engine/dispatch_specs.py)."""
        body = json.dumps({"dispatch": True, **({"specs": version} if version else {})}).encode()
        return self.event("dispatch", {"message": {"data": base64.b64encode(body).decode(), "messageId": "d"}})

    def job_done(self, token: str | None, body: Any, headers: Mapping[str, str] | None = None):
        if headers is None:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
        return self.post("job_done", data=json.dumps(body), content_type="application/json", headers=dict(headers))


class Harness:
    """The functions on in-memory backends, a fake clock, and the VM's side of the conversation."""

    def __init__(self, now: datetime | None = None, **settings: Any):
        self.clock = FakeClock(now or datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC))
        self.compute = MemoryCompute(self.clock)
        self.blobs = MemoryBlobs("proj-results", self.clock)
        self.events = MemoryEvents(self.clock)
        self.identity = ClockedIdentity(self.clock, shared_key=True)
        self.settings = Settings(project="proj", zones=ZONES, bucket="proj-results", job_done_url=JOB_DONE_URL,
                                 credentials_url=CREDENTIALS_URL, **settings)
        self.minter = MemoryMinter()
        self.deps = Deps(settings=self.settings, compute=self.compute, blobs=self.blobs, events=self.events,
                         identity=self.identity, clock=self.clock, user_data=lambda: "#cloud-config\n",
                         minter=self.minter)
        self.functions = Functions(self.clock)
        entrypoints.use(self.deps)
        self._delivered = 0

    def close(self) -> None:
        entrypoints.use(None)

    # --- triggers ----------------------------------------------------------------------------
    def start(self, spec: JobSpec | dict | bytes, *, publish_time: datetime | None = None,
              attributes: dict[str, str] | None = None, message_id: str | None = None):
        if isinstance(spec, JobSpec):
            # What deploy does, then what its scheduler entry publishes: the job's name and digest.
            self._deploy_before_its_tick(spec, publish_time or self.clock.now())
            raw = start_message(spec)
            if self.settings.scheduling == "shared" and not attributes:
                # The message the dispatcher published at the tick's minute, delivered now.
                tick = self.dispatched_tick(spec, publish_time or self.clock.now())
                attributes = {TICK_ATTRIBUTE: tick}
                at = datetime.fromisoformat(tick.replace("Z", "+00:00"))
                if publish_time is None and self.clock.now() - at > ON_TIME:
                    publish_time = at  # published in its minute, its delivery late
        elif isinstance(spec, dict):
            raw = json.dumps(spec).encode()
        else:
            raw = spec
        return self.functions.start(raw, publish_time or self.clock.now(), attributes, message_id)

    def run_now(self, spec: JobSpec, *, nonce: str | None = "ab12", publish_time: datetime | None = None,
                message_id: str | None = None):
        """A manual run, as `spotcron run --cloud` publishes it."""
        attributes = {"trigger": "manual"} | ({"nonce": nonce} if nonce is not None else {})
        return self.start(spec, publish_time=publish_time, attributes=attributes, message_id=message_id)

    def _deploy_before_its_tick(self, spec: JobSpec, at: datetime) -> None:
        """Deploy `spec` unless it is deployed as is, dated no later than the tick a start
        published `at` stands for: a job is deployed before its schedule fires it, and start_job
        trusts no tick from before the deploy (engine/tick_trust.py). A test of deploy timing
        writes the spec itself (SpecStore.write) at the time it means."""
        store = SpecStore(self.blobs)
        current = store.read(spec.name)
        if current is not None and current.digest == digest(spec):
            return
        now = self.clock.now()
        try:
            tick = parse_schedule(spec.schedule).latest_at_or_before(at, load_time_zone(spec.time_zone))
        except SpotcronError:
            tick = None  # a schedule start_job cannot read: it refuses the start whenever deployed
        self.clock.set(min(now, tick or now))
        try:
            store.write(spec)
        finally:
            self.clock.set(now)

    @staticmethod
    def dispatched_tick(spec: JobSpec, at: datetime) -> str:
        tick = parse_schedule(spec.schedule).latest_at_or_before(at, load_time_zone(spec.time_zone))
        assert tick is not None
        return format_tick(tick)

    def deploy(self, *specs: JobSpec) -> None:
        """What deploy leaves in the bucket for the dispatcher."""
        write_deployed(self.blobs, specs)

    def dispatch(self, version: str | None = None):
        return self.functions.dispatch(version)

    def deliver_starts(self) -> list[tuple[str, str]]:
        """Post every start message published since the last call to start_job; (job, tick) of each."""
        messages = [p for p in self.events.published if p.topic == self.settings.start_topic]
        fresh, self._delivered = messages[self._delivered:], len(messages)
        for message in fresh:
            # {job, digest}, as published, and when Pub/Sub received it
            self.start(dict(message.data), attributes=message.attributes, publish_time=message.publish_time)
        return [(m.data["job"], m.attributes.get(TICK_ATTRIBUTE, "")) for m in fresh]

    def post_event(self, target: str, data: Any):
        return self.functions.event(target, data)

    def sweep(self):
        return self.functions.sweep()

    # --- the VM's side -----------------------------------------------------------------------
    def token(self, job: str, run_id: str, attempt: int = 1, *, zone: str | None = None, audience: str = JOB_DONE_URL,
              email: str | None = None, project: str = "proj", instance_name: str | None = None,
              instance_id: str | None = None, lifetime_s: int = 3600, issuer: ClockedIdentity | None = None) -> str:
        """The instance identity token the attempt's VM would get from its metadata server."""
        name = instance_name or vm_name(job, run_id, attempt)
        if zone is None:
            zone = next(a.zone for a in self.record(job, run_id, count=False).attempts if a.number == attempt)
        if instance_id is None:
            # A VM's token carries its own id; a VM already gone keeps the id the attempt recorded.
            live = self.compute.peek(zone, name)
            stored = self.blobs.peek(layout.run_record(job, run_id))
            recorded = None
            if stored is not None:
                record = RunRecord.from_json(stored.data)
                recorded = next((a.instance_id for a in record.attempts if a.number == attempt), None)
            instance_id = live.instance_id if live is not None else recorded or "42"
        claims = instance_claims(service_account=email or self.settings.vm_service_account_email,
                                 project_id=project, project_number=123, zone=f"projects/123/zones/{zone}",
                                 instance_id=instance_id, instance_name=name, created_at=self.clock.now())
        return (issuer or self.identity).issue(audience, claims, lifetime_s=lifetime_s)

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
        return self.functions.job_done(None, body, headers)

    def finish_ok(self, job: str, run_id: str, attempt: int = 1):
        self.upload(job, run_id, attempt)
        return self.callback(job, run_id, attempt)

    # --- looking ------------------------------------------------------------------------------
    def record(self, job: str, run_id: str, *, count: bool = True) -> RunRecord:
        name = layout.run_record(job, run_id)
        blob = self.blobs.read(name) if count else self.blobs.peek(name)
        assert blob is not None, f"no record for {job}/{run_id}"
        return RunRecord.from_json(blob.data)

    def records(self, job: str) -> list[RunRecord]:
        return self.deps.store.records(job)

    def live_vms(self) -> list[str]:
        return sorted(i.name for i in self.compute.all_instances())
