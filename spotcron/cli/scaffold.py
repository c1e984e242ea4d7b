"""`spotcron init [DIR]`: a jobs folder with one example job, a stack file and a .gitignore;
`--benchmark` writes a benchmark instead (scaffold_benchmark.py).

What it writes is what every other command reads by default from DIR (`jobs/`,
`infra/stack.yaml`, state in `.spotcron/`), so `cd DIR && spotcron up --once` runs the example
with nothing else installed: its `local.command` is a shell line, no image needed locally.
It never writes over a file: if one exists it writes nothing and says which (exit code 2).
"""

from __future__ import annotations

from pathlib import Path

import click

from spotcron.cli._common import DEFAULT_JOBS, DEFAULT_STACK, line_console

EXAMPLE_JOB = "hello"
SCHEMA_FILE = "schema.json"  # `spotcron schema` writes the same
STATE_DIR = ".spotcron/"

JOB_TEXT = """\
# yaml-language-server: $schema=./schema.json
# A first job: the job's name is the file name (hello). Every field: docs/jobs.md in the spotcron source.
# Preview its schedule:  spotcron next hello       Run it once, locally:  spotcron run hello
description: Says hello and writes the time to its results
schedule: "0 * * * *"          # Cloud Scheduler's unix-cron, 5 fields: every hour, on the hour
time_zone: Etc/UTC
# The container a VM runs on Google Cloud: busybox from Google's cache of Docker Hub, which a VM without an
# external address reaches (Docker Hub itself it does not); your own image in the stack's repository later.
# A job that calls the internet says so with `internet: true` (its VM then gets an external IPv4 address).
image: mirror.gcr.io/library/busybox:1.36
command: [sh, -c, 'echo "hello from spotcron"; date -u > "$SPOTCRON_RESULTS_DIR/hello.txt"']
machine:
  type: e2-small
  spot: true
timeout: 5m
local:
  # What `spotcron up` and `spotcron run` run when no container runtime has the image: the same, as a process.
  # $SPOTCRON_RESULTS_DIR (or {results}) is the run's results folder.
  command: [sh, -c, 'echo "hello from spotcron"; date -u > "$SPOTCRON_RESULTS_DIR/hello.txt"']
"""

STACK_TEXT = """\
# Deployment settings for `spotcron deploy`; local mode (`spotcron up`) needs none of them.
# Every value can be overridden by an environment variable: SPOTCRON_<NAME>, e.g. SPOTCRON_PROJECT.
project: my-project              # your Google Cloud project id
region: us-central1              # where the functions, topics and scheduler entries live
zones: [us-central1-a, us-central1-b, us-central1-c, us-central1-f]  # tried in order for VMs
bucket: my-project-spotcron      # results bucket (created by deploy)
repository: spotcron             # Artifact Registry repository for job and function images (created by deploy, in region)
image_versions_kept: 10          # versions of each image the repository keeps; older ones go after 30 days
functions_service_account: spotcron-functions
vm_service_account: spotcron-vm
network: default                 # the VPC network job VMs join (an organisation without `default` names its own)
subnetwork: ""                   # its subnet in each region VMs run in; empty: named like the network (auto mode)
scheduling: per-job              # per-job: a scheduler entry per job; shared: one entry for all (cheaper from 3 jobs)
sweep_interval: 5m               # how often the sweep reaps leftovers
grace: 5m                        # a VM may outlive its job's timeout by this much (boot, pull, upload)
results_retention_days: 90       # the bucket's lifecycle rule deletes runs older than this
# Spend guards, enforced before every VM insert whatever a job asks for; a run that would cross
# one waits (state `queued`) until room frees or its starting_deadline passes.
limits:
  max_live_vms: 20               # job VMs alive at once, all jobs together
  max_gpus: 4                    # GPUs on live job VMs
  max_vm_hours_per_day: 48       # per UTC day: timeout + grace admitted at start, settled to real use at the end
  manual_share: 0.5              # the most of each limit manual runs may hold; the rest is kept for ticks
"""

GITIGNORE_TEXT = f"""\
# spotcron's local state: the local bucket (runs, logs, results), VM records, logs, and secrets.env
# (the values of the jobs' secrets for `spotcron up`: never commit it)
{STATE_DIR}
"""


def _ignores_state(text: str) -> bool:
    return any(line.strip().rstrip("/") in (".spotcron", "/.spotcron") for line in text.splitlines())


@click.command("init")
@click.argument("directory", required=False, default=".", type=click.Path(path_type=Path, file_okay=False))
@click.option("--benchmark", is_flag=True,
              help="Write a benchmark: jobs/benchmark.yaml (a matrix given as axes, each task compared), "
                   "benchmark/train.py, the module that writes its metrics.json, and its Dockerfile; the stack "
                   "file and .gitignore line too where missing.")
def init(directory: Path, benchmark: bool) -> None:
    """Start a spotcron project in DIRECTORY (default: here).

    Writes jobs/hello.yaml (an example job that runs locally with no image), jobs/schema.json
    (what editors check job files against), infra/stack.yaml (the deployment settings) and a
    .gitignore line for .spotcron/ (local state). Writes nothing
    if jobs/hello.yaml or infra/stack.yaml exists already; an existing .gitignore gets the line
    added, once.

    \b
    Examples:
      spotcron init
      spotcron init my-jobs && cd my-jobs && spotcron up --once
      spotcron init --benchmark && spotcron up --once && spotcron report benchmark
    """
    from spotcron.core.cron.schedule import join_words
    from spotcron.core.errors import SpotcronError

    if benchmark:
        from spotcron.cli import scaffold_benchmark

        files = {directory / name: text for name, text in scaffold_benchmark.files().items()}
        if not (directory / DEFAULT_STACK).exists():
            files[directory / DEFAULT_STACK] = STACK_TEXT
    else:
        files = {directory / DEFAULT_JOBS / f"{EXAMPLE_JOB}.yaml": JOB_TEXT, directory / DEFAULT_STACK: STACK_TEXT}
    existing = [str(path) for path in files if path.exists()]
    if existing:
        one = len(existing) == 1
        raise SpotcronError(f"{join_words(existing)} already exist{'s' if one else ''}; spotcron init never "
                            f"writes over a file: move {'it' if one else 'them'} away, or init another folder "
                            "(spotcron init DIR)")
    if directory.exists() and not directory.is_dir():
        raise SpotcronError(f"{directory} is a file, not a folder; name a folder to init")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    written = [str(path) for path in files]
    schema = directory / DEFAULT_JOBS / SCHEMA_FILE
    if not schema.exists():  # what editors complete and check job files from (the first line of hello.yaml)
        import json

        from spotcron.core.spec import job_file_schema

        schema.write_text(json.dumps(job_file_schema(), indent=2) + "\n", encoding="utf-8")
        written.append(str(schema))
    gitignore = directory / ".gitignore"
    if not gitignore.exists():
        gitignore.write_text(GITIGNORE_TEXT, encoding="utf-8")
        written.append(str(gitignore))
    else:
        text = gitignore.read_text(encoding="utf-8")
        if not _ignores_state(text):
            gitignore.write_text(text + ("" if text.endswith("\n") or not text else "\n") + GITIGNORE_TEXT,
                                 encoding="utf-8")
            written.append(f"{gitignore} (added {STATE_DIR})")
    out = line_console()
    out.print("wrote " + ", ".join(written), markup=False)
    into = "" if directory == Path(".") else f"cd {directory} && "
    then = "spotcron report benchmark" if benchmark else "spotcron runs"
    out.print(f"next: {into}spotcron validate && spotcron up --once && {then}", markup=False)


COMMANDS = [init]
