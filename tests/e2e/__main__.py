"""`make e2e`: the whole stack once, on a real Google Cloud project that is thrown away after.

The first contact, step by step, with the `spotcron` commands a person would type:
`spotcron doctor` (the project's APIs, permissions, quotas, policies and network), a first
`deploy` of jobs/hello-bot.yaml with a stack file of its own, a second plan that must show no
changes, then one run fired by the job's real Cloud Scheduler entry (`jobs:run`), its record and
manifest in the bucket, its VM and boot disk waited out (job_done only asks for the deletion:
the VM stays STOPPING a while), the storage contract suite (tests/contracts) against Cloud
Storage itself, and `destroy`, after which a second destroy must find nothing.

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
# A deleted VM stays listed (STOPPING) until Compute Engine has shut it down and freed its disk;
# "gone" is only checked after this long.
GONE_WAIT_S = 6 * 60
GONE_POLL_S = 10.0
# The e2e's hello-bot fires daily at midnight UTC and may start up to a day late, so the run that
# `jobs:run` forces at any hour maps to today's tick and starts (start_job takes the latest fire
# time before the message as the tick, and skips a tick older than starting_deadline).
E2E_SCHEDULE = '"0 0 * * *"'
E2E_STARTING_DEADLINE = "1d"
NO_CHANGES = "No changes: the deployed stack matches the job specs and settings."
NOTHING_LEFT = "Nothing to destroy: no spotcron resources in this project."


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
    text = "\n".join(f"schedule: {E2E_SCHEDULE}" if line.startswith("schedule:") else line
                     for line in text.splitlines()) + f"\nstarting_deadline: {E2E_STARTING_DEADLINE}\n"
    if not config.image:  # deploy builds the job's folder with Cloud Build, relative to the folder holding jobs/
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
    """The new run of hello-bot once it has ended (its record, as `runs --json` prints it)."""
    deadline = now() + wait_s
    seen: dict[str, Any] | None = None
    while now() < deadline:
        records = json.loads(run(["runs", JOB, "--bucket", f"gs://{bucket}", "--json", "--limit", "0"]) or "[]")
        fresh = [r for r in records if r["run_id"] not in before]
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
    alive = {vm.name: getattr(vm, "status", "") for vm in list_instances()}
    found = [f"VM {name}" + (f" ({alive[name]})" if alive[name] else "") for name in vm_names if name in alive]
    found += [f"disk {name}" for name in vm_names if name in list_disks(name)]
    return found


def _disks(project: str) -> Callable[[str], list[str]]:
    def names(name: str) -> list[str]:
        from google.cloud import compute_v1

        pages = compute_v1.DisksClient().aggregated_list(request={"project": project, "filter": f'name = "{name}"'})
        return [disk.name for _, scoped in pages for disk in (scoped.disks or [])]

    return names


def wait_until_gone(check: Callable[[], list[str]], *, now: Callable[[], float] = time.monotonic,
                    sleep: Callable[[float], None] = time.sleep, wait_s: float = GONE_WAIT_S) -> None:
    """Wait until `check` finds nothing left; E2EFailed naming what is still there after `wait_s`.

    job_done asks Compute Engine to delete the VM and returns: the VM is listed (STOPPING) and its
    boot disk exists until the deletion has finished, so one look right after the run ends would
    report a leftover that is merely on its way out."""
    deadline = now() + wait_s
    left = check()
    while left:
        if now() >= deadline:
            raise E2EFailed(f"still there {wait_s / 60:.0f} minutes after the run ended: {', '.join(left)}")
        print(f"e2e: waiting for the deletion of {', '.join(left)}", flush=True)
        sleep(GONE_POLL_S)
        left = check()


def fire_entry(config: Config, client: Any = None) -> str:
    """Fire hello-bot's Cloud Scheduler entry now (`jobs:run`), as its schedule would; its name."""
    from spotcron.deploy.naming import scheduler_entry

    if client is None:
        from google.cloud import scheduler_v1

        client = scheduler_v1.CloudSchedulerClient()
    name = f"projects/{config.project}/locations/{config.region}/jobs/{scheduler_entry(JOB)}"
    print(f"e2e: jobs:run on {name} (what `gcloud scheduler jobs run {scheduler_entry(JOB)} --location "
          f"{config.region}` does)", flush=True)
    client.run_job(name=name)
    return name


def storage_contracts(config: Config) -> None:
    """The storage contract suite (tests/contracts) on Cloud Storage in the project, fresh buckets
    of its own that it deletes; E2EFailed when a contract does not hold there."""
    from tests.contracts.storage_servers import CLOUD_LOCATION, CLOUD_PROJECT

    env = {**os.environ, CLOUD_PROJECT: config.project, CLOUD_LOCATION: config.region}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/contracts", "-k",
               "cloud-storage"]
    print(f"$ {CLOUD_PROJECT}={config.project} {' '.join(command[1:])}", flush=True)
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    sys.stdout.write(done.stdout[-4000:])
    if done.returncode != 0:
        raise E2EFailed(f"the storage contract suite failed on Cloud Storage (exit {done.returncode}): "
                        f"{(done.stdout + done.stderr).strip()[-2000:]}")


def run_e2e(config: Config, run: Run = spotcron_cli, check_leftovers: Callable[[Config, list[str]], list[str]] |
            None = None, *, fire: Callable[[Config], Any] = fire_entry,
            contracts: Callable[[Config], None] = storage_contracts, now: Callable[[], float] = time.monotonic,
            sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    check = check_leftovers or (lambda cfg, vms: leftovers(cfg.project, vms))
    with tempfile.TemporaryDirectory(prefix="spotcron-e2e-") as folder:
        stack, jobs = write_stack(config, Path(folder))
        common = ["--stack", str(stack)]
        run(["doctor", "--jobs", str(jobs), *common])  # a project that cannot work stops here, before anything exists
        destroyed = False
        try:
            run(["deploy", "--yes", "--jobs", str(jobs), *common])
            again = run(["deploy", "--dry-run", "--jobs", str(jobs), *common])
            if NO_CHANGES not in again:
                raise E2EFailed(f"a second deploy right after the first plans changes:\n{again.strip()[-2000:]}")
            before = {r["run_id"] for r in json.loads(run(["runs", JOB, "--bucket", f"gs://{config.bucket}",
                                                            "--json", "--limit", "0"]) or "[]")}
            fire(config)
            record = wait_for_run(run, config.bucket, before, now=now, sleep=sleep)
            if record["state"] != "succeeded":
                raise E2EFailed(f"{JOB}/{record['run_id']} ended {record['state']}: {record.get('reason')}")
            listing = json.loads(run(["results", f"{JOB}/{record['run_id']}", "--bucket", f"gs://{config.bucket}",
                                      "--json"]))
            if listing["source"] != "manifest":
                raise E2EFailed(f"{JOB}/{record['run_id']} succeeded without a manifest in gs://{config.bucket}")
            vms = [a["vm_name"] for a in record["attempts"]]
            wait_until_gone(lambda: check(config, vms), now=now, sleep=sleep)
            print(f"e2e: {JOB}/{record['run_id']} succeeded on {config.project}; its VM and disk are gone", flush=True)
            contracts(config)
            if not config.keep:
                run(["destroy", "--yes", "--delete-results", *common])
                destroyed = True
                after = run(["destroy", "--dry-run", "--delete-results", *common])
                if NOTHING_LEFT not in after:
                    raise E2EFailed(f"destroy left spotcron resources behind:\n{after.strip()[-2000:]}")
            return record
        finally:
            if not config.keep and not destroyed:
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
    print("e2e: passed: doctor, deploy, a second plan with no changes, one run fired by its scheduler entry, "
          "results in the bucket, VM and disk gone, storage contracts on Cloud Storage, destroy left nothing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
