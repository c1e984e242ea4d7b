"""The credentials broker: a job's VM trades its identity for a storage token of its own prefix.

The VM service account holds no storage role at all. The runner asks here for a token, with an
instance identity token whose audience is this endpoint's URL (`credentials_url` in the run
descriptor), and gets a Credential Access Boundary token that can touch exactly:

- its own attempt's objects, `runs/JOB/RUN/attempt-N/` (create, read, replace, delete, list), and
- its run's checkpoint, `runs/JOB/RUN/checkpoint/` (the same).

Nothing else: not another run, not run records, markers, deployed specs or the results page.
The caller is checked like job_done checks a callback (signature, audience, VM account,
project), and the instance named in the token must be the managed VM of the run's current,
live attempt (name, zone and instance id); a token for an ended or superseded attempt gets
nothing. The rules are built here, once, and minted by Google's STS (gcp/downscoped.py) or by
the local storage server's grants in local mode.
"""

from __future__ import annotations

import logging
from typing import Any

from spotcron.core import layout
from spotcron.core.errors import InvalidToken
from spotcron.engine.deps import Deps
from spotcron.engine.finish import Reply, _bearer, _claims_problem

log = logging.getLogger("spotcron.engine")

STORAGE = "//storage.googleapis.com/"
READ_WRITE = "inRole:roles/storage.objectUser"
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
        return {"availableResource": resource, "availablePermissions": [READ_WRITE],
                "availabilityCondition": {"title": title, "expression": expression}}

    return [under("own attempt", layout.attempt_prefix(job, run_id, attempt)),
            under("own checkpoint", layout.checkpoint_prefix(job, run_id))]


def grant(deps: Deps, authorization: str | None) -> Reply:
    """Answer one request for credentials: 200 with {access_token, expires_in}, else 4xx and no token."""
    if deps.minter is None:
        return Reply(503, {"error": "no token minter is configured for these functions", "retry": True})
    token = _bearer(authorization)
    if token is None:
        return Reply(401, {"error": "missing bearer token: send the VM's identity token (audience = this URL)"})
    audience = deps.settings.credentials_url
    if not audience:
        return Reply(503, {"error": "the credentials URL is not configured yet (deploy sets it); try again",
                           "retry": True})
    try:
        claims = deps.identity.verify(token, audience)
    except InvalidToken as exc:
        return Reply(401, {"error": f"invalid token: {exc}"})
    problem = _claims_problem(deps, claims)
    if problem:
        return Reply(403, {"error": problem})
    engine = claims["google"]["compute_engine"]
    name, zone = engine["instance_name"], engine["zone"].rsplit("/", 1)[-1]
    instance = deps.compute.get_instance(zone, name)
    if instance is None or not instance.managed:
        return Reply(403, {"error": f"VM {name} in {zone} is not a live spotcron VM"})
    if str(engine.get("instance_id", "")) != str(instance.instance_id):
        return Reply(403, {"error": f"the token's instance id is not that of VM {name} (a new VM of the same "
                                    f"name?)"})
    job, run_id, number = instance.labels.get("job", ""), instance.labels.get("run", ""), instance.labels.get("attempt", "")
    record = deps.store.read(job, run_id) if job and run_id else None
    current = record.current_attempt if record is not None else None
    if (record is None or record.terminal or current is None or current.vm_name != name
            or current.zone != zone or str(current.number) != number):
        return Reply(403, {"error": f"VM {name} is not the live attempt of run {job}/{run_id}; no credentials"})
    rules = boundary_rules(deps.blobs.bucket, job, run_id, current.number)
    access_token, expires_in = deps.minter.mint(rules)
    log.info("credentials for %s/%s attempt %s", job, run_id, current.number,
             extra={"fields": {"event": "credentials", "job": job, "run_id": run_id, "attempt": current.number}})
    return Reply(200, {"access_token": access_token, "expires_in": expires_in, "token_type": "Bearer"})
