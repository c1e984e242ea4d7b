"""A job's build context never stays in the results bucket for later builds to read.

docs/security.md says the context (`deploy/build-HASH.tar.gz`) "is deleted as soon as its build is
done, failed or not", and (Limits of what is built, (2)) that the job build account "reads every
`deploy/build-*` context while one exists". The builder deletes a context only once its build's
operation is done (gcp/admin/cloudbuild.py): a deploy interrupted while it waits (Ctrl-C, a lost
connection, the 30-minute wait running out) leaves the context behind, and nothing else deletes it:
no lifecycle rule covers `deploy/build-`, and deploy's listing of `deploy` skips such objects. Every
later build's Dockerfile then reads it as the job build account (a Cloud Build log names its source
object on its first lines, and that account holds Storage Admin on the logs), whichever job it was.
"""

from __future__ import annotations

from tests.deploy.conftest import BUCKET, JOBS_DIR, Deployer
from tests.fakes.deploy.cloud import FakeCloud

LEFT = "deploy/build-0123456789abcdef0123456789abcdef.tar.gz"


def _covered_by_a_delete_rule(cloud: FakeCloud, name: str) -> bool:
    rules = (cloud.storage.buckets[BUCKET].get("lifecycle") or {}).get("rule") or []
    return any(rule.get("action", {}).get("type") == "Delete"
               and any(name.startswith(prefix) for prefix in rule.get("condition", {}).get("matchesPrefix") or ())
               and int(rule.get("condition", {}).get("age", 10**6)) <= 1
               for rule in rules)


def test_a_build_context_an_interrupted_deploy_left_behind_does_not_stay(deployer: Deployer,
                                                                         cloud: FakeCloud) -> None:
    jobs = deployer.jobs(JOBS_DIR)
    deployer.deploy(jobs)
    cloud.storage.put(BUCKET, LEFT, b"another job's folder, private files and all")  # the interrupted deploy's upload
    deployer.deploy(jobs)
    assert (BUCKET, LEFT) not in cloud.storage.objects or _covered_by_a_delete_rule(cloud, LEFT), (
        f"{LEFT} stays in gs://{BUCKET} for good: every later build's Dockerfile may read it")
