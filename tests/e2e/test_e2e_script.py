"""`make e2e`'s script without Google: its skip line, and its steps against a scripted CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.__main__ import (
    REPO,
    Config,
    E2EFailed,
    config_or_skip_reason,
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

    def __init__(self, states: list[str], manifest: bool = True):
        self.calls: list[list[str]] = []
        self.states = states
        self.manifest = manifest

    def __call__(self, args):
        self.calls.append(list(args))
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


def test_the_steps_deploy_run_wait_check_destroy(monkeypatch):
    from tests.e2e import __main__ as e2e

    monkeypatch.setattr(e2e, "POLL_S", 0.0)
    cli = ScriptedCli(["starting", "running", "succeeded"])
    checked = []
    record = run_e2e(CONFIG, cli, lambda cfg, vms: checked.append(vms) or [])
    assert record["run_id"] == "m20261123-101500-ab12"
    assert [c[0] for c in cli.calls] == ["deploy", "runs", "run", "runs", "runs", "runs", "results", "destroy"]
    assert cli.calls[2][:3] == ["run", "hello-bot", "--cloud"]
    assert cli.calls[-1][:3] == ["destroy", "--yes", "--delete-results"]
    assert "--bucket" in cli.calls[1] and "gs://throwaway-123-spotcron-e2e" in cli.calls[1]
    assert checked == [["sc-hello-bot-m20261123-101500-ab12-a1"]]


@pytest.mark.parametrize(("states", "manifest", "left", "message"), [
    (["failed"], True, [], "ended failed"),
    (["succeeded"], False, [], "succeeded without a manifest"),
    (["succeeded"], True, ["disk sc-hello-bot-m20261123-101500-ab12-a1"], "still there after the run ended: disk"),
])
def test_a_failed_check_still_destroys_the_stack(monkeypatch, states, manifest, left, message):
    from tests.e2e import __main__ as e2e

    monkeypatch.setattr(e2e, "POLL_S", 0.0)
    cli = ScriptedCli(states, manifest)
    with pytest.raises(E2EFailed, match=message):
        run_e2e(CONFIG, cli, lambda cfg, vms: left)
    assert cli.calls[-1][0] == "destroy"


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
    from tests.e2e.__main__ import write_stack

    stack, jobs = write_stack(Config("p-123456", "europe-west1", "europe-docker.pkg.dev/p/r/bot:1", False), tmp_path)
    assert stack.read_text() == "project: p-123456\nregion: europe-west1\nbucket: p-123456-spotcron-e2e\n"
    text = (jobs / "hello-bot.yaml").read_text()
    assert "image: europe-docker.pkg.dev/p/r/bot:1\n" in text and "build:" not in text
    assert Path(jobs).is_dir() and sorted(p.name for p in jobs.iterdir()) == ["hello-bot.yaml"]


def test_without_an_image_deploy_builds_the_jobs_folder(tmp_path):
    from spotcron.core.loader import load_jobs
    from tests.e2e.__main__ import write_stack

    _, jobs = write_stack(Config("p-123456", "europe-west1", None, False), tmp_path)
    assert "build: vm_images/bot" in (jobs / "hello-bot.yaml").read_text()
    assert (tmp_path / "vm_images" / "bot" / "Dockerfile").is_file()
    [spec] = load_jobs([jobs])  # the build folder is found where the job says
    assert spec.build is not None
