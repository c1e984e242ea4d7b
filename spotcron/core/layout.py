"""Where things live in the results bucket. The one place that spells these paths.

    runs/JOB/RUN/run.json                      the run record
    runs/JOB/RUN/attempt-N/logs.txt            the container's output, stored whole when the attempt ends
    runs/JOB/RUN/attempt-N/logs/OFFSET.txt     a piece of it shipped while the job runs, from byte OFFSET
    runs/JOB/RUN/attempt-N/results/...         what the container wrote to /results
    runs/JOB/RUN/attempt-N/manifest.json       written last; without it the attempt did not succeed
    runs/JOB/RUN/attempt-N/hardware.json       what the attempt ran on, measured by the runner
    runs/JOB/RUN/checkpoint/checkpoint.tar     /checkpoint as one archive, saved during the run, restored next attempt
    tokens/SHA256                              identity tokens already accepted (replay guard)
    live/JOB/RUN/...                           an empty marker while the run is not terminal (the sweep's index)
    pruned/JOB                                 when the job's history was last pruned
    deployed/JOB.json                          the job's spec as deploy validated it (canonical JSON); written only
                                               when it changes, so the object's time is when it was deployed
    digests/JOB/SHA256                         a digest that was once JOB's deployed spec, holding that spec (a
                                               start published before a deploy overtook it is read by its schedule)
    digests/JOB/SHA256.since                   since when JOB has had that spec's schedule (the dispatcher's and the
                                               missed-tick pass's floor)
    dispatch/cursor.json                       the minute through which the dispatcher published every tick (shared)
    advice/spot.json                           Spot prices, preemption rates and capacity per zone (placement),
                                               refreshed by the sweep, read by start_job
    limits/DAY/admitted/VM~AT~GPUS~HOURS[~m]   an admitted VM (stack limits): when, its GPUs, the hours it is admitted for
                                               (~m: a manual run's), under each UTC day the admission reaches
    limits/DAY/used/VM~HOURS                   what that VM really ran, written when its run ends
    index.html                                 the results page
"""

from __future__ import annotations

import re

RUNS = "runs/"


def run_prefix(job: str, run_id: str) -> str:
    return f"{RUNS}{job}/{run_id}/"


def run_record(job: str, run_id: str) -> str:
    return f"{run_prefix(job, run_id)}run.json"


def attempt_prefix(job: str, run_id: str, attempt: int) -> str:
    return f"{run_prefix(job, run_id)}attempt-{attempt}/"


def manifest(job: str, run_id: str, attempt: int) -> str:
    return f"{attempt_prefix(job, run_id, attempt)}manifest.json"


def hardware(job: str, run_id: str, attempt: int) -> str:
    return f"{attempt_prefix(job, run_id, attempt)}hardware.json"


def logs(job: str, run_id: str, attempt: int) -> str:
    return f"{attempt_prefix(job, run_id, attempt)}logs.txt"


def log_part(job: str, run_id: str, attempt: int, offset: int) -> str:
    """The live piece of logs.txt that starts at byte `offset` (the runner's name: 15 digits)."""
    return f"{log_parts(job, run_id, attempt)}{offset:015d}.txt"


def log_parts(job: str, run_id: str, attempt: int) -> str:
    """The folder of an attempt's live log parts."""
    return f"{attempt_prefix(job, run_id, attempt)}logs/"


# The runner's part name: 15 ASCII digits. The attempt's own token writes anything in that folder,
# and str.isdigit() is true of characters int() refuses (a superscript two), so names are matched,
# never tested with isdigit().
_PART_NAME = re.compile(r"([0-9]{15})\.txt")


def log_part_offset(name: str, folder: str) -> int | None:
    """The byte offset of the live log part `name` in `folder` (a log_parts folder); None for any
    other name there (whatever the job wrote in it)."""
    if not name.startswith(folder):
        return None
    found = _PART_NAME.fullmatch(name, len(folder))
    return int(found.group(1)) if found else None


def results_prefix(job: str, run_id: str, attempt: int) -> str:
    return f"{attempt_prefix(job, run_id, attempt)}results/"


def checkpoint_prefix(job: str, run_id: str) -> str:
    return f"{run_prefix(job, run_id)}checkpoint/"


def checkpoint_archive(job: str, run_id: str) -> str:
    return f"{checkpoint_prefix(job, run_id)}checkpoint.tar"


def job_prefix(job: str) -> str:
    return f"{RUNS}{job}/"


TOKENS = "tokens/"


def accepted_token(digest: str) -> str:
    return f"{TOKENS}{digest}"


LIMITS = "limits/"


def usage_day(day: str) -> str:
    """Every admission and settlement of the UTC day `day` (YYYY-MM-DD): one listing reads the day."""
    return f"{LIMITS}{day}/"


def usage_admitted(day: str, vm: str, at: int, gpus: int, hours: float, *, manual: bool = False) -> str:
    """An admission; its facts are in its name so a listing reads them all. `at`: epoch seconds;
    `manual`: a manual run's (held to the limits' manual share), marked by a last field `m`."""
    return f"{usage_day(day)}admitted/{vm}~{at}~{gpus}~{hours:.6f}" + ("~m" if manual else "")


def usage_used(day: str, vm: str, hours: float) -> str:
    return f"{usage_day(day)}used/{vm}~{hours:.6f}"


INDEX_PAGE = "index.html"

LIVE = "live/"
PRUNED = "pruned/"
SEPARATOR = "~"  # in no job name, run id, zone or VM name

DEPLOYED = "deployed/"

# One object, rewritten whole by each refresh: a start reads it once and never waits on the API.
ADVICE = "advice/spot.json"


def deployed_spec(job: str) -> str:
    """The spec start_job trusts for `job`: written by deploy (or `up`), never by a VM."""
    return f"{DEPLOYED}{job}.json"


DIGESTS = "digests/"


def deployed_digest(job: str, digest: str) -> str:
    """Marks `digest` as once deployed for `job`: written with the spec, before it, never by a VM."""
    return f"{DIGESTS}{job}/{digest}"


def deployed_since(job: str, digest: str) -> str:
    """Since when `job`'s schedule, time zone and pause are what the spec `digest` says (an ISO
    time, or empty: the object's own time): a deploy that leaves them alone carries it forward."""
    return f"{DIGESTS}{job}/{digest}.since"


DISPATCH_CURSOR = "dispatch/cursor.json"


def parse_record_name(name: str) -> tuple[str, str] | None:
    """(job, run_id) for `runs/JOB/RUN/run.json`, else None."""
    parts = name.split("/")
    if len(parts) == 4 and parts[0] == "runs" and parts[3] == "run.json":
        return parts[1], parts[2]
    return None


def pruned_marker(job: str, *, manual: bool = False) -> str:
    return f"{PRUNED}{job}{SEPARATOR}manual" if manual else f"{PRUNED}{job}"
