"""What the results commands show, as plain data: table rows, JSON, sizes, durations, costs.

Pure: records and bucket listings in, strings out. `now` is passed in, nothing reads the clock,
the environment or the terminal, so every cell can be tested without click or rich.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import PurePosixPath

from spotcron.core.durations import format_duration
from spotcron.core.errors import SpotcronError
from spotcron.core.runs import RunRecord, RunState
from spotcron.cost.local_wait import waited_seconds, work_cost_usd
from spotcron.engine.ports import Instance
from spotcron.engine.store import run_sort_key
from spotcron.present.notes import run_note

UNKNOWN = "-"

# rich style per run state; the same families of colour as the results page.
STATE_STYLES: Mapping[str, str] = {
    RunState.SUCCEEDED: "green", RunState.FAILED: "red", RunState.TIMED_OUT: "red", RunState.LOST: "red",
    RunState.PREEMPTED: "yellow", RunState.SKIPPED: "yellow", RunState.CANCELLED: "yellow",
    RunState.SCHEDULED: "cyan", RunState.STARTING: "cyan", RunState.RUNNING: "cyan", RunState.QUEUED: "magenta",
}

RUN_COLUMNS = ("job", "run", "status", "attempts", "started (UTC)", "duration", "zone / machine", "cost",
               "exit", "reason")


# --- cells -------------------------------------------------------------------------------------


TINY_USD = 1e-7


def run_cost_text(record: RunRecord) -> str:
    """The run's cost as `runs`, `run --follow` and the page show it: `$0.0893`; `$0.000019 call`
    for a run that ended without a VM (skipped, cancelled while it waited), whose whole cost is
    the start_job call that handled it (docs/cost.md), so no one reads it as a VM's; `-` while
    unknown."""
    cost = work_cost_usd(record)
    text = format_usd(cost)
    return f"{text} call" if record.terminal and not record.had_vm and cost else text


def format_usd(value: float | None) -> str:
    """Dollars, wherever people read them: $12.35, $0.0508, $0.00022, $0; '-' when not known (yet).

    Cents for dollars, four decimals for cents, two significant digits below a tenth of a cent,
    always in plain decimals (never 8.2e-05); below a ten-millionth of a dollar, `<$0.0000001`."""
    if value is None:
        return UNKNOWN
    if value >= 1:
        return f"${value:,.2f}"
    if value >= 0.001:
        return f"${value:.4f}"
    if value <= 0:
        return "$0"
    if value < TINY_USD:
        return f"<${TINY_USD:.7f}"
    return f"${value:.{1 - math.floor(math.log10(value))}f}".rstrip("0")  # as .2g did: $0.0001, not $0.00010


def format_time(at: datetime | None) -> str:
    """`2026-11-22 10:00` in UTC; a naive time is taken as UTC, one that is no UTC time shown as is."""
    if at is None:
        return UNKNOWN
    try:
        return (at if at.tzinfo is None else at.astimezone(UTC)).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, ValueError):
        return at.isoformat()


def format_age(seconds: float) -> str:
    return format_duration(max(0.0, seconds))


def format_size(size: int | None) -> str:
    """Bytes for humans: 512 B, 1.5 KB, 3.2 MB (powers of 1024)."""
    if size is None:
        return UNKNOWN
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def one_line(text: str | None) -> str:
    """The whole of `text` on one line (a table cell): runs of whitespace and newlines become one space."""
    return " ".join((text or "").split())


def job_key(record: RunRecord) -> str:
    return f"{record.job}/{record.variant}" if record.variant else record.job


def started_at(record: RunRecord) -> datetime:
    """When the work started: the first container start, else when the run was created."""
    starts = [a.started_at for a in record.attempts if a.started_at]
    return min(starts) if starts else record.created_at


def work_seconds(record: RunRecord) -> float | None:
    """An ended run's work time: first container start to last container end. A container cut
    off before it ended (the run cancelled, lost or timed out) counts until its VM was deleted,
    else until the run ended. None when no container started."""
    seconds = record.duration_seconds
    if seconds is not None or not record.terminal:
        return seconds
    starts = [a.started_at for a in record.attempts if a.started_at]
    if not starts:
        return None
    ends = [a.deleted_at for a in record.attempts if a.deleted_at] or [record.updated_at]
    return max(0.0, (max(ends) - min(starts)).total_seconds())


def duration_text(record: RunRecord, now: datetime | None) -> str:
    """The run's work time (`work_seconds`), the same in every table and on the page: as the
    runner measured it, or, for a container cut off before it reported, at most until its VM
    went, marked `≤`; for a live run, the time since its container started, marked `+` (unknown
    without `now`)."""
    if record.terminal:
        seconds = work_seconds(record)
        if seconds is None:
            return UNKNOWN
        return format_duration(seconds) if record.duration_seconds is not None else "≤" + format_duration(seconds)
    starts = [a.started_at for a in record.attempts if a.started_at]
    if starts and now is not None:
        return format_duration(max(0.0, (now - min(starts)).total_seconds())) + "+"
    return UNKNOWN


def took_text(record: RunRecord, now: datetime | None, short: bool = False) -> str:
    """`2s (waited 38s for its turn)`: the run's work time (`duration_text`) and, for a local run that
    waited for its turn on the host (or its GPUs), that wait, which its time and cost leave out
    (cost/local_wait.py). `short` says `(waited 38s)`, for a table's column."""
    text = duration_text(record, now)
    waited = waited_seconds(record)
    if waited and round(waited) >= 1:  # "waited 0s" says nothing
        text += f" (waited {format_duration(waited)}{'' if short else ' for its turn'})"
    return text


def gpu_text(gpu: str) -> str:
    """`nvidia-tesla-t4 x1` → `t4 x1`: the model is what tells runs apart."""
    return gpu.removeprefix("nvidia-tesla-").removeprefix("nvidia-")


def machine_text(record: RunRecord) -> str:
    """`us-central1-a n1-standard-1 SPOT` (+ GPU) of the latest attempt; the spec's machine before one."""
    attempt = record.current_attempt
    if attempt is not None:
        parts = [attempt.zone or "?", attempt.machine_type, attempt.provisioning_model]
        if attempt.gpu:
            parts.append(f"+ {gpu_text(attempt.gpu)}")
        return " ".join(parts)
    machine = (record.spec or {}).get("machine") or {}
    if isinstance(machine, dict) and machine.get("type"):
        return f"{machine['type']} {'SPOT' if machine.get('spot', True) else 'STANDARD'}"
    return UNKNOWN


# --- the runs table ----------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRow:
    job: str
    run: str
    status: str
    attempts: str
    started: str
    duration: str
    machine: str
    cost: str
    exit_code: str
    reason: str

    @property
    def status_style(self) -> str:
        return STATE_STYLES.get(self.status, "")

    def cells(self) -> tuple[str, ...]:
        return (self.job, self.run, self.status, self.attempts, self.started, self.duration, self.machine,
                self.cost, self.exit_code, self.reason)

# What a narrow terminal leaves out first; job, run, status and cost always stay.
DROP_ORDER = ("reason", "attempts", "zone / machine", "started (UTC)", "exit", "duration")
COLUMN_GAP = 2


def fit_columns(widths: Mapping[str, int], available: int, drop_order: Sequence[str] = DROP_ORDER,
                gap: int = COLUMN_GAP) -> list[str]:
    """The columns (in order) that fit in `available` characters, `gap` between two: whole ones
    are dropped, in `drop_order`, and no cell is ever cut. Columns not in `drop_order` always stay."""
    shown = list(widths)
    dropping = [c for c in drop_order if c in widths]

    def needed(columns: list[str]) -> int:
        return sum(widths[c] for c in columns) + gap * (len(columns) - 1)

    while needed(shown) > available and dropping:
        shown.remove(dropping.pop(0))
    return shown


def run_row(record: RunRecord, now: datetime) -> RunRow:
    return RunRow(
        job=job_key(record),
        run=record.run_id,
        status=record.state,
        attempts=str(len(record.attempts)),
        started=format_time(started_at(record)),
        duration=took_text(record, now, short=True),
        machine=machine_text(record),
        cost=run_cost_text(record),
        exit_code=UNKNOWN if record.exit_code is None else str(record.exit_code),
        reason=one_line(run_note(record)),  # the metrics.json problems of a run that succeeded too
    )


def newest_first(records: Iterable[RunRecord]) -> list[RunRecord]:
    return sorted(records, key=lambda r: (r.created_at, run_sort_key(r.run_id), r.job), reverse=True)


def newest_ids(pairs: Iterable[tuple[str, str]], limit: int | None) -> list[tuple[str, str]]:
    """The `limit` newest (job, run_id) by run id time, so only those records need reading."""
    ordered = sorted(pairs, key=lambda p: (run_sort_key(p[1]), p[0]), reverse=True)
    return ordered if not limit else ordered[:limit]


def records_json(records: Sequence[RunRecord]) -> str:
    """What `spotcron runs --json` prints: a JSON list of run records."""
    return json.dumps([r.model_dump(mode="json") for r in records], indent=2)


# --- live runs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveRow:
    job: str
    run: str
    status: str
    attempt: str
    vm: str
    machine: str
    age: str
    deadline: str

    def cells(self) -> tuple[str, ...]:
        return (self.job, self.run, self.status, self.attempt, self.vm, self.machine, self.age, self.deadline)


LIVE_COLUMNS = ("job", "run", "status", "attempt", "vm", "zone / machine", "age", "deadline")
LIVE_DROP_ORDER = ("vm", "zone / machine", "attempt", "age")


def deadline_text(deadline: datetime | None, now: datetime) -> str:
    """`in 4m10s`, or `passed 2m00s ago` (the sweep deletes such a VM)."""
    if deadline is None:
        return UNKNOWN
    seconds = (deadline - now).total_seconds()
    return f"in {format_age(seconds)}" if seconds >= 0 else f"passed {format_age(-seconds)} ago"


def live_row(record: RunRecord, now: datetime) -> LiveRow:
    attempt = record.current_attempt
    return LiveRow(
        job=job_key(record), run=record.run_id, status=record.state,
        attempt=str(attempt.number) if attempt else UNKNOWN,
        vm=attempt.vm_name if attempt else UNKNOWN,
        machine=machine_text(record),
        age=format_age((now - record.created_at).total_seconds()),
        deadline=deadline_text(record.deadline, now),
    )


# --- the project's VMs -------------------------------------------------------------------------


@dataclass(frozen=True)
class VmRow:
    """A VM labelled spotcron=1; `tracked` when its run is in progress (else the sweep deletes it)."""

    cells: tuple[str, ...]
    tracked: bool

    @property
    def styles(self) -> Mapping[str, str]:
        return {} if self.tracked else {"run": "yellow"}


VM_COLUMNS = ("vm", "zone", "status", "machine", "age", "run")
VM_DROP_ORDER = ("machine", "age", "zone")


def vm_rows(instances: Iterable[Instance], live: Set[tuple[str, str]], now: datetime) -> list[VmRow]:
    """One row per VM, oldest first; `live` holds the (job, run) pairs in progress."""
    rows = []
    for vm in sorted(instances, key=lambda i: i.created_at):
        job, run_id = vm.labels.get("job", "?"), vm.labels.get("run", "?")
        tracked = (job, run_id) in live
        rows.append(VmRow((vm.name, vm.zone, vm.status, f"{vm.machine_type} {vm.provisioning_model}",
                           format_age((now - vm.created_at).total_seconds()),
                           f"{job}/{run_id}" + ("" if tracked else " (run not in progress)")), tracked))
    return rows


# --- run references ----------------------------------------------------------------------------


def parse_run_ref(ref: str, job: str | None) -> tuple[str | None, str]:
    """`JOB/RUN`, `JOB/VARIANT/RUN` (the runs table's job and run columns, copied together; a
    space stands for the last slash) or a bare `RUN` (with `--job JOB`) → (job or None, run id)."""
    from spotcron.core.runs import of_variant

    text = "/".join(ref.split()).strip("/")
    parts = text.split("/")
    if len(parts) > 3 or not all(parts) or len(parts) == 3 and _variant_of(parts[2]) is None:
        raise SpotcronError(f"{ref!r} is not a run; write RUN (e.g. 20261122-1000) or JOB/RUN "
                            f"(e.g. hello-bot/20261122-1000), as `spotcron runs` lists them")
    if len(parts) == 3:
        ref_job, variant, run_id = parts
        if not of_variant(run_id, variant):
            raise SpotcronError(f"{run_id} is a run of {ref_job}/{_variant_of(run_id)}, not {ref_job}/{variant}; "
                                f"write {ref_job}/{run_id}")
        parts = [ref_job, run_id]
    if len(parts) == 2:
        ref_job, run_id = parts
        if job and job != ref_job:
            raise SpotcronError(f"{ref!r} names job {ref_job!r} but --job says {job!r}; give the job once")
        return ref_job, run_id
    if not text:
        raise SpotcronError("the run is empty; write RUN or JOB/RUN as `spotcron runs` lists them")
    return job, text


def _variant_of(run_id: str) -> str | None:
    """The matrix entry a run id names (its suffix without a repeat's `-rN`), or None."""
    import re

    from spotcron.core.runs import tick_of

    rest = run_id[len(tick_of(run_id)) + 1:]
    return re.sub(r"^r\d+$|-r\d+$", "", rest) or None


def pick_match(run_id: str, matches: Sequence[str], where: str) -> str:
    """The one job among `matches` holding `run_id`; errors list the choices."""
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise SpotcronError(f"no run {run_id!r} in {where}; `spotcron runs` lists the runs there")
    listed = ", ".join(f"{job}/{run_id}" for job in sorted(matches))
    raise SpotcronError(f"run id {run_id!r} exists in {len(matches)} jobs: {listed}; write JOB/RUN or pass --job")


def pick_attempt(record: RunRecord, number: int | None) -> int:
    """The attempt to show: `number` when the run has it, else the latest."""
    known = [a.number for a in record.attempts]
    if number is None:
        if not known:
            raise SpotcronError(f"run {record.job}/{record.run_id} has no attempt yet (it is {record.state}"
                                f"{': ' + record.reason if record.reason else ''})")
        return known[-1]
    if number not in known:
        have = ", ".join(map(str, known)) if known else "none yet"
        raise SpotcronError(f"run {record.job}/{record.run_id} has no attempt {number}; its attempts: {have}")
    return number


# --- results -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResultFile:
    """One file of a run's results; `name` is relative to the attempt's results/ folder."""

    name: str
    size: int | None = None
    sha256: str | None = None

    def cells(self) -> tuple[str, str, str]:
        return (self.name, format_size(self.size), self.sha256[:16] if self.sha256 else UNKNOWN)


RESULT_COLUMNS = ("file", "size", "sha256")
RESULTS_FOLDER = "results/"  # inside attempt-N/, as in spotcron.core.layout.results_prefix


def manifest_files(data: bytes, where: str, under: str = RESULTS_FOLDER) -> list[ResultFile]:
    """The files a manifest lists under `under`, named relative to it.

    The runner's manifest names every object of the attempt relative to the attempt folder
    (`logs.txt`, `results/metrics.json`): {"files": [{"name", "size", "sha256"}, ...]}. Entries
    spelled {"path", "bytes"} or as plain strings are read too.
    """
    from spotcron.core.jobdata import MANIFEST_MAX_BYTES, JobDataProblem, load_job_json

    try:
        manifest = load_job_json(data, where, max_bytes=MANIFEST_MAX_BYTES)  # a job may have rewritten it
    except JobDataProblem as problem:
        raise SpotcronError(f"{problem}; the upload may be corrupt or rewritten by the job") from None
    files = manifest.get("files") if isinstance(manifest, dict) else None
    if not isinstance(files, list):
        raise SpotcronError(f"{where}: no \"files\" list; expected {{\"files\": [{{\"name\", \"size\", "
                            f"\"sha256\"}}, ...]}}")
    listed = []
    for index, entry in enumerate(files):
        if isinstance(entry, str):
            entry = {"name": entry}
        name = entry.get("name", entry.get("path")) if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise SpotcronError(f"{where}: files[{index}] has no name: {entry!r}")
        if not name.startswith(under):
            continue
        size = entry.get("size", entry.get("bytes"))
        sha = entry.get("sha256")
        listed.append(ResultFile(name[len(under):], _size(size), sha if isinstance(sha, str) else None))
    return sorted(listed, key=lambda f: f.name)


def _size(value: object) -> int | None:
    """A manifest's size as a byte count; None for anything else (1e999, NaN, -1, true, "12")."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value) if value >= 0 else None


def results_json(files: Sequence[ResultFile], source: str, prefix: str) -> str:
    return json.dumps({"source": source, "prefix": prefix,
                       "files": [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in files]}, indent=2)


def safe_relative(name: str) -> PurePosixPath:
    """`name` as a path that stays inside the download folder; SpotcronError when it would not.

    Object names are arbitrary strings: `../x`, `/etc/x` or `a\\..\\x` must never choose where a
    download lands.
    """
    if not name or "\x00" in name or "\\" in name:
        raise SpotcronError(f"refusing to download {name!r}: not a plain relative path")
    path = PurePosixPath(name)
    if path.is_absolute() or any(part in ("..", ".") for part in name.split("/")) or not path.parts:
        raise SpotcronError(f"refusing to download {name!r}: it would be written outside the download folder "
                            f"(absolute paths and '..' are not allowed)")
    return path
