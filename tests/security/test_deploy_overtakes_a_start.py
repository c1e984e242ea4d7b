"""No VM from a spec that is no longer deployed, for a fresh start too.

docs/security.md, "What a deploy changes reaches the runs that wait": "a job paused, removed or
deployed again meanwhile ends the run ... and it never gets a VM from a spec that is no longer
deployed". A fresh start resolves the deployed spec and then, before its insert, lists the live VMs
and writes its admission (engine/limits.py), places the run and applies its concurrency: any of
those calls may stall for seconds (a function is preempted, a listing is slow, a Pub/Sub delivery
waits on a cold start). engine/attempts.create_attempt compares the run's copy with the deployed
spec only for a run that waited (`_has_waited`), and its last read before the insert checks only
that the attempt is still current. So a deploy that lands inside that window (the job paused,
removed, or moved off an account that deploy then stops the functions from acting as) still gets
the old spec a VM: the old image, command and account, with that account's roles and secrets.
"""

from __future__ import annotations

import pytest

from spotcron.core import layout
from spotcron.engine.deployed import SpecStore
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

OLD_ACCOUNT = "old-runner@proj.iam.gserviceaccount.com"
NEW_ACCOUNT = "new-runner@proj.iam.gserviceaccount.com"


class _DeployDuringAdmission:
    """The Compute port, with a deploy landing while the start lists the live VMs for its admission."""

    def __init__(self, h: Harness, deploy):
        self.h, self.deploy, self.done = h, deploy, False
        self.inner = h.compute.list_managed

    def __call__(self):
        if not self.done:
            self.done = True
            self.deploy()
        return self.inner()


@pytest.mark.parametrize("change", ["paused", "removed", "moved to another account"])
def test_a_start_overtaken_by_a_deploy_before_its_insert_gets_no_vm_from_the_old_spec(change: str) -> None:
    h = Harness()
    try:
        spec = make_spec(name="a", service_account=OLD_ACCOUNT)
        if change == "paused":
            def deploy() -> None:
                SpecStore(h.blobs).write(make_spec(name="a", service_account=OLD_ACCOUNT, paused=True))
        elif change == "removed":
            def deploy() -> None:
                h.blobs.delete(layout.deployed_spec("a"))
        else:
            def deploy() -> None:
                SpecStore(h.blobs).write(make_spec(name="a", service_account=NEW_ACCOUNT))
        hook = _DeployDuringAdmission(h, deploy)
        h.compute.list_managed = hook
        h.start(spec)
        assert hook.done, "the start never listed the live VMs: the deploy was not injected"
        made = [request for request in h.compute.created if request.name.startswith("sc-a-")]
        assert made == [], (
            f"job a was {change} by a deploy before its start's insert, and the start still created "
            f"{[r.name for r in made]} from the spec it had read, as {[r.service_account for r in made]}")
    finally:
        entrypoints.use(None)
