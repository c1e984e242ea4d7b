"""The credentials broker: a job's VM trades its identity for a storage token of its own prefix.

The VM service account holds no storage role at all. The runner asks here for a token, with an
instance identity token whose audience is this endpoint's URL (`credentials_url` in the run
descriptor), and gets a Credential Access Boundary token that can touch exactly:

- its own attempt's objects, `runs/JOB/RUN/attempt-N/` (create, read, replace, delete, list), and
- its run's checkpoint, `runs/JOB/RUN/checkpoint/` (the same).

No metadata update: the roles are Storage Object Viewer (get, list) and Storage Legacy Bucket
Writer (create, delete, list: replacing an object needs delete as well as create), not Storage
Object User, whose `storage.objects.update` is what placing a hold on an object asks
(https://cloud.google.com/storage/docs/access-control/iam-roles,
https://cloud.google.com/storage/docs/holding-objects). The runner only uploads whole objects and
reads them back; it never patches one.

Nothing else: not another run, not run records, markers, deployed specs or the results page.
The caller is checked by engine/callers.py, the check job_done makes too (signature,
audience, issuer, expiry, project, the VM account), and the instance named in the token must be
the managed VM of the run's current, live attempt (name, zone and instance id); a token for an
ended or superseded attempt gets nothing. The rules are built here, once, and minted by Google's STS (gcp/downscoped.py) or by
the local storage server's grants in local mode.
"""

from __future__ import annotations

import logging
from typing import Any

from spotcron.core import layout
from spotcron.engine.callers import CallerRefused, MissingToken, attempt_problem, vm_caller
from spotcron.engine.deps import Deps
from spotcron.engine.job_done import Reply

log = logging.getLogger("spotcron.engine")

STORAGE = "//storage.googleapis.com/"
# Both roles' object permissions are scoped by the rule's condition; Legacy Bucket Writer's
# storage.buckets.get names the bucket, which no condition below lets through.
READ_WRITE = ("inRole:roles/storage.objectViewer", "inRole:roles/storage.legacyBucketWriter")
LIST_PREFIX = "api.getAttribute('storage.googleapis.com/objectListPrefix', '')"


def _quoted(text: str) -> str:
    if "'" in text or "\\" in text:
        raise ValueError(f"{text!r} cannot be quoted in a condition")  # names never hold these
    return f"'{text}'"


def boundary_rules(bucket: str, job: str, run_id: str, attempt: int) -> list[dict[str, Any]]:
    """The access boundary of one attempt's VM, in Google's Credential Access Boundary shape. Pure.

    Every prefix ends in "/": `attempt-1` must not reach `attempt-10/`.
    """
    resource = f"{STORAGE}projects/_/buckets/{bucket}"
    objects = f"projects/_/buckets/{bucket}/objects/"

    def under(title: str, prefix: str) -> dict[str, Any]:
        # Objects whose name starts with the prefix, and listings of that prefix (a listing is a
        # bucket-level request: only the objectListPrefix attribute says what it asks for).
        expression = (f"resource.name.startsWith({_quoted(objects + prefix)}) || "
                      f"{LIST_PREFIX}.startsWith({_quoted(prefix)})")
        return {"availableResource": resource, "availablePermissions": list(READ_WRITE),
                "availabilityCondition": {"title": title, "expression": expression}}

    return [under("own attempt", layout.attempt_prefix(job, run_id, attempt)),
            under("own checkpoint", layout.checkpoint_prefix(job, run_id))]


def grant(deps: Deps, authorization: str | None) -> Reply:
    """Answer one request for credentials: 200 with {access_token, expires_in}, else 4xx and no token."""
    if deps.minter is None:
        return Reply(503, {"error": "no token minter is configured for these functions", "retry": True})
    audience = deps.settings.credentials_url
    if not audience:
        return Reply(503, {"error": "the credentials URL is not configured yet (deploy sets it); try again",
                           "retry": True})
    try:
        caller = vm_caller(deps, authorization, audience)
    except MissingToken:
        return Reply(401, {"error": "missing bearer token: send the VM's identity token (audience = this URL)"})
    except CallerRefused as exc:
        return Reply(exc.status, {"error": exc.message})
    name, zone = caller.instance_name, caller.zone
    instance = deps.compute.get_instance(zone, name)
    if instance is None or not instance.managed:
        return Reply(403, {"error": f"VM {name} in {zone} is not a live spotcron VM"})
    if caller.instance_id != str(instance.instance_id):
        # The record may not hold the instance id yet (a VM asks as soon as it boots), so the
        # live instance of that name is compared too.
        return Reply(403, {"error": f"the token's instance id is not that of VM {name} (a new VM of the same "
                                    f"name?)"})
    job, run_id, number = instance.labels.get("job", ""), instance.labels.get("run", ""), instance.labels.get("attempt", "")
    record = deps.store.read(job, run_id) if job and run_id else None
    if record is None or not number.isdigit():
        return Reply(403, {"error": f"VM {name} is not the live attempt of any run; no credentials"})
    mismatch = attempt_problem(deps, caller, record, int(number), live=True)
    if mismatch:
        return Reply(403, {"error": mismatch.message})
    rules = boundary_rules(deps.blobs.bucket, job, run_id, int(number))
    access_token, expires_in = deps.minter.mint(rules)
    log.info("credentials for %s/%s attempt %s", job, run_id, number,
             extra={"fields": {"event": "credentials", "job": job, "run_id": run_id, "attempt": int(number)}})
    return Reply(200, {"access_token": access_token, "expires_in": expires_in, "token_type": "Bearer"})
