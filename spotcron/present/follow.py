"""Following runs to their end: `logs --follow` for one run, `run --follow` (locally and with
--cloud) for every run a start made, each printing the output as it reaches the bucket.

Everything outside arrives as an argument: how to read the records, the bucket, how to wait, and
where text goes. The command supplies the real ones; a test supplies an in-memory bucket and a
`sleep` that moves the runs on, so nothing here sleeps or reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spotcron.core.errors import SpotcronError
from spotcron.core.runs import RunState
from spotcron.present.logs import RunOutput
from spotcron.present.neutral import printable
from spotcron.present.notes import ended_words, metrics_note
from spotcron.present.views import pick_attempt, took_text

if TYPE_CHECKING:
    from spotcron.core.runs import RunRecord
    from spotcron.engine.ports import Blobs

Write = Callable[[str], None]


def _nothing(_: object) -> None:
    pass


# --- one run: logs --follow --------------------------------------------------------------------


def follow_run(read: Callable[[str, str], RunRecord | None], blobs: Blobs, output: RunOutput, *, where: str,
               write: Write, sleep: Callable[[], None], waiting: Write = _nothing) -> RunRecord:
    """Write `output`'s run's output as it reaches `blobs` until the run has ended; its ended record.

    `read(job, run_id)` gives the record at each poll; `sleep()` waits between polls, while
    `waiting` has a line saying so. An attempt asked for that the ended run never had is an error.
    """
    ended_seen = False
    while True:
        record = read(output.job, output.run_id)
        if record is None:
            raise SpotcronError(f"run {output.job}/{output.run_id} disappeared from {where} (pruned?)")
        write(output.poll(blobs, record))
        if record.terminal and not ended_seen:
            # One more look once the run has ended: the last upload may have landed between
            # this poll's log read and its record read, or a reader may lag by one write.
            ended_seen = True
            continue
        if record.terminal:
            if output.attempt is not None:
                pick_attempt(record, output.attempt)  # an attempt that will never come is an error
            write(output.finish())
            return record
        waiting(f"{output.job}/{output.run_id} is {record.state}; waiting for more output…")
        sleep()


def ended_line(output: RunOutput, record: RunRecord) -> str:
    """`JOB/RUN ended STATE: REASON`, saying when the run printed nothing."""
    # A reason may quote what a job wrote (its problem, metrics.json): never a terminal escape.
    ended = record.state + (f": {printable(record.reason)}" if record.reason else "")
    if record.state == RunState.SUCCEEDED and metrics_note(record):
        ended += f", but {printable(metrics_note(record))}"
    return f"{output.job}/{output.run_id} ended {ended}" + ("" if output.printed_any else " (no logs)")


# --- the runs of one start: run --follow -------------------------------------------------------


class Streams:
    """Each run's output to `write` as it reaches the bucket, then a line per run's outcome.

    Several runs (a matrix) share one stream: each line then says whose it is. `notice` gets the
    lines about the stream itself (the next attempt starts), `report` the outcome lines.
    """

    def __init__(self, timestamps: bool, *, write: Write, notice: Write = _nothing, report: Write = _nothing):
        self.timestamps = timestamps
        self.write, self.notice, self.report = write, notice, report
        self.outputs: dict[tuple[str, str], RunOutput] = {}

    def start(self, started: Sequence[tuple[str, str]]) -> None:
        several = len(started) > 1
        for job, run_id in started:
            self.outputs[(job, run_id)] = RunOutput(
                job, run_id, label=run_id if several else "", timestamps=self.timestamps,
                notice=lambda text, run=run_id: self.notice(f"{run}: {text}"))

    def poll(self, blobs: Blobs, records: Sequence[RunRecord]) -> None:
        for record in records:
            output = self.outputs.get((record.job, record.run_id))
            if output is not None:
                self.write(output.poll(blobs, record))

    def outcome(self, records: Sequence[RunRecord]) -> int:
        """The last of the output, a line per run, and the exit status: the job's code."""
        for output in self.outputs.values():
            self.write(output.finish())
        for record in records:
            code = f", exit {record.exit_code}" if record.exit_code is not None else ""
            # The work's time as `runs` says it, and a local run's wait for its turn beside it.
            took = f" in {took_text(record, None)}" if record.duration_seconds is not None else ""
            self.report(f"{record.job}/{record.run_id} {record.state}{took}{code}{ended_words(record)}")
        unfinished = len(records) < len(self.outputs) or any(not r.terminal for r in records)
        failed = [r for r in records if r.state != RunState.SUCCEEDED]
        if not failed and not unfinished:
            return 0
        codes = [r.exit_code for r in failed if r.exit_code]
        return codes[0] if codes else 1


@dataclass(frozen=True)
class Followed:
    records: list[RunRecord]
    ended: bool  # every run ended; else the wait gave up
    waited_s: float


def wait_for_runs(read: Callable[[], list[RunRecord]], count: int, *, sleep: Callable[[float], None],
                  every_s: float, limit_s: float, waited_s: float = 0.0,
                  poll: Callable[[list[RunRecord]], None] = _nothing,
                  waiting: Callable[[list[RunRecord]], None] = _nothing) -> Followed:
    """Read the runs' records every `every_s` seconds until all `count` have ended, or until
    `limit_s` seconds have been waited (counting the `waited_s` already spent).

    `poll` gets each read's records, and the ended ones once more (what the last upload added);
    `waiting` gets them before each wait.
    """
    waited = waited_s
    while True:
        records = read()
        poll(records)
        if len(records) == count and all(r.terminal for r in records):
            poll(records)
            return Followed(records, True, waited)
        if waited >= limit_s:
            return Followed(records, False, waited)
        waiting(records)
        sleep(every_s)
        waited += every_s
