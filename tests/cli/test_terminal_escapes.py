"""What a job named is printed as text, never as terminal control.

Before: a result file named with ESC sequences (`\\x1b[2J`, `\\x1b]8;;...`) was printed raw by
`spotcron results`, clearing or rewriting lines on the operator's screen; the same held for a
run's reason in tables and for error messages naming such a file.
"""

from __future__ import annotations

from datetime import timedelta

from spotcron.present.neutral import printable
from tests.cli.conftest import NOW, make_record

HOUR = timedelta(hours=1)
HOSTILE = "ok.txt\x1b[2J\x1b[1;1Hall good\x1b]8;;https://evil.example\x07click\x1b]8;;\x07\r\u202eexe.txt"


def _no_control(text: str) -> None:
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text and "\u202e" not in text, repr(text)


def test_results_prints_a_hostile_file_name_as_text(invoke, bucket):
    bucket.add(make_record("bench", "r1", created=NOW - HOUR))
    bucket.results("bench", "r1", 1, {HOSTILE: b"x"})
    result = invoke("results", "bench/r1")
    assert result.exit_code == 0, result.output
    _no_control(result.stdout)
    assert "\\x1b[2J" in result.stdout  # shown, escaped


def test_results_without_a_manifest_prints_hostile_names_as_text(invoke, bucket):
    bucket.add(make_record("bench", "r1", "failed", created=NOW - HOUR, exit_code=1))
    bucket.results("bench", "r1", 1, {HOSTILE: b"x"}, manifest=False)
    result = invoke("results", "bench/r1")
    _no_control(result.stdout)


def test_a_reason_with_escapes_prints_as_text_in_runs(invoke, bucket):
    bucket.add(make_record("bench", "r1", "failed", created=NOW - HOUR, exit_code=1,
                           reason="metrics problem: \x1b[2Jgone"))
    result = invoke("runs")
    _no_control(result.stdout)
    assert "\\x1b[2Jgone" in result.stdout


def test_an_error_naming_a_hostile_file_prints_as_text(invoke, bucket):
    bucket.add(make_record("bench", "r1", created=NOW - HOUR))
    bucket.results("bench", "r1", 1, {HOSTILE: b"x"})
    result = invoke("results", "bench/r1", "--cat", "ok.txt\x1b[2J")
    assert result.exit_code != 0
    _no_control(result.stderr if hasattr(result, "stderr") else result.output)


def test_printable_keeps_text_and_escapes_controls():
    assert printable("plots/loss.csv") == "plots/loss.csv"
    assert printable("a\x1bb\u202ec") == "a\\x1bb\\u202ec"
    assert printable("one\ntwo\x1b", lines=True) == "one\ntwo\\x1b"
