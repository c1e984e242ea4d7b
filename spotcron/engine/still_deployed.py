"""Whether a run that has no VM yet may still get one: its job must still be deployed as it ran.

A run copies its spec into its record when it is created, and it may wait long before its VM is
created: queued for room under the stack's limits, or a retry waiting for its earlier VM to stop.
Meanwhile its job may be paused, removed or deployed again with another image, machine or
command. Creating the VM from the record's copy would run what is no longer deployed, so every
attempt's VM is preceded by this check (engine/attempts.py, engine/queue.py), and a run that
fails it ends without a VM: `skipped` when it never had one, `cancelled` when an earlier attempt
did (its results so far are kept).

A manual run of a paused job is asked for on purpose and stays allowed while the job stays as it
was when asked.
"""

from __future__ import annotations

from spotcron.core.overrides import Overrides
from spotcron.core.runs import RunRecord
from spotcron.core.spec import JobSpec
from spotcron.engine.deployed import SpecStore
from spotcron.engine.deps import Deps


def deployed_problem(deps: Deps, record: RunRecord) -> str | None:
    """Why `record`'s next VM must not be created (its job was paused, removed or changed); None
    when the job is deployed exactly as the run's copy says."""
    deployed = SpecStore(deps.blobs).read(record.job)
    if deployed is None:
        return (f"job {record.job} is no longer deployed (removed, or its deployed spec does not load), so this run "
                f"gets no VM")
    spec = deployed.spec
    if spec.paused and record.trigger != "manual":
        return f"job {record.job} was paused after this run was triggered, so it gets no VM"
    variant = next((v for v in spec.variants() if v.variant == record.variant and v.repeat_index == record.repeat),
                   None)
    if variant is None:
        return (f"job {record.job} was deployed again without this run's matrix entry or repeat, so this run gets "
                f"no VM")
    if _as_run(variant, record).to_payload() != record.spec:
        return (f"job {record.job} was deployed again with another spec (digest {deployed.digest[:12]}) after this "
                f"run was triggered, so this run gets no VM; the next trigger runs the new spec")
    return None


def _as_run(variant: JobSpec, record: RunRecord) -> JobSpec:
    """The deployed configuration as `record` would run it: a manual run's copy has its overrides
    applied (start_job), so they are applied here too, or every such run that waits would look
    deployed again. The record names the overridden variables; their values are in its copy."""
    recorded = record.overrides or {}
    if not recorded:
        return variant
    copied = (record.spec or {}).get("env") or {}
    env = {name: copied[name] for name in recorded.get("env") or () if name in copied}
    args = recorded.get("args")
    return Overrides.model_construct(env=env, args=tuple(args) if args is not None else None).applied(variant)
