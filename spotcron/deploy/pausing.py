"""`spotcron pause|resume JOB --cloud`: a job's pause applied to the deployed stack at once, no deploy.

What changes depends on the stack's scheduling (infra/stack.yaml):

- per-job: the job's Cloud Scheduler entry is paused or resumed, and the deployed spec (as
  deployed, not the job file) is written again with `paused` set, the entry's message naming its
  new digest. The two go together: start_job runs only the spec whose digest the message names,
  ignores a scheduled start of one that says paused (a resumed entry alone would start nothing),
  and `spotcron run JOB --cloud` names the digest of the job file, which says paused now.
- shared: there is no entry per job; the dispatcher reads `deployed/JOB.json` and skips a paused
  job. So the deployed spec, as deployed (not the job file: its other edits are not deployed by a
  pause), is written again with `paused` set, and the dispatch entry's message gets the set's new
  version: a warm dispatcher reads the specs again only when that version changes.

The caller edits the job file too, so the next `spotcron deploy` keeps the pause.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spotcron.core.errors import NotFound, SpotcronError
from spotcron.core.settings import Settings
from spotcron.core.spec import JobSpec
from spotcron.deploy import handlers
from spotcron.deploy.actual import scheduler_fields
from spotcron.deploy.desired import deployed_spec_resource, dispatch_data, dispatch_entry
from spotcron.deploy.naming import DISPATCH_ENTRY, Names, scheduler_entry
from spotcron.deploy.planner import UPDATE, Action
from spotcron.deploy.resources import DEPLOYED_SPEC, SCHEDULER_JOB, Resource
from spotcron.engine.deployed import SpecStore, digest, specs_version, start_message_of
from spotcron.engine.dispatch_specs import BucketSpecs
from spotcron.engine.ports import Blobs
from spotcron.gcp.admin.calls import Caller
from spotcron.gcp.admin.clients import Clients


class NotOnCloud(SpotcronError):
    """The job (or the stack, in the stack file's scheduling mode) is not deployed."""


@dataclass(frozen=True)
class CloudPause:
    job: str
    paused: bool
    changes: list[str] = field(default_factory=list)  # what was changed, one line each; empty: nothing

    @property
    def already(self) -> bool:
        return not self.changes


def set_cloud_paused(settings: Settings, job: str, paused: bool, clients: Clients, call: Caller) -> CloudPause:
    """Pause (or resume) the deployed `job` now; what changed. NotOnCloud when it is not deployed."""
    names = Names.of(settings)
    ctx = handlers.Context(clients, call, names, source_data=b"")
    if names.shared:
        from spotcron.gcp.storage import GcsBlobs

        return _shared(ctx, job, paused, GcsBlobs(names.bucket, client=clients.storage, timeout=clients.timeout))
    return _per_job(ctx, job, paused)


def _blobs(ctx: handlers.Context) -> Blobs:
    from spotcron.gcp.storage import GcsBlobs

    return GcsBlobs(ctx.names.bucket, client=ctx.clients.storage, timeout=ctx.clients.timeout)


def _read_entry(ctx: handlers.Context, entry: str) -> dict[str, Any] | None:
    try:
        found = ctx.call(f"read scheduler job {entry}", ctx.clients.scheduler.get_job,
                         name=ctx.names.scheduler_path(entry), retry=None, timeout=ctx.timeout)
    except NotFound:
        return None
    return scheduler_fields(found)


def _per_job(ctx: handlers.Context, job: str, paused: bool) -> CloudPause:
    entry = scheduler_entry(job)
    fields = _read_entry(ctx, entry)
    if fields is None:
        raise NotOnCloud(
            f"{job} is not deployed on Google Cloud: no scheduler entry {entry} in {ctx.names.location_path} "
            f"(the stack file says scheduling: per-job, where each job has its own entry), so there is nothing to "
            f"{'pause' if paused else 'resume'}; `spotcron deploy` deploys it, paused as its file says")
    deployed = ctx.call(f"read the deployed spec of {job} in gs://{ctx.names.bucket}",
                        SpecStore(_blobs(ctx)).read, job)
    if deployed is None:
        raise NotOnCloud(
            f"{job} has a scheduler entry {entry} but no deployed spec in gs://{ctx.names.bucket}/deployed/ "
            f"(or one that does not load), so start_job would refuse its every start; `spotcron deploy` "
            f"deploys it again")
    changes = []
    running, named = deployed.spec, deployed.digest  # the stored bytes' digest: what start_job compares
    if running.paused != paused:
        # Only `paused` changes: whatever else the job file says now is for the next deploy.
        running = JobSpec.from_payload({**running.to_payload(), "paused": paused})
        resource = deployed_spec_resource(running)
        handlers.deployed_spec(Action(UPDATE, DEPLOYED_SPEC, resource.name,
                                      {"digest": (deployed.digest, resource.fields["digest"])},
                                      resource=resource), ctx)
        named = resource.fields["digest"]
        changes.append(f"deployed spec gs://{ctx.names.bucket}/{resource.name}: paused: {str(paused).lower()}")
    # Not scheduler_data(running): a spec left as stored (written by hand, or by another spotcron) may
    # not be canonical() today, and a message naming another digest would have every start refused.
    data = start_message_of(job, named).decode()
    # Also when the spec already was as wanted: an earlier pause may have stopped before this step.
    if fields["data"] != data:
        # The message names the spec now deployed; the update pauses or resumes the entry too.
        handlers.scheduler_job(Action(UPDATE, SCHEDULER_JOB, entry, {"data": (fields["data"], data)},
                                      resource=Resource(SCHEDULER_JOB, entry, {**fields, "data": data,
                                                                               "paused": paused}),
                                      current=Resource(SCHEDULER_JOB, entry, fields)), ctx)
        changes.append(f"scheduler entry {ctx.names.scheduler_path(entry)}: its message names the deployed "
                       f"spec's digest {named[:12]}; {'paused' if paused else 'resumed'}")
        return CloudPause(job, paused, changes)
    if not handlers.set_entry_paused(ctx, entry, paused, fields["paused"]):
        return CloudPause(job, paused, changes)
    return CloudPause(job, paused, [*changes, f"scheduler entry {ctx.names.scheduler_path(entry)}: "
                                              f"{'paused' if paused else 'resumed'}"])


def _shared(ctx: handlers.Context, job: str, paused: bool, blobs: Blobs) -> CloudPause:
    entry = _read_entry(ctx, DISPATCH_ENTRY)
    if entry is None:
        raise NotOnCloud(
            f"the stack is not deployed with scheduling: shared (the stack file's mode): no scheduler entry "
            f"{DISPATCH_ENTRY} in {ctx.names.location_path}; `spotcron deploy` deploys it as the stack file says")
    # The set as the dispatcher reads it, so that the version below is the one it computes.
    specs = ctx.call(f"read the deployed specs in gs://{ctx.names.bucket}", BucketSpecs(blobs).current)
    by_name = {spec.name: spec for spec in specs}
    if job not in by_name:
        raise NotOnCloud(
            f"{job} is not deployed on Google Cloud: no deployed spec of it in gs://{ctx.names.bucket}/deployed/ "
            f"(or one that does not load), so the dispatcher does not run it and there is nothing to "
            f"{'pause' if paused else 'resume'}; `spotcron deploy` deploys it, paused as its file says")
    changes = []
    deployed = by_name[job]
    if deployed.paused != paused:
        # Only `paused` changes: whatever else the job file says now is for the next deploy.
        changed = JobSpec.from_payload({**deployed.to_payload(), "paused": paused})
        resource = deployed_spec_resource(changed)
        handlers.deployed_spec(Action(UPDATE, DEPLOYED_SPEC, resource.name,
                                      {"digest": (digest(deployed), resource.fields["digest"])},
                                      resource=resource), ctx)
        by_name[job] = changed
        changes.append(f"deployed spec gs://{ctx.names.bucket}/{resource.name}: paused: {str(paused).lower()}")
    specs = list(by_name.values())
    data = dispatch_data(specs)
    # Also when the spec already was as wanted: an earlier pause may have stopped before this step.
    if entry["data"] != data:
        # deploy's own update of the entry, its message only: a dispatch entry paused by hand stays so.
        wanted = dispatch_entry(ctx.names, specs)
        wanted = Resource(SCHEDULER_JOB, DISPATCH_ENTRY, {**wanted.fields, "paused": entry["paused"]})
        handlers.scheduler_job(Action(UPDATE, SCHEDULER_JOB, DISPATCH_ENTRY, {"data": (entry["data"], data)},
                                      resource=wanted, current=Resource(SCHEDULER_JOB, DISPATCH_ENTRY, entry)), ctx)
        changes.append(f"scheduler entry {ctx.names.scheduler_path(DISPATCH_ENTRY)}: its message names the "
                       f"deployed specs' version {specs_version(specs)[:12]}, so running dispatchers read them again")
    return CloudPause(job, paused, changes)
