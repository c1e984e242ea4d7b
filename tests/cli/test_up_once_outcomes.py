"""`spotcron up --once`'s last words: in a terminal the live table's last frame shows `failed`
without the exit code or the reason, so the ended runs' reasons are said under it (as a pipe says
them line by line); runs cut off by --timeout are said to be cancelled, with how to let them
finish; skipped runs are beside the success count, not failures. The stack is a hand-written
stand-in: these are the CLI's words, the stack's own behaviour is tests/local's."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

from rich.console import Console

from spotcron.cli.up import _once
from spotcron.core.runs import Attempt, RunRecord
from spotcron.testing.harness import make_spec

T0 = datetime.now(UTC) - timedelta(minutes=1)
GPU_SKIP = "not run on this host: the configuration asks for nvidia-tesla-t4 x1, and this host has no NVIDIA GPU"


def record(job: str, state: str, reason: str | None = None, exit_code: int | None = None) -> RunRecord:
    attempt = Attempt(number=1, vm_name=f"sc-{job}", machine_type="e2-small", created_at=T0,
                      started_at=T0 + timedelta(seconds=1), finished_at=T0 + timedelta(seconds=2))
    return RunRecord(job=job, run_id="m20261127-2000-ab12", state=state, reason=reason, exit_code=exit_code,
                     created_at=T0, updated_at=T0, attempts=(attempt,) if state != "skipped" else ())


class Stack:
    """What `_once` asks of a LocalStack: runs started, a wait that ends with `records`, a stop."""

    def __init__(self, records: list[RunRecord]):
        self.records = records
        self.stopped: list[str] = []

    def run_now(self, spec) -> list[tuple[str, str]]:
        return [(r.job, r.run_id) for r in self.records if r.job == spec.name]

    def wait(self, runs, *, timeout: float, progress=None) -> list[RunRecord]:
        if progress is not None:
            progress(self.records)
        return self.records

    def stop(self, reason: str = "") -> None:
        self.stopped.append(reason)


def once(records: list[RunRecord], *, terminal: bool, timeout: float = 1800.0) -> tuple[int, str, Stack]:
    buffer = io.StringIO()
    out = Console(file=buffer, width=100, force_terminal=terminal, color_system=None, highlight=False)
    stack = Stack(records)
    code = _once(stack, [make_spec(name=r.job) for r in records], timeout, out)
    return code, buffer.getvalue(), stack


RUNS = [record("hello-bot", "succeeded", exit_code=0),
        record("broken", "failed", "the job exited with code 3", exit_code=3),
        record("gpu", "skipped", GPU_SKIP)]


def test_in_a_terminal_each_ended_run_that_did_not_succeed_says_why():
    code, text, _ = once(RUNS, terminal=True)
    assert code == 1
    assert "broken/m20261127-2000-ab12 failed in 1s: the job exited with code 3" in text
    assert f"gpu/m20261127-2000-ab12 skipped: {GPU_SKIP}" in text
    assert "1/2 runs that ran succeeded (1 skipped, not counted)" in text


def test_in_a_pipe_the_same_reasons_and_count():
    code, text, _ = once(RUNS, terminal=False)
    assert code == 1
    assert "broken/m20261127-2000-ab12 failed in 1s: the job exited with code 3" in text
    assert "1/2 runs that ran succeeded (1 skipped, not counted)" in text


def test_skipped_runs_do_not_fail_up_once():
    code, text, _ = once([RUNS[0], RUNS[2]], terminal=False)
    assert code == 0 and "1/1 runs that ran succeeded (1 skipped, not counted)" in text
    assert f"1 run(s) skipped: {GPU_SKIP}\n" in text  # one line in a pipe, however long


def test_runs_cut_off_by_the_timeout_are_said_to_be_cancelled_and_how_to_let_them_finish():
    running = [record(f"bench-{i}", "running") for i in range(4)]
    code, text, stack = once([RUNS[0], *running], terminal=False, timeout=15)
    assert code == 1
    assert stack.stopped and "cancelled" in stack.stopped[0] and "--timeout 15s" in stack.stopped[0]
    flat = " ".join(text.split())
    assert "4 run(s) did not finish within 15s and were cancelled (their local VMs deleted): " \
           "bench-0/m20261127-2000-ab12 (running)" in flat and "and 1 more" in flat
    assert "give them longer with --timeout SECONDS" in flat
    assert "1/1 runs that ran succeeded (4 cancelled, not counted)" in flat
