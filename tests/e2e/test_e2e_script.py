"""`make e2e`'s script without Google: its skip line, and its steps against a scripted CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.__main__ import (
    NO_CHANGES,
    NOTHING_LEFT,
    REPO,
    Config,
    E2EFailed,
    config_or_skip_reason,
    fire_entry,
    leftovers,
    run_e2e,
    wait_for_run,
)

CONFIG = Config(project="throwaway-123", region="us-central1", image=None, keep=False)


def test_without_a_project_it_skips_with_one_line(tmp_path):
    assert config_or_skip_reason({}, lambda: None).startswith(
        "e2e: skipped: set SPOTCRON_E2E_PROJECT to a throwaway Google Cloud project")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "none")}
    done = subprocess.run([sys.executable, "-m", "tests.e2e"], cwd=REPO, env=env, capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.count("\n") == 1 and done.stdout.startswith("e2e: skipped: set SPOTCRON_E2E_PROJECT")


def test_a_project_without_credentials_fails_with_what_to_do(tmp_path):
    """Asked for (the project is set), the run cannot be skipped quietly: a green `make e2e` would lie."""
    with pytest.raises(E2EFailed, match=r"^SPOTCRON_E2E_PROJECT is p-123456 but there are no Google credentials "
                                        r"\(File x was not found\); run `gcloud auth application-default login`"):
        config_or_skip_reason({"SPOTCRON_E2E_PROJECT": "p-123456"}, lambda: "File x was not found")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "none"),
           "SPOTCRON_E2E_PROJECT": "p-123456"}
    done = subprocess.run([sys.executable, "-m", "tests.e2e"], cwd=REPO, env=env, capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("e2e: FAILED: SPOTCRON_E2E_PROJECT is p-123456 but there are no Google credentials")
    assert done.stderr.count("\n") == 1


class ScriptedCli:
    """The answers `spotcron` would give, in order of the calls the script makes."""

    def __init__(self, states: list[str], manifest: bool = True, replan: str = NO_CHANGES,
                 after_destroy: str = NOTHING_LEFT):
        self.calls: list[list[str]] = []
        self.states = states
        self.manifest = manifest
        self.replan = replan
        self.after_destroy = after_destroy

    def __call__(self, args):
        self.calls.append(list(args))
        if args[0] == "deploy" and "--dry-run" in args:
            return f"spotcron deploy — project p\n{self.replan}\n"
        if args[0] == "destroy" and "--dry-run" in args:
            return f"spotcron destroy — project p\n{self.after_destroy}\n"
        if args[0] == "runs":
            if len([c for c in self.calls if c[0] == "runs"]) == 1:
                return json.dumps([{"run_id": "20261123-0000", "state": "succeeded", "attempts": []}])
            state = self.states.pop(0) if len(self.states) > 1 else self.states[0]
            return json.dumps([{"run_id": "m20261123-101500-ab12", "state": state, "reason": None,
                                "attempts": [{"vm_name": "sc-hello-bot-m20261123-101500-ab12-a1"}]},
                               {"run_id": "20261123-0000", "state": "succeeded", "attempts": []}])
        if args[0] == "results":
            return json.dumps({"source": "manifest" if self.manifest else "listing", "files": []})
        return ""


class Steps:
    """What run_e2e does outside the CLI, recorded: the scheduler entry fired, the contract suite
    run; and a clock that moves only when the script sleeps."""

    def __init__(self):
        self.fired: list[str] = []
        self.contracts: list[str] = []
        self.clock = 0.0

    def kwargs(self):
        return {"fire": lambda cfg: self.fired.append(cfg.project), "contracts": lambda cfg: self.contracts.append(
            cfg.project), "now": lambda: self.clock, "sleep": self.sleep}

    def sleep(self, seconds):
        self.clock += max(seconds, 1.0)


def test_the_steps_doctor_deploy_replan_fire_wait_check_contracts_destroy(monkeypatch):
    monkeypatch.setattr("tests.e2e.__main__.POLL_S", 0.0)
    cli = ScriptedCli(["starting", "running", "succeeded"])
    steps = Steps()
    checked = []
    record = run_e2e(CONFIG, cli, lambda cfg, vms: checked.append(vms) or [], **steps.kwargs())
    assert record["run_id"] == "m20261123-101500-ab12"
    assert [c[0] for c in cli.calls] == ["doctor", "deploy", "deploy", "runs", "runs", "runs", "runs", "results",
                                         "destroy", "destroy"]
    assert cli.calls[1][:2] == ["deploy", "--yes"] and cli.calls[2][:2] == ["deploy", "--dry-run"]
    assert steps.fired == ["throwaway-123"]  # the real scheduler entry, not `run --cloud`
    assert not any(c[0] == "run" for c in cli.calls)
    assert steps.contracts == ["throwaway-123"]
    assert cli.calls[-2][:3] == ["destroy", "--yes", "--delete-results"]
    assert cli.calls[-1][:3] == ["destroy", "--dry-run", "--delete-results"]
    assert "--bucket" in cli.calls[3] and "gs://throwaway-123-spotcron-e2e" in cli.calls[3]
    assert checked == [["sc-hello-bot-m20261123-101500-ab12-a1"]]


@pytest.mark.parametrize(("states", "manifest", "left", "message"), [
    (["failed"], True, [], "ended failed"),
    (["succeeded"], False, [], "succeeded without a manifest"),
    (["succeeded"], True, ["disk sc-hello-bot-m20261123-101500-ab12-a1"],
     "still there 6 minutes after the run ended: disk"),
])
def test_a_failed_check_still_destroys_the_stack(monkeypatch, states, manifest, left, message):
    monkeypatch.setattr("tests.e2e.__main__.POLL_S", 0.0)
    cli = ScriptedCli(states, manifest)
    with pytest.raises(E2EFailed, match=message):
        run_e2e(CONFIG, cli, lambda cfg, vms: left, **Steps().kwargs())
    assert cli.calls[-1][:2] == ["destroy", "--yes"]


def test_a_second_deploy_that_plans_changes_fails_before_any_run(monkeypatch):
    cli = ScriptedCli(["succeeded"], replan="~ update function spotcron-job-done\nPlan: 0 to create, 1 to update, "
                                            "0 to delete.")
    steps = Steps()
    with pytest.raises(E2EFailed, match="a second deploy right after the first plans changes:"):
        run_e2e(CONFIG, cli, lambda cfg, vms: [], **steps.kwargs())
    assert steps.fired == [] and cli.calls[-1][:2] == ["destroy", "--yes"]


def test_a_destroy_that_leaves_something_fails(monkeypatch):
    monkeypatch.setattr("tests.e2e.__main__.POLL_S", 0.0)
    cli = ScriptedCli(["succeeded"], after_destroy="- delete topic spotcron-events\nPlan: 1 to delete, 0 to update.")
    with pytest.raises(E2EFailed, match="(?s)destroy left spotcron resources behind:.*- delete topic spotcron-events"):
        run_e2e(CONFIG, cli, lambda cfg, vms: [], **Steps().kwargs())
    assert [c[:2] for c in cli.calls if c[0] == "destroy"] == [["destroy", "--yes"], ["destroy", "--dry-run"]]


def test_a_vm_still_stopping_when_the_record_says_succeeded_is_waited_out(monkeypatch):
    """job_done only asks Compute Engine to delete the VM: right after `succeeded` the VM is still
    listed, STOPPING, and its disk exists. One look at that moment reported a false leftover."""
    from tests.fakes.gcp.compute import FakeComputeEngine
    from tests.gcp.fixtures import make_google_compute

    monkeypatch.setattr("tests.e2e.__main__.POLL_S", 0.0)
    vm = "sc-hello-bot-m20261123-101500-ab12-a1"
    with FakeComputeEngine(zones=["us-central1-a"], project="test-project") as fake:
        fake.deletion_lag = True
        fake.add_instance("us-central1-a", vm, labels={"spotcron": "1"})
        compute = make_google_compute(fake)
        assert compute.delete_instance("us-central1-a", vm)  # what job_done does before the record says succeeded
        steps = Steps()
        polls = []

        def check(cfg, names):
            left = leftovers("test-project", names, compute.list_managed, lambda name: [])
            polls.append(left)
            return left

        def sleep(seconds):  # Compute Engine finishes the deletion while the script waits
            steps.sleep(seconds)
            fake.finish_deletions()

        record = run_e2e(CONFIG, ScriptedCli(["succeeded"]), check, **{**steps.kwargs(), "sleep": sleep})
    assert record["state"] == "succeeded"
    assert polls == [[f"VM {vm} (STOPPING)"], []]


def test_firing_the_entry_runs_the_real_scheduler_entry(tmp_path):
    """`jobs:run` on spotcron-hello-bot, the entry deploy created, through Google's client."""
    from tests.fakes.deploy.cloud import FakeCloud

    cloud = FakeCloud("throwaway-123").start()
    cloud.enable_apis()  # deployed: deploy enabled Cloud Scheduler
    try:
        name = "projects/throwaway-123/locations/us-central1/jobs/spotcron-hello-bot"
        cloud.scheduler.jobs[name] = {"name": name, "schedule": "0 0 * * *", "timeZone": "Etc/UTC", "pubsubTarget": {
            "topicName": "projects/throwaway-123/topics/spotcron-start", "data": "eyJqb2IiOiAiaGVsbG8tYm90In0="}}
        assert fire_entry(CONFIG, cloud.clients().scheduler) == name
        assert cloud.scheduler.fired == [(name, "projects/throwaway-123/topics/spotcron-start",
                                          b'{"job": "hello-bot"}')]
        with pytest.raises(Exception, match="not found"):
            fire_entry(Config("throwaway-123", "europe-west1", None, False), cloud.clients().scheduler)
    finally:
        cloud.stop()


def test_the_contract_suite_runs_on_cloud_storage_only_when_a_project_is_named(tmp_path):
    def collected(env_extra):
        env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("SPOTCRON_")}
        done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                               "tests/contracts/test_storage_api_contract.py", "-k", "cloud-storage"],
                              cwd=REPO, env={**env, **env_extra}, capture_output=True, text=True, timeout=120)
        return [line for line in done.stdout.splitlines() if "::" in line]

    assert collected({}) == []
    ids = collected({"SPOTCRON_CONTRACT_GCS_PROJECT": "throwaway-123"})
    assert ids and all("cloud-storage" in line for line in ids)


def test_a_contract_bucket_is_emptied_and_deleted():
    """On fake-gcs-server (the local storage server serves no bucket deletion)."""
    from tests.contracts.storage_servers import ServerMissing, fake_gcs_server

    try:
        server = fake_gcs_server()
        api = server.__enter__()
    except ServerMissing as exc:
        pytest.skip(f"fake-gcs-server unavailable: {exc}")
    try:
        bucket = api.new_bucket()
        for name in ("a", "runs/b c", "runs/ü"):
            assert bucket.call("POST", f"/upload/storage/v1/b/{bucket.bucket}/o", {"uploadType": "media",
                                                                                   "name": name}, b"x").status == 200
        bucket.empty_and_delete()
        assert bucket.call("GET", f"/storage/v1/b/{bucket.bucket}").status == 404
    finally:
        server.__exit__(None, None, None)


def test_waiting_gives_up_and_says_the_last_state():
    clock = iter(range(0, 10_000, 100))
    cli = ScriptedCli(["running"])
    cli.calls.append(["runs"])  # as if the "before" listing had been taken
    with pytest.raises(E2EFailed, match="did not end within 20 minutes: its last state was running"):
        wait_for_run(cli, "b", {"20261123-0000"}, now=lambda: next(clock), sleep=lambda s: None)


def test_leftovers_name_the_vm_and_its_disk():
    class Vm:
        name = "sc-a1"

    assert leftovers("p", ["sc-a1", "sc-a2"], lambda: [Vm()], lambda name: [name] if name == "sc-a2" else []) == \
        ["VM sc-a1", "disk sc-a2"]


def test_the_stack_file_and_job(tmp_path):
    from spotcron.core.loader import load_jobs
    from tests.e2e.__main__ import write_stack

    stack, jobs = write_stack(Config("p-123456", "europe-west1", "europe-docker.pkg.dev/p/r/bot:1", False), tmp_path)
    assert stack.read_text() == "project: p-123456\nregion: europe-west1\nbucket: p-123456-spotcron-e2e\n"
    text = (jobs / "hello-bot.yaml").read_text()
    assert "image: europe-docker.pkg.dev/p/r/bot:1\n" in text and "build:" not in text
    assert Path(jobs).is_dir() and sorted(p.name for p in jobs.iterdir()) == ["hello-bot.yaml"]
    # Fired by `jobs:run` at any hour, the run maps to today's midnight tick and is not too late to start.
    [spec] = load_jobs([jobs])
    assert (spec.schedule, spec.starting_deadline) == ("0 0 * * *", 86400)


def test_without_an_image_deploy_builds_the_jobs_folder(tmp_path):
    from spotcron.core.loader import load_jobs
    from tests.e2e.__main__ import write_stack

    _, jobs = write_stack(Config("p-123456", "europe-west1", None, False), tmp_path)
    assert "build: vm_images/bot" in (jobs / "hello-bot.yaml").read_text()
    assert (tmp_path / "vm_images" / "bot" / "Dockerfile").is_file()
    [spec] = load_jobs([jobs])  # the build folder is found where the job says
    assert spec.build is not None


def test_doctor_then_deploy_on_an_empty_strict_fake_project(tmp_path, monkeypatch):
    """`make e2e`'s steps with the real `spotcron` commands against the strict fake Google (an
    empty project: APIs off, accounts and grants propagating on a virtual clock): doctor fails
    nothing a deploy fixes, deploy succeeds in one run, the second plan is empty, the real
    scheduler entry fires, destroy leaves nothing. Only the run itself is scripted (its VM)."""
    from click.testing import CliRunner
    from google.auth.credentials import AnonymousCredentials

    from spotcron.cli import SpotcronGroup
    from spotcron.cli.deploy import COMMANDS as DEPLOY_COMMANDS
    from spotcron.cli.deploy import DeployContext
    from spotcron.cli.doctor import COMMANDS as DOCTOR_COMMANDS
    from spotcron.gcp.admin.calls import Caller
    from tests.deploy.conftest import make_source_root
    from tests.fakes.deploy.cloud import FakeCloud

    monkeypatch.setattr("tests.e2e.__main__.POLL_S", 0.0)
    for name in [n for n in __import__("os").environ if n.startswith("SPOTCRON_")]:
        monkeypatch.delenv(name)
    config = Config(project="throwaway-123", region="us-central1", keep=False,
                    image="us-central1-docker.pkg.dev/throwaway-123/spotcron-jobs/hello-bot:1")
    cloud = FakeCloud(config.project).start()
    context = DeployContext(credentials=lambda project: AnonymousCredentials(),
                            clients=lambda project, credentials, concurrency: cloud.clients(concurrency),
                            source_root=lambda: make_source_root(tmp_path / "src"),
                            caller=lambda project: Caller(project, attempts=3, sleep=lambda s: None),
                            interactive=lambda: False, poll_initial=0.01, sleep=cloud.clock.sleep,
                            compute=lambda project, credentials: None)
    group = SpotcronGroup("spotcron")
    for command in [*DEPLOY_COMMANDS, *DOCTOR_COMMANDS]:
        group.add_command(command)
    scripted = ScriptedCli(["succeeded"])
    outputs: dict[str, list[str]] = {}

    def run(args):
        if args[0] in ("runs", "results"):
            return scripted(args)
        result = CliRunner().invoke(group, list(args), obj=context, env={"COLUMNS": "200"}, catch_exceptions=False)
        outputs.setdefault(args[0], []).append(result.output)
        if result.exit_code != 0:
            raise E2EFailed(f"spotcron {' '.join(args)} exited {result.exit_code}:\n{result.output}")
        return result.output

    def fire(cfg):
        fire_entry(cfg, cloud.clients().scheduler)

    try:
        run_e2e(config, run, lambda cfg, vms: [], fire=fire, contracts=lambda cfg: None, now=lambda: 0.0,
                sleep=lambda s: None)
    finally:
        cloud.stop()
    doctor = outputs["doctor"][0]
    assert "✗" not in doctor and "deploy enables them first, after you confirm" in doctor
    assert cloud.scheduler.fired and cloud.scheduler.fired[0][1] == f"projects/{config.project}/topics/spotcron-start"
    assert cloud.serviceusage.enables  # deploy enabled the APIs itself
    assert cloud.clock.now() >= cloud.access.grant_delay_s  # the grants' propagation was waited out
