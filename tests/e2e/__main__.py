"""`make e2e`: the whole stack once, on a real Google Cloud project that is thrown away after.

Deploys jobs/hello-bot.yaml with a stack file of its own, runs it once with
`spotcron run --cloud`, waits for the run's record and manifest in the bucket, checks that the
run's VM and its boot disk are gone, then destroys the stack (results bucket included). Every
step is the `spotcron` command a person would type, so this is what to run first with an account.

Needs SPOTCRON_E2E_PROJECT (a throwaway project: everything spotcron-labelled in it is deleted
at the end) and application-default credentials. Without them it prints one line saying what
is missing and exits 0, so `make e2e` is safe anywhere. Optional: SPOTCRON_E2E_REGION
(default us-central1), SPOTCRON_E2E_IMAGE (an image the VM account can pull; default: deploy builds the job's folder),
SPOTCRON_E2E_KEEP=1 (skip the destroy, to look around).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.examples import example

REPO = Path(__file__).resolve().parents[2]
JOB = "hello-bot"
BOT_FOLDER = "vm_images/bot"  # hello-bot's build folder
WAIT_S = 20 * 60  # boot, pull, run, upload, callback: minutes, not hours
POLL_S = 15.0


class E2EFailed(Exception):
    pass


@dataclass(frozen=True)
class Config:
    project: str
    region: str
    image: str | None
    keep: bool

    @property
    def bucket(self) -> str:
        return f"{self.project}-spotcron-e2e"


def config_or_skip_reason(environ: Mapping[str, str], has_credentials: Callable[[], str | None]) -> Config | str:
    """The run's settings, or the one line that says why it is skipped (no project asked for).

    A project set without credentials is a failure (E2EFailed), not a skip: whoever set it asked for
    the run, and a green `make e2e` that ran nothing would mislead them."""
    project = environ.get("SPOTCRON_E2E_PROJECT", "").strip()
    if not project:
        return ("e2e: skipped: set SPOTCRON_E2E_PROJECT to a throwaway Google Cloud project (all of spotcron's "
                "resources in it are deleted at the end); see docs/deploy.md")
    problem = has_credentials()
    if problem:
        raise E2EFailed(f"SPOTCRON_E2E_PROJECT is {project} but there are no Google credentials ({problem}); "
                        "run `gcloud auth application-default login`, or unset SPOTCRON_E2E_PROJECT to skip")
    return Config(project=project, region=environ.get("SPOTCRON_E2E_REGION", "us-central1"),
                  image=environ.get("SPOTCRON_E2E_IMAGE") or None, keep=environ.get("SPOTCRON_E2E_KEEP") == "1")


def default_credentials_problem() -> str | None:
    try:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError

        try:
            google.auth.default()
        except DefaultCredentialsError as exc:
            return str(exc).splitlines()[0]
    except ImportError as exc:  # pragma: no cover - installed with spotcron
        return str(exc)
    return None


def write_stack(config: Config, root: Path) -> tuple[Path, Path]:
    """A stack file and a jobs folder holding only hello-bot, in `root`."""
    stack = root / "stack.yaml"
    stack.write_text(f"project: {config.project}\nregion: {config.region}\nbucket: {config.bucket}\n")
    jobs = root / "jobs"
    jobs.mkdir()
    text = example(JOB).read_text()
    if config.image:  # a prebuilt image instead of the build deploy would run
        text = "\n".join(f"image: {config.image}" if line.startswith(("image:", "build:")) else line
                         for line in text.splitlines()) + "\n"
    else:  # deploy builds the job's folder with Cloud Build, relative to the folder holding jobs/
        shutil.copytree(REPO / BOT_FOLDER, root / BOT_FOLDER)
    (jobs / f"{JOB}.yaml").write_text(text)
    return stack, jobs


Run = Callable[[Sequence[str]], str]  # spotcron ARGS → stdout; raises E2EFailed on a non-zero exit


def spotcron_cli(args: Sequence[str]) -> str:
    print(f"$ spotcron {' '.join(args)}", flush=True)
    done = subprocess.run([sys.executable, "-c", "from spotcron.cli import main; main()", *args], cwd=REPO,
                          capture_output=True, text=True, check=False)
    sys.stdout.write(done.stdout[-4000:])
    if done.returncode != 0:
        raise E2EFailed(f"spotcron {args[0]} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def wait_for_run(run: Run, bucket: str, before: set[str], *, now: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, wait_s: float = WAIT_S) -> dict[str, Any]:
    """The new manual run of hello-bot once it has ended (its record, as `runs --json` prints it)."""
    deadline = now() + wait_s
    seen: dict[str, Any] | None = None
    while now() < deadline:
        records = json.loads(run(["runs", JOB, "--bucket", f"gs://{bucket}", "--json", "--limit", "0"]) or "[]")
        fresh = [r for r in records if r["run_id"] not in before and r["run_id"].startswith("m")]
        if fresh:
            seen = fresh[0]
            if seen["state"] in ("succeeded", "failed", "timed_out", "lost", "skipped", "cancelled", "preempted"):
                return seen
        sleep(POLL_S)
    where = f"its last state was {seen['state']}" if seen else "no run record appeared"
    raise E2EFailed(f"the run did not end within {wait_s / 60:.0f} minutes: {where}")


def leftovers(project: str, vm_names: Sequence[str], list_instances: Callable[[], list[Any]] | None = None,
              list_disks: Callable[[str], list[str]] | None = None) -> list[str]:
    """The run's VMs or boot disks that still exist (a VM's boot disk has the VM's name)."""
    if list_instances is None:
        from spotcron.gcp.compute import GoogleCompute

        list_instances = GoogleCompute(project).list_managed
    if list_disks is None:
        list_disks = _disks(project)
    alive = {vm.name for vm in list_instances()}
    found = [f"VM {name}" for name in vm_names if name in alive]
    found += [f"disk {name}" for name in vm_names if name in list_disks(name)]
    return found


def _disks(project: str) -> Callable[[str], list[str]]:
    def names(name: str) -> list[str]:
        from google.cloud import compute_v1

        pages = compute_v1.DisksClient().aggregated_list(request={"project": project, "filter": f'name = "{name}"'})
        return [disk.name for _, scoped in pages for disk in (scoped.disks or [])]

    return names


def run_e2e(config: Config, run: Run = spotcron_cli, check_leftovers: Callable[[Config, list[str]], list[str]] |
            None = None) -> dict[str, Any]:
    check = check_leftovers or (lambda cfg, vms: leftovers(cfg.project, vms))
    with tempfile.TemporaryDirectory(prefix="spotcron-e2e-") as folder:
        stack, jobs = write_stack(config, Path(folder))
        common = ["--stack", str(stack)]
        try:
            run(["deploy", "--yes", "--jobs", str(jobs), *common])
            before = {r["run_id"] for r in json.loads(run(["runs", JOB, "--bucket", f"gs://{config.bucket}",
                                                            "--json", "--limit", "0"]) or "[]")}
            run(["run", JOB, "--cloud", "--jobs", str(jobs), "--bucket", f"gs://{config.bucket}", *common])
            record = wait_for_run(run, config.bucket, before)
            if record["state"] != "succeeded":
                raise E2EFailed(f"{JOB}/{record['run_id']} ended {record['state']}: {record.get('reason')}")
            listing = json.loads(run(["results", f"{JOB}/{record['run_id']}", "--bucket", f"gs://{config.bucket}",
                                      "--json"]))
            if listing["source"] != "manifest":
                raise E2EFailed(f"{JOB}/{record['run_id']} succeeded without a manifest in gs://{config.bucket}")
            left = check(config, [a["vm_name"] for a in record["attempts"]])
            if left:
                raise E2EFailed(f"still there after the run ended: {', '.join(left)}")
            print(f"e2e: {JOB}/{record['run_id']} succeeded on {config.project}; its VM and disk are gone", flush=True)
            return record
        finally:
            if not config.keep:
                run(["destroy", "--yes", "--delete-results", *common])


def main() -> int:
    try:
        found = config_or_skip_reason(os.environ, default_credentials_problem)
        if isinstance(found, str):
            print(found)
            return 0
        run_e2e(found)
    except E2EFailed as exc:
        print(f"e2e: FAILED: {exc}", file=sys.stderr)
        return 1
    print("e2e: passed: deploy, one cloud run, results in the bucket, nothing left running, destroy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
