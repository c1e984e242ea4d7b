"""How one Action becomes Google API calls, per resource type.

Every handler is idempotent: a create that meets "already exists" (an earlier, interrupted
deploy, or a retry after a lost answer) turns into an update of the existing resource; a
delete that meets "not found" is done. That is what lets an interrupted apply converge when
deploy runs again.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spotcron.core.errors import AlreadyExists, NotFound, PreconditionFailed
from spotcron.core.layout import DEPLOYED, deployed_digest, deployed_since
from spotcron.core.spec import JobSpec
from spotcron.deploy.desired import CLEANUP_PREFIX, cleanup_body
from spotcron.deploy.naming import Names
from spotcron.deploy.planner import CREATE, DELETE, Action
from spotcron.deploy.policies import update_policy
from spotcron.deploy.repository_owners import description, recorded_account
from spotcron.deploy.resources import (
    ACCOUNT_KEY,
    ALERT_POLICY,
    API,
    BUCKET,
    DEPLOYED_SPEC,
    DIGEST_KEY,
    FIREWALL,
    FUNCTION,
    IAM_POLICY,
    REPOSITORY,
    RETIRED_ACCOUNT,
    SCHEDULER_JOB,
    SERVICE_ACCOUNT,
    SOURCE,
    SUBNETWORK,
    TOPIC,
    managed_lifecycle_rule,
)
from spotcron.engine.deployed import since_body, timing
from spotcron.gcp.admin import request_messages
from spotcron.gcp.admin.calls import AccessDenied, Caller, DeployError
from spotcron.gcp.admin.clients import Clients
from spotcron.gcp.admin.settling import Settling
from spotcron.gcp.error_map import kept_by_policy

FUNCTION_MASK = {
    "entry_point": "build_config.entry_point",
    "runtime": "build_config.runtime",
    "source": "build_config.source",
    "build_account": "build_config.service_account",
    "docker_repository": "build_config.docker_repository",
    "service_account": "service_config.service_account_email",
    "environment": "service_config.environment_variables",
    "ingress": "service_config.ingress_settings",
    "memory": "service_config.available_memory",
    "timeout": "service_config.timeout_seconds",
    "max_instances": "service_config.max_instance_count",
    "trigger": "event_trigger",
    "labels": "labels",
}
SCHEDULER_MASK = {"description": "description", "schedule": "schedule", "time_zone": "time_zone",
                  "topic": "pubsub_target", "data": "pubsub_target", "retry": "retry_config"}


@dataclass
class Context:
    clients: Clients
    call: Caller
    names: Names
    source_data: bytes  # the archive the source action uploads
    operation_timeout: float = 1200.0  # a function build takes minutes
    poll_initial: float = 2.0  # seconds before the first look at a long-running operation
    poll_maximum: float = 15.0
    # Waits out Google's propagation delays around each action (gcp/admin/settling.py).
    settling: Settling = field(default_factory=Settling)

    @property
    def timeout(self) -> float:
        return self.clients.timeout


def _wait(ctx: Context, what: str, operation: Any) -> None:
    request_messages.wait_operation(ctx.call, what, operation, initial=ctx.poll_initial, maximum=ctx.poll_maximum,
                            timeout=ctx.operation_timeout, poll_timeout=ctx.timeout)


def _ignore_missing(fn: Callable[[], Any]) -> None:
    with contextlib.suppress(NotFound):  # already gone: the delete is done
        fn()


# --- bucket -------------------------------------------------------------------------------------

def _configure_bucket(bucket: Any, fields: Mapping[str, Any], whole: bool = False) -> None:
    """`whole`: the bucket is deploy's alone (the build logs'): every lifecycle rule is replaced."""
    bucket.iam_configuration.uniform_bucket_level_access_enabled = fields["uniform_access"]
    bucket.iam_configuration.public_access_prevention = fields["public_access_prevention"]
    bucket.labels = {**dict(bucket.labels or {}), **fields["labels"]}
    if "versioning" in fields:
        bucket.versioning_enabled = fields["versioning"]
    ours = [request_messages.lifecycle_delete(age, prefixes) for _, age, prefixes in fields["lifecycle"]]
    others = [dict(rule) for rule in bucket.lifecycle_rules if not managed_lifecycle_rule(dict(rule), whole)]
    bucket.lifecycle_rules = others + ours
    if "soft_delete_s" in fields:  # the build logs' bucket (deploy/desired.py)
        _configure_logs_bucket(bucket, fields)


def _configure_logs_bucket(bucket: Any, fields: Mapping[str, Any]) -> None:
    """Put back what a build's Storage Admin may change to keep, hold or divert the logs; only
    what differs is sent (a locked retention policy is refused before: deploy/actual.py)."""
    if bucket.soft_delete_policy.retention_duration_seconds != fields["soft_delete_s"]:
        bucket.soft_delete_policy.retention_duration_seconds = fields["soft_delete_s"]
    if bucket.retention_period != fields["retention_s"]:
        bucket.retention_period = fields["retention_s"]
    if bool(bucket.default_event_based_hold) != fields["event_based_hold"]:
        bucket.default_event_based_hold = fields["event_based_hold"]
    if (bucket.default_kms_key_name or None) != fields["kms_key"]:
        bucket.default_kms_key_name = fields["kms_key"]
    if (bucket.get_logging() or {}).get("logBucket") and fields["usage_logs"] is None:
        bucket.disable_logging()
    if bool(bucket.requester_pays) != fields["requester_pays"]:
        bucket.requester_pays = fields["requester_pays"]


def _kept_reason(message: str) -> str:
    lowered = message.lower()
    if "event-based hold" in lowered:
        return "under an event-based hold"
    if "hold" in lowered:
        return "under a temporary hold"
    return "under a retention policy or object retention"


def _kept_objects_message(bucket: str, kept: list[str]) -> str:
    """Which objects Cloud Storage would not delete, and how to let it: the bucket stays until then."""
    shown = "\n".join(f"    {line}" for line in kept[:20])
    more = f"\n    ... and {len(kept) - 20} more" if len(kept) > 20 else ""
    return (f"bucket {bucket} is kept: every other object is deleted, but Cloud Storage refuses to delete "
            f"{len(kept)} held or retained object(s):\n{shown}{more}\nRelease each hold (gcloud storage objects "
            f"update gs://{bucket}/OBJECT --no-temporary-hold --no-event-based-hold), or wait out the retention "
            f"period, then run `spotcron destroy --delete-results` again.")


def bucket(action: Action, ctx: Context) -> None:
    storage, name, fields = ctx.clients.storage, action.name, action.resource.fields
    if action.kind == DELETE:  # destroy --delete-results only: the objects first, then the bucket
        def empty_and_delete() -> None:
            objects = ctx.call(f"list gs://{name}", lambda: list(storage.list_blobs(name, retry=None,
                                                                                       timeout=ctx.timeout)))
            kept: list[str] = []
            for blob in objects:
                try:
                    _ignore_missing(lambda b=blob: ctx.call(f"delete gs://{name}/{b.name}", b.delete, retry=None,
                                                            timeout=ctx.timeout))
                except AccessDenied as exc:
                    if not kept_by_policy(str(exc)):
                        raise
                    kept.append(f"gs://{name}/{blob.name}: {_kept_reason(str(exc))}")
            if kept:
                raise DeployError(_kept_objects_message(name, kept))
            ctx.call(f"delete bucket {name}", storage.bucket(name).delete, retry=None, timeout=ctx.timeout)
        _ignore_missing(empty_and_delete)
        return
    if action.kind == CREATE:
        new = storage.bucket(name)
        _configure_bucket(new, fields, name == ctx.names.build_logs_bucket)
        try:
            ctx.call(f"create bucket {name}", storage.create_bucket, new, location=fields["location"],
                     retry=None, timeout=ctx.timeout)
            return
        except AlreadyExists:
            pass  # created by an interrupted deploy: bring it in line below
    existing = ctx.call(f"read bucket {name}", storage.get_bucket, name, retry=None, timeout=ctx.timeout)
    _configure_bucket(existing, fields, name == ctx.names.build_logs_bucket)
    ctx.call(f"update bucket {name}", existing.patch, retry=None, timeout=ctx.timeout)


# --- topics, accounts, IAM, source --------------------------------------------------------------

def topic(action: Action, ctx: Context) -> None:
    publisher, path = ctx.clients.publisher, ctx.names.topic_path(action.name)
    if action.kind == DELETE:
        _ignore_missing(lambda: ctx.call(f"delete topic {action.name}", publisher.delete_topic,
                                         topic=path, retry=None, timeout=ctx.timeout))
        return
    labels = dict(action.resource.fields["labels"])
    if action.kind == CREATE:
        try:
            ctx.call(f"create topic {action.name}", publisher.create_topic,
                     request={"name": path, "labels": labels}, retry=None, timeout=ctx.timeout)
            return
        except AlreadyExists:
            pass
    current = ctx.call(f"read topic {action.name}", publisher.get_topic, topic=path, retry=None, timeout=ctx.timeout)
    merged = {**dict(current.labels), **labels}
    ctx.call(f"update topic {action.name}", publisher.update_topic,
             request={"topic": {"name": path, "labels": merged}, "update_mask": {"paths": ["labels"]}},
             retry=None, timeout=ctx.timeout)


def service_account(action: Action, ctx: Context) -> None:
    email = action.name
    if action.kind == DELETE:  # destroy only; deploy never deletes an account (resources.NEVER_DELETED)
        path = f"projects/{ctx.names.project}/serviceAccounts/{email}"
        _ignore_missing(lambda: ctx.call(f"delete service account {email}", ctx.clients.iam.delete_service_account,
                                         request={"name": path}, retry=None, timeout=ctx.timeout))
        return
    request = {"name": f"projects/{ctx.names.project}", "account_id": email.split("@", 1)[0],
               "service_account": {"display_name": action.resource.fields["display_name"]}}
    with contextlib.suppress(AlreadyExists):  # created by an interrupted deploy
        ctx.call(f"create service account {email}", ctx.clients.iam.create_service_account,
                 request=request, retry=None, timeout=ctx.timeout)


def _wait_rest(ctx: Context, what: str, operation: dict[str, Any], poll: Callable[[str], dict[str, Any]]) -> None:
    """Poll a REST long-running operation until done; its error becomes a DeployError."""
    import time

    delay, waited = ctx.poll_initial, 0.0
    while not operation.get("done"):
        if waited >= ctx.operation_timeout:
            raise DeployError(f"{what}: still not done after {int(waited)}s (operation {operation.get('name')})")
        time.sleep(delay)
        waited += delay
        delay = min(delay * 2, ctx.poll_maximum)
        operation = ctx.call(f"{what} (waiting)", poll, operation["name"])
    if operation.get("error"):
        raise DeployError(f"{what}: {operation['error'].get('message', operation['error'])}")


def repository(action: Action, ctx: Context) -> None:
    """The Artifact Registry repository; deploy and destroy never delete it (it holds the job images)."""
    registry, names = ctx.clients.registry, ctx.names
    path = f"{names.location_path}/repositories/{action.name}"
    fields = action.resource.fields
    if action.kind == CREATE:
        account = action.resource.meta.get("account")
        body = {"format": fields["format"], "labels": dict(fields["labels"]),
                "description": description(action.name, account, functions=action.name == names.repository),
                "cleanupPolicies": cleanup_body(fields["cleanup"]), "cleanupPolicyDryRun": fields["cleanup_dry_run"]}
        try:
            operation = ctx.call(f"create repository {action.name}", registry.create_repository,
                                 names.location_path, action.name, body)
            _wait_rest(ctx, f"create repository {action.name}", operation, registry.get_operation)
            return
        except AlreadyExists:
            pass  # created by an interrupted deploy (or by hand): bring its labels in line
    current = ctx.call(f"read repository {action.name}", registry.get_repository, path)
    labels = {**dict(current.get("labels") or {}), **fields["labels"]}
    # Policies someone added by hand stay; deploy's own are replaced by what the stack file says.
    policies = {ident: policy for ident, policy in dict(current.get("cleanupPolicies") or {}).items()
                if not ident.startswith(CLEANUP_PREFIX)}
    body = {"labels": labels, "cleanupPolicies": {**policies, **cleanup_body(fields["cleanup"])},
            "cleanupPolicyDryRun": fields["cleanup_dry_run"]}
    mask = "labels,cleanupPolicies,cleanupPolicyDryRun"
    account = action.resource.meta.get("account")
    if account and recorded_account(current.get("description")) is None:
        # Made before deploy recorded owners (or by hand): it records its account from now on.
        body["description"], mask = description(action.name, account), f"{mask},description"
    ctx.call(f"update repository {action.name}", registry.patch_repository, path, body, mask)


def firewall_body(name: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The Firewall resource (REST JSON) for one of desired.py's rules."""
    return {
        "name": name,
        "description": fields["description"],
        "network": fields["network"],
        "direction": fields["direction"],
        "priority": fields["priority"],
        "denied": [{"IPProtocol": protocol} for protocol in fields["denied"]],
        "sourceRanges": list(fields["source_ranges"]),
        "targetTags": list(fields["target_tags"]),
    }


def _wait_compute(ctx: Context, what: str, operation: dict[str, Any]) -> None:
    """Poll a Compute Engine operation until DONE, under its own scope.

    A regional operation is readable only under the region it names (a placement region's subnet
    answers one of that region, not the stack's):
    https://cloud.google.com/compute/docs/reference/rest/v1/regionOperations/get
    """
    import time

    network, delay, waited = ctx.clients.network, ctx.poll_initial, 0.0
    region = str(operation.get("region") or "").rstrip("/").rsplit("/", 1)[-1]
    scope = f"regions/{region}" if region else "global"
    while operation.get("status") != "DONE":
        if waited >= ctx.operation_timeout:
            raise DeployError(f"{what}: still not done after {int(waited)}s (operation {operation.get('name')})")
        time.sleep(delay)
        waited += delay
        delay = min(delay * 2, ctx.poll_maximum)
        operation = ctx.call(f"{what} (waiting)", network.get,
                             f"projects/{ctx.names.project}/{scope}/operations/{operation['name']}")
    errors = (operation.get("error") or {}).get("errors") or []
    if errors:
        raise DeployError(f"{what}: {errors[0].get('message', errors[0])}")


def firewall(action: Action, ctx: Context) -> None:
    """The deny-ingress rule on the job VMs' tag; created, patched to match, deleted by destroy."""
    network, project, name = ctx.clients.network, ctx.names.project, action.name
    what = f"{action.kind} firewall rule {name}"
    if action.kind == DELETE:
        def delete() -> None:
            _wait_compute(ctx, what, ctx.call(what, network.delete_firewall, project, name))

        _ignore_missing(delete)
        return
    body = firewall_body(name, action.resource.fields)
    if action.kind == CREATE:
        try:
            _wait_compute(ctx, what, ctx.call(what, network.insert_firewall, project, body))
            return
        except AlreadyExists:
            pass  # left by an interrupted deploy: bring it in line
    _wait_compute(ctx, what, ctx.call(what, network.patch_firewall, project, name, body))


def subnetwork(action: Action, ctx: Context) -> None:
    """Private Google Access on: VMs without an external address reach Google's APIs."""
    what = f"turn on Private Google Access on {action.name}"
    operation = ctx.call(what, ctx.clients.network.set_private_google_access, action.name, True)
    _wait_compute(ctx, what, operation)


def iam_policy(action: Action, ctx: Context) -> None:
    known = action.resource.meta.get("conditions") if action.resource is not None else None
    update_policy(ctx.clients, ctx.call, ctx.names, action.name, action.changes, known=known)


def api(action: Action, ctx: Context) -> None:
    """Enable one API (Service Usage services.enable), waiting for its operation."""
    if action.kind == DELETE:
        return  # never planned: an API stays enabled (resources.NEVER_DELETED)
    usage, what = ctx.clients.serviceusage, f"enable {action.name}"
    operation = ctx.call(what, usage.enable, ctx.names.project, action.name)
    _wait_rest(ctx, what, operation, usage.get_operation)


def source(action: Action, ctx: Context) -> None:
    blob = ctx.clients.storage.bucket(ctx.names.bucket).blob(action.name)
    if action.kind == DELETE:
        _ignore_missing(lambda: ctx.call(f"delete {action.name}", blob.delete, retry=None, timeout=ctx.timeout))
        return
    # if_generation_match=0: upload only if absent. The name is the content's hash, so an
    # object already there is this very archive.
    with contextlib.suppress(PreconditionFailed):
        ctx.call(f"upload {action.name}", blob.upload_from_string, ctx.source_data,
                 content_type="application/zip", if_generation_match=0, retry=None, timeout=ctx.timeout)


def deployed_spec(action: Action, ctx: Context) -> None:
    blob = ctx.clients.storage.bucket(ctx.names.bucket).blob(action.name)
    if action.kind == DELETE:
        _ignore_missing(lambda: ctx.call(f"delete {action.name}", blob.delete, retry=None, timeout=ctx.timeout))
        return
    # Every digest ever deployed is marked, the one replaced included, before the spec changes: a
    # start published under it and handled after this write still runs (engine/deployed.py).
    job = action.name.removeprefix(DEPLOYED).removesuffix(".json")
    old = (action.current.fields.get("digest") if action.current is not None else None) or \
        action.changes.get("digest", (None, None))[0]
    # Each marker holds its spec's bytes, so a tick the old spec fired is read by the schedule that
    # fired it (SpecStore.fired_with): the replaced spec's are read back from its object first.
    new, data = action.resource.fields["digest"], action.resource.meta["data"]
    replaced = b""
    if isinstance(old, str) and old and old != new:
        replaced = _stored_bytes(ctx, blob, old)
        _mark_digest(ctx, job, old, replaced)
    _mark_digest(ctx, job, new, data)
    # Since when the job has this schedule: carried forward when only other fields changed, so the
    # dispatcher's and the missed-tick pass's floor stays where the schedule last changed.
    since = ctx.clients.storage.bucket(ctx.names.bucket).blob(deployed_since(job, new))
    ctx.call(f"upload {since.name}", since.upload_from_string, _since_body(ctx, job, old, replaced, data),
             content_type="text/plain", retry=None, timeout=ctx.timeout)
    account = action.resource.meta.get("service_account")
    blob.metadata = {DIGEST_KEY: action.resource.fields["digest"], **({ACCOUNT_KEY: account} if account else {})}
    ctx.call(f"upload {action.name}", blob.upload_from_string, action.resource.meta["data"],
             content_type="application/json", retry=None, timeout=ctx.timeout)


def retired_account(action: Action, ctx: Context) -> None:
    """The record of an account deploy still revokes grants of (deploy/retirement.py): empty, its
    name is the account."""
    blob = ctx.clients.storage.bucket(ctx.names.bucket).blob(action.name)
    if action.kind == DELETE:
        _ignore_missing(lambda: ctx.call(f"delete {action.name}", blob.delete, retry=None, timeout=ctx.timeout))
        return
    ctx.call(f"upload {action.name}", blob.upload_from_string, b"", content_type="text/plain", retry=None,
             timeout=ctx.timeout)


# --- functions ------------------------------------------------------------------------------------

def function_message(name: str, fields: Mapping[str, Any], names: Names) -> Any:
    """The functions_v2.Function for desired `fields` (see desired._function)."""
    return request_messages.function_message(names.function_path(name), fields, project=names.project, region=names.region)


def function(action: Action, ctx: Context) -> None:
    functions, name = ctx.clients.functions, action.name
    path = ctx.names.function_path(name)
    if action.kind == DELETE:
        def delete() -> None:
            op = ctx.call(f"delete function {name}", functions.delete_function, name=path,
                          retry=None, timeout=ctx.timeout)
            _wait(ctx, f"delete function {name}", op)
        _ignore_missing(delete)
        return
    message = function_message(name, action.resource.fields, ctx.names)
    paths = sorted(set(FUNCTION_MASK.values()))
    if action.kind == CREATE:
        try:
            op = ctx.call(f"create function {name}", functions.create_function,
                          request={"parent": ctx.names.location_path, "function": message, "function_id": name},
                          retry=None, timeout=ctx.timeout)
            _wait(ctx, f"create function {name}", op)
            return
        except AlreadyExists:
            pass  # left by an interrupted deploy: update all of it
    elif "healthy" not in action.changes:
        paths = sorted({FUNCTION_MASK[f] for f in action.changes if f in FUNCTION_MASK})
    op = ctx.call(f"update function {name}", functions.update_function,
                  request={"function": message, "update_mask": {"paths": paths}}, retry=None, timeout=ctx.timeout)
    _wait(ctx, f"update function {name}", op)


# --- scheduler entries ----------------------------------------------------------------------------

def scheduler_message(name: str, fields: Mapping[str, Any], names: Names) -> Any:
    return request_messages.scheduler_message(names.scheduler_path(name), fields)


def scheduler_job(action: Action, ctx: Context) -> None:
    scheduler, name = ctx.clients.scheduler, action.name
    path = ctx.names.scheduler_path(name)
    if action.kind == DELETE:
        _ignore_missing(lambda: ctx.call(f"delete scheduler job {name}", scheduler.delete_job,
                                         name=path, retry=None, timeout=ctx.timeout))
        return
    fields = action.resource.fields
    message = scheduler_message(name, fields, ctx.names)
    was_paused: bool | None = None
    changed = [f for f in action.changes if f in SCHEDULER_MASK]
    if "data" in action.changes:
        _mark_entry_digest(ctx, fields["data"])
    if action.kind == CREATE:
        try:
            ctx.call(f"create scheduler job {name}", scheduler.create_job,
                     request={"parent": ctx.names.location_path, "job": message}, retry=None, timeout=ctx.timeout)
            changed, was_paused = [], False  # a new job starts enabled
        except AlreadyExists:
            changed = list(SCHEDULER_MASK)  # left by an interrupted deploy: overwrite, set the state
    else:
        was_paused = action.current.fields.get("paused") if action.current else None
    if changed:
        mask = sorted({SCHEDULER_MASK[f] for f in changed})
        job = ctx.call(f"update scheduler job {name}", scheduler.update_job,
                       request={"job": message, "update_mask": {"paths": mask}}, retry=None, timeout=ctx.timeout)
        was_paused = job.state.name == "PAUSED"
    set_entry_paused(ctx, name, fields["paused"], was_paused)


def _mark_digest(ctx: Context, job: str, spec_digest: str, data: bytes = b"") -> None:
    """Mark `spec_digest` as deployed, holding the spec's bytes `data`; without them (an entry's
    digest) only a marker that is not there yet is written, so one holding the spec stays whole."""
    marker = ctx.clients.storage.bucket(ctx.names.bucket).blob(deployed_digest(job, spec_digest))
    if data:
        ctx.call(f"upload {marker.name}", marker.upload_from_string, data, content_type="application/json",
                 retry=None, timeout=ctx.timeout)
        return
    with contextlib.suppress(PreconditionFailed):
        ctx.call(f"upload {marker.name}", marker.upload_from_string, b"", content_type="text/plain",
                 if_generation_match=0, retry=None, timeout=ctx.timeout)


def _since_body(ctx: Context, job: str, old: Any, replaced: bytes, data: bytes) -> bytes:
    """The since object of the spec `data` (engine/deployed.py's read_since): the replaced spec's
    when the schedule, zone and pause are unchanged, else its own time, naming the replaced one."""
    try:
        if not replaced:
            return b""
        if timing(JobSpec.from_payload(json.loads(replaced))) != timing(JobSpec.from_payload(json.loads(data))):
            return since_body(None, old)
    except ValueError:
        return b""
    previous = ctx.clients.storage.bucket(ctx.names.bucket).blob(deployed_since(job, old))
    try:
        body = ctx.call(f"download {previous.name}", previous.download_as_bytes, retry=None, timeout=ctx.timeout)
    except NotFound:
        return b""  # deployed before since objects were: the floor moves to now, as it always did
    lines = body.decode(errors="replace").splitlines() if isinstance(body, bytes) else []
    if lines and lines[0].strip():
        return body
    ctx.call(f"get {previous.name}", previous.reload, retry=None, timeout=ctx.timeout)
    at = previous.updated.isoformat() if previous.updated is not None else ""
    return "\n".join([at, *lines[1:]]).encode() if at else b""


def _stored_bytes(ctx: Context, blob: Any, spec_digest: str) -> bytes:
    """The bytes of the deployed spec object `blob` when they are the spec `spec_digest` names."""
    try:
        data = ctx.call(f"download {blob.name}", blob.download_as_bytes, retry=None, timeout=ctx.timeout)
    except NotFound:
        return b""
    return data if isinstance(data, bytes) and hashlib.sha256(data).hexdigest() == spec_digest else b""


def _mark_entry_digest(ctx: Context, data: Any) -> None:
    """An entry that will name a new digest has it marked first: its ticks may fire before the spec
    object is rewritten, and start_job then runs what is deployed instead of dropping them."""
    try:
        body = json.loads(base64.b64decode(data))
        job, spec_digest = body["job"], body["digest"]
    except (ValueError, TypeError, KeyError):
        return  # not a job's start message (the dispatcher's entry)
    if isinstance(job, str) and isinstance(spec_digest, str):
        _mark_digest(ctx, job, spec_digest)


def set_entry_paused(ctx: Context, name: str, paused: bool, was_paused: bool | None) -> bool:
    """Pause or resume scheduler entry `name` unless it is known to be so already (`was_paused`
    None: not known, so the call is made); whether a call was made. The entry's message is left
    alone: deploy and `spotcron pause --cloud` both come here."""
    scheduler, path = ctx.clients.scheduler, ctx.names.scheduler_path(name)
    if paused and was_paused is not True:
        ctx.call(f"pause scheduler job {name}", scheduler.pause_job, name=path, retry=None, timeout=ctx.timeout)
    elif not paused and was_paused is not False:
        ctx.call(f"resume scheduler job {name}", scheduler.resume_job, name=path, retry=None, timeout=ctx.timeout)
    else:
        return False
    return True


def alert_policy(action: Action, ctx: Context) -> None:
    from spotcron.deploy.alerts import policy_body

    monitoring, name = ctx.clients.monitoring, action.name
    if action.kind == DELETE:
        policy = (action.current.meta if action.current else {}).get("name")
        _ignore_missing(lambda: ctx.call(f"delete alert policy {name}", monitoring.delete_alert_policy, policy))
        return
    assert action.resource is not None
    body = policy_body(name, action.resource.fields)
    if action.kind == CREATE:
        ctx.call(f"create alert policy {name}", monitoring.create_alert_policy, ctx.names.project, body)
        return
    assert action.current is not None
    ctx.call(f"update alert policy {name}", monitoring.replace_alert_policy, action.current.meta["name"], body)


HANDLERS: dict[str, Callable[[Action, Context], None]] = {
    API: api,
    BUCKET: bucket,
    TOPIC: topic,
    SERVICE_ACCOUNT: service_account,
    REPOSITORY: repository,
    FIREWALL: firewall,
    SUBNETWORK: subnetwork,
    IAM_POLICY: iam_policy,
    SOURCE: source,
    FUNCTION: function,
    SCHEDULER_JOB: scheduler_job,
    DEPLOYED_SPEC: deployed_spec,
    ALERT_POLICY: alert_policy,
    RETIRED_ACCOUNT: retired_account,
}
