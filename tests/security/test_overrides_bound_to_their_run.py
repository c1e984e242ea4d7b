"""A manual run's overrides change only the run they were written for.

docs/security.md, the publisher's row: start_job acts only on `{job, digest}` of a deployed spec,
"so at worst a deployed job runs at an unscheduled time". Overrides (`spotcron run JOB --env K=V
--args ...`) never travel in the message: the CLI writes them to `overrides/DIGEST.json` and the
message names the digest (core/overrides.py). But the object names no job and no request, and the
bucket keeps it for ever (no lifecycle rule covers `overrides/`); its digest is on every run
record that used it. So whoever may publish on the start topic can name it in a manual start of
*any* deployed job, at any later time: another job runs with args it was never deployed with, and
its container gets env values an operator once passed to a different job (a token handed to a
one-off run reaches another job's code, with that job's account).
"""

from __future__ import annotations

from spotcron.core.overrides import Overrides
from spotcron.engine.deployed import SpecStore, start_message
from spotcron.engine.run_overrides import start_message_with, write_overrides
from spotcron.testing.harness import Harness, make_spec


def test_overrides_written_for_one_job_never_reach_another_jobs_vm(h: Harness) -> None:
    a = make_spec(name="a")
    b = make_spec(name="b", image="us-docker.pkg.dev/p/r/other:1",
                  service_account="b-runner@proj.iam.gserviceaccount.com")
    SpecStore(h.blobs).write(a)
    SpecStore(h.blobs).write(b)
    # An operator's one-off run of job a, as `spotcron run a --cloud --env ... --args ...` writes it.
    digest = write_overrides(h.blobs, Overrides(env={"ONE_OFF_TOKEN": "tok-for-job-a-only"},
                                                args=("--drop-everything",)))
    # Later, a publisher names those overrides in a manual start of job b.
    h.start(start_message_with(start_message(b), digest), attributes={"trigger": "manual", "nonce": "cd34"})
    made = [request.name for request in h.compute.created if request.name.startswith("sc-b-")]
    ran_with_them = [record.run_id for record in h.records("b")
                     if (record.overrides or {}).get("digest") == digest and record.had_vm]
    assert ran_with_them == [], (
        f"job b's run {ran_with_them} (VM {made}) runs with the overrides written for a run of job a: "
        f"its args, and an env value meant for job a only, in b's container as {b.service_account}")
