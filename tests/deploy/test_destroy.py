"""`spotcron destroy`: the inverse of deploy, against the same fake Google Cloud."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner, Result

from spotcron.cli import SpotcronGroup
from spotcron.cli.deploy import COMMANDS, DeployContext
from spotcron.deploy.destroy import plan_destroy
from spotcron.deploy.naming import Names
from spotcron.engine.ports import Instance
from tests.deploy.conftest import BUCKET, PROJECT, make_settings
from tests.deploy.test_cli_deploy import context, workdir  # noqa: F401 - the same fixtures as deploy's CLI
from tests.fakes.deploy.cloud import FakeCloud


class FakeVms:
    """The Compute port as destroy uses it: list spotcron's VMs, delete one."""

    def __init__(self, *instances: Instance):
        self.instances = list(instances)
        self.deleted: list[str] = []

    def list_managed(self) -> list[Instance]:
        return [i for i in self.instances if i.name not in self.deleted]

    def delete_instance(self, zone: str, name: str) -> bool:
        self.deleted.append(name)
        return True


def vm(name: str, labels: dict[str, str]) -> Instance:
    return Instance(name=name, zone="us-central1-a", status="RUNNING", labels=labels, machine_type="e2-small",
                    provisioning_model="SPOT", created_at=datetime(2026, 11, 23, tzinfo=UTC))


@pytest.fixture
def vms() -> FakeVms:
    return FakeVms(vm("sc-hello-bot-20261123-1000-a1", {"spotcron": "1", "job": "hello-bot", "run": "20261123-1000"}),
                   vm("someone-elses-vm", {"team": "data"}))


@pytest.fixture
def run(context: DeployContext, vms: FakeVms) -> Callable[..., Result]:  # noqa: F811
    group = SpotcronGroup("spotcron")
    for command in COMMANDS:
        group.add_command(command)
    context.compute = lambda project, credentials: vms

    def invoke(*args: str, stdin: str | None = None, interactive: bool = False) -> Result:
        context.interactive = lambda: interactive
        return CliRunner().invoke(group, list(args), obj=context, input=stdin, env={"COLUMNS": "200"},
                                  catch_exceptions=False)

    return invoke


def deployed(run, cloud: FakeCloud) -> None:
    result = run("deploy", "--yes")
    assert result.exit_code == 0, result.output


def foreign_things(cloud: FakeCloud) -> None:
    """What someone else keeps in the same project: never touched."""
    cloud.clients().publisher.create_topic(request={"name": f"projects/{PROJECT}/topics/team-events"})


def test_dry_run_prints_the_plan_and_changes_nothing(run, cloud: FakeCloud, vms: FakeVms) -> None:
    deployed(run, cloud)
    before = len(cloud.log)
    result = run("destroy", "--dry-run")
    assert result.exit_code == 0, result.output
    out = result.output
    print(out)
    for line in ("- delete vm sc-hello-bot-20261123-1000-a1 (us-central1-a, RUNNING; run hello-bot/20261123-1000)",
                 "- delete scheduler_job spotcron-bot", "- delete scheduler_job spotcron-sweep",
                 "- delete function spotcron-start-job", "- delete topic spotcron-start",
                 f"- delete service_account spotcron-vm@{PROJECT}.iam.gserviceaccount.com",
                 f"~ update iam_policy project:{PROJECT}",
                 f"  keep bucket {BUCKET} and every run's results in it (--delete-results deletes them)",
                 "  keep repository spotcron and the images in it (delete it by hand once no job needs them)",
                 "~ update iam_policy repository:spotcron",
                 "Dry run: nothing was changed."):
        assert line in out, line
    assert "someone-elses-vm" not in out
    assert all(call.method == "GET" or call.path.endswith(":getIamPolicy") or "GetIamPolicy" in call.path
               or "List" in call.path for call in cloud.log[before:])
    assert vms.deleted == []


def test_without_yes_and_without_a_terminal_it_refuses(run, cloud: FakeCloud, vms: FakeVms) -> None:
    deployed(run, cloud)
    result = run("destroy")
    assert result.exit_code == 2
    assert "destroy asks before deleting anything, and there is no terminal to ask on: pass --yes" in result.output
    result = run("destroy", stdin="n\n", interactive=True)
    assert result.exit_code == 2 and "destroy cancelled: nothing was changed" in result.output
    assert vms.deleted == [] and cloud.scheduler.jobs


def test_destroy_removes_what_deploy_made_and_keeps_the_results(run, cloud: FakeCloud, vms: FakeVms) -> None:
    deployed(run, cloud)
    foreign_things(cloud)
    cloud.storage.objects[(BUCKET, "runs/hello-bot/20261123-1000/run.json")] = (b"{}", 1)
    result = run("destroy", stdin="y\n", interactive=True)
    assert result.exit_code == 0, result.output
    assert "Destroyed" in result.output and f"Results stay in gs://{BUCKET}" in result.output
    assert vms.deleted == ["sc-hello-bot-20261123-1000-a1"]
    assert not cloud.scheduler.jobs and not cloud.functions.functions
    assert set(cloud.pubsub.topics) == {f"projects/{PROJECT}/topics/team-events"}
    assert not [e for e in cloud.iam.accounts if e.startswith("spotcron-")]
    assert BUCKET in cloud.storage.buckets
    # (digests' markers stay with the results: the bucket's lifecycle deletes them after 8 days)
    assert [name for (bucket, name) in cloud.storage.objects if bucket == BUCKET and not name.startswith("digests/")] == \
        ["runs/hello-bot/20261123-1000/run.json"]  # the source archives and deployed specs went, the results stayed
    policy = cloud.project_policies.get(f"projects/{PROJECT}")
    assert not [m for b in policy.get("bindings", []) for m in b.get("members", []) if "spotcron-" in m]
    # The repository (job images) stays, without any binding of the accounts that are gone.
    repository = f"projects/{PROJECT}/locations/us-central1/repositories/spotcron"
    assert repository in cloud.registry.repositories
    assert not [m for b in cloud.registry.policies.get(repository).get("bindings", []) for m in b["members"]]
    # Nothing left: a second destroy has nothing to do, and deploy builds it all again.
    assert "Nothing to destroy" in run("destroy", "--dry-run").output
    assert run("deploy", "--yes").exit_code == 0


def test_delete_results_deletes_the_bucket_only_when_it_is_ours(run, cloud: FakeCloud) -> None:
    deployed(run, cloud)
    cloud.storage.objects[(BUCKET, "runs/x/run.json")] = (b"{}", 1)
    result = run("destroy", "--yes", "--delete-results")
    assert result.exit_code == 0, result.output
    assert BUCKET not in cloud.storage.buckets and not [k for k in cloud.storage.objects if k[0] == BUCKET]


def test_delete_results_deletes_what_it_can_and_names_the_held_objects_it_cannot(run, cloud: FakeCloud) -> None:
    deployed(run, cloud)
    held, retained = "runs/x/20261122-1200/attempt-1/results/a", "runs/x/20261122-1200/attempt-1/results/b"
    for name in ("runs/a/run.json", held, retained, "runs/z/run.json"):
        cloud.storage.objects[(BUCKET, name)] = (b"{}", 1)
    cloud.storage.kept[(BUCKET, held)] = "Temporary"
    cloud.storage.kept[(BUCKET, retained)] = "retention"

    result = run("destroy", "--yes", "--delete-results")

    assert result.exit_code != 0
    assert sorted(k[1] for k in cloud.storage.objects if k[0] == BUCKET) == [held, retained]
    assert BUCKET in cloud.storage.buckets
    assert f"gs://{BUCKET}/{held}: under a temporary hold" in result.output
    assert f"gs://{BUCKET}/{retained}: under a retention policy" in result.output
    assert "--no-temporary-hold" in result.output
    cloud.storage.kept.clear()  # the holds released, the retention over: destroy finishes
    assert run("destroy", "--yes", "--delete-results").exit_code == 0
    assert BUCKET not in cloud.storage.buckets


def test_a_bucket_without_our_label_is_kept_even_with_delete_results(cloud: FakeCloud) -> None:
    from spotcron.deploy.resources import BUCKET as BUCKET_TYPE
    from spotcron.deploy.resources import Resource

    actual = {(BUCKET_TYPE, BUCKET): Resource(BUCKET_TYPE, BUCKET, {}, owned=False)}
    plan = plan_destroy(actual, Names.of(make_settings()), delete_results=True)
    assert plan.actions == []
    assert plan.kept == [f"bucket {BUCKET}: it does not carry the label spotcron=1, so it is not ours to delete"]


def test_a_placeholder_project_fails_before_any_call(run, workdir, cloud: FakeCloud) -> None:  # noqa: F811
    (workdir / "infra" / "stack.yaml").write_text("project: my-project\n")
    result = run("destroy", "--dry-run")
    assert result.exit_code == 2 and "'my-project' is the placeholder" in result.output
    assert cloud.log == []


def test_dry_run_without_credentials_says_how_to_log_in_not_which_apis_deploy_needs(
        run, context: DeployContext, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    from spotcron.cli.deploy import _default_credentials

    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "no-such-key.json"))
    context.credentials = _default_credentials
    result = run("destroy", "--dry-run")
    assert result.exit_code == 2
    message = result.output.splitlines()[-1]
    assert message.startswith("error: no Google credentials found: run `gcloud auth application-default login` "
                              "(or set GOOGLE_APPLICATION_CREDENTIALS). destroy reads the project to list what "
                              "it would delete, --dry-run too")
    assert "APIs" not in message and "no-such-key.json" in message


def test_destroy_empties_and_deletes_the_bucket_of_build_logs(run, cloud: FakeCloud) -> None:
    logs = f"{BUCKET}-build-logs"
    deployed(run, cloud)
    assert logs in cloud.storage.buckets
    cloud.storage.put(logs, "log-left-behind.txt", b"a build's log an interrupted deploy left")
    result = run("destroy", "--yes")
    assert result.exit_code == 0, result.output
    assert f"- delete bucket {logs}" in result.output.splitlines()
    assert logs not in cloud.storage.buckets and not [k for k in cloud.storage.objects if k[0] == logs]
    assert BUCKET in cloud.storage.buckets  # the results bucket stays without --delete-results
