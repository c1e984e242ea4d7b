"""What a job wrote reaches every terminal line as text: `up`'s run-end lines, `run --follow`'s
outcome and labelled output, and the helpers they share (present/neutral.line_text, output_text).

A reason may carry what a container posted as its `problem` (any characters); a log is whatever
the job printed. ESC (7-bit or the C1 CSI/OSC characters), BEL, a lone carriage return or a
backspace would move the cursor, clear the screen, plant an OSC 8 link or write the clipboard.
"""

from __future__ import annotations

from datetime import timedelta

from spotcron.core.runs import RunState
from spotcron.present.follow import Streams
from spotcron.present.live import ended_detail, log_line
from spotcron.present.logs import RunOutput
from spotcron.present.neutral import line_text, output_text, printable
from spotcron.present.notes import ended_words, run_note
from spotcron.present.progress import outcome_lines
from tests.cli.conftest import NOW, Bucket, make_record

HOSTILE = "gpu\x1b[2J\x1b[1;1Hall good\x1b]8;;https://evil.example\x07click\x1b]8;;\x07"
CONTROLS = "\x1b\x07\x9b\x9d\r\x08"


def _no_control(text: str) -> None:
    assert not any(c in text for c in CONTROLS), repr(text)


def test_spotcron_ups_run_end_line_shows_the_reason_as_text():
    record = make_record("bench", "r1", "skipped", created=NOW - timedelta(hours=1),
                         reason=f"not run on this host: {HOSTILE}")
    line = log_line(NOW, "bench/r1", "skipped", ended_detail(record, {})).plain
    _no_control(line)
    assert "not run on this host: gpu\\x1b[2J" in line


def test_an_events_reason_and_any_detail_given_to_log_line_print_as_text():
    assert "\x1b" not in ended_detail(None, {"reason": HOSTILE})
    _no_control(log_line(NOW, "bench/r1\x1b[2J", "queued", f"waiting\n{HOSTILE}").plain)


def test_every_reason_word_of_notes_is_one_printable_line():
    record = make_record("bench", "r1", "failed", created=NOW, exit_code=1, reason=f"exit\n  1 \x9b2J{HOSTILE}")
    for words in (ended_words(record), run_note(record), *outcome_lines([record], NOW)):
        _no_control(words)
        assert "\n" not in words


def test_run_follow_outcome_and_labelled_output_print_as_text():
    bucket, written, reports = Bucket(), [], []
    for run_id in ("r-a", "r-b"):
        bucket.add(make_record("bot", run_id, "running", created=NOW - timedelta(minutes=1)))
        bucket.logs("bot", run_id, 1, f"{HOSTILE}\n")
    streams = Streams(False, write=written.append, report=reports.append)
    streams.start([("bot", "r-a"), ("bot", "r-b")])
    for run_id in ("r-a", "r-b"):
        bucket.store.update("bot", run_id, lambda r: r.with_state(RunState.FAILED, NOW, reason=HOSTILE, exit_code=1))
    records = [bucket.store.read("bot", "r-a"), bucket.store.read("bot", "r-b")]
    streams.poll(bucket.blobs, records)
    assert streams.outcome(records) == 1
    _no_control("".join(written) + "".join(reports))
    assert "r-a | gpu\\x1b[2J" in "".join(written)


def test_run_output_holds_a_carriage_return_until_it_knows_it_ends_a_line():
    bucket = Bucket()
    bucket.add(make_record("bot", "r1", "running", created=NOW - timedelta(minutes=1)))
    output = RunOutput("bot", "r1")
    bucket.logs("bot", "r1", 1, "one\r")
    first = output.poll(bucket.blobs, bucket.store.read("bot", "r1"))
    bucket.logs("bot", "r1", 1, "one\r\ntwo\rthree")
    rest = output.poll(bucket.blobs, bucket.store.read("bot", "r1")) + output.finish()
    assert first + rest == "one\ntwo\\x0dthree"


def test_raw_run_output_is_the_jobs_text():
    bucket = Bucket()
    bucket.add(make_record("bot", "r1", "running", created=NOW - timedelta(minutes=1)))
    bucket.logs("bot", "r1", 1, f"{HOSTILE}\r\n")
    output = RunOutput("bot", "r1", raw=True)
    assert output.poll(bucket.blobs, bucket.store.read("bot", "r1")) + output.finish() == f"{HOSTILE}\r\n"


def test_output_text_keeps_lines_tabs_and_letters_and_escapes_every_other_control():
    assert output_text("epoch\tloss\r\n1\t0.5 é ✓ 中文\n") == "epoch\tloss\n1\t0.5 é ✓ 中文\n"
    assert output_text("a\x1b[31mb\x9b2J\x07\x7f\x00\u202e") == "a\\x1b[31mb\\x9b2J\\x07\\x7f\\x00\\u202e"
    assert output_text(output_text(HOSTILE)) == output_text(HOSTILE) == printable(HOSTILE)


def test_line_text_squeezes_whitespace_and_escapes_controls():
    assert line_text("not run\n   on this host:\t\x1b[2J") == "not run on this host: \\x1b[2J"
    assert line_text(None) == ""
