"""`results` and `logs` take JOB/ENTRY (a matrix entry's latest run), as `runs JOB/ENTRY` does."""

from __future__ import annotations

from datetime import timedelta

from tests.cli.conftest import NOW, make_record

HOUR = timedelta(hours=1)


def two_entries(bucket) -> None:
    for tick, hours in (("20260302-0800", 4), ("20260302-1000", 2)):
        for entry in ("small", "large"):
            bucket.add(make_record("mybench", f"{tick}-{entry}", variant=entry, created=NOW - hours * HOUR))
            bucket.logs("mybench", f"{tick}-{entry}", 1, f"{entry} at {tick}\n")


def test_logs_of_an_entry_is_its_latest_run_and_says_which(invoke, bucket):
    two_entries(bucket)
    for words in (("mybench/small",), ("mybench", "small"), ("small", "--job", "mybench")):
        result = invoke("logs", *words)
        assert result.exit_code == 0, result.output
        assert result.stdout == "small at 20260302-1000\n"
        assert result.stderr.startswith("mybench/small: its latest run, mybench/20260302-1000-small (succeeded)")


def test_results_of_an_entry_is_its_latest_run(invoke, bucket):
    two_entries(bucket)
    result = invoke("results", "mybench/large")
    assert result.exit_code == 0, result.output
    assert "mybench/20260302-1000-large" in result.stderr


def test_an_unknown_entry_or_job_says_what_exists(invoke, bucket):
    two_entries(bucket)
    bucket.add(make_record("hello-bot", "20260302-0900", created=NOW - 3 * HOUR))
    result = invoke("logs", "mybench/smal")
    assert result.exit_code == 2
    assert "no runs of mybench/smal in" in result.stderr and "did you mean 'small'?" in result.stderr
    result = invoke("results", "mybench/tiny")
    assert result.exit_code == 2 and "its entries: large, small" in result.stderr
    result = invoke("results", "hello-bot/small")
    assert result.exit_code == 2 and "job hello-bot has no matrix" in result.stderr
    result = invoke("logs", "mybenhc/small")
    assert result.exit_code == 2 and "no runs of job 'mybenhc'" in result.stderr
    result = invoke("logs", "mybench/20260302-0900-small")
    assert result.exit_code == 2 and "no run mybench/20260302-0900-small" in result.stderr
