"""`spotcron results` of a run that never ran its job says it was skipped and why, not "no manifest
… the upload did not complete"; a cancelled run's missing manifest says it was cancelled."""

from __future__ import annotations

import json
from datetime import timedelta

from tests.cli.conftest import NOW, make_attempt, make_record

GPU = ("not run on this host: the configuration asks for nvidia-tesla-t4 x1, and this host has no NVIDIA GPU "
       "(nvidia-smi lists none); not run on the CPU")


def test_a_host_skipped_run_says_it_was_skipped_and_why(invoke, bucket):
    # As main recorded it before: an attempt whose VM found no GPU (outcome unavailable).
    attempt = make_attempt("bench", "20260302-1000-t4", start=NOW - timedelta(minutes=50), outcome="unavailable",
                           exit_code=None)
    bucket.add(make_record("bench", "20260302-1000-t4", "skipped", created=NOW - timedelta(hours=1),
                           attempts=(attempt,), reason=GPU, variant="t4"))
    result = invoke("results", "bench/20260302-1000-t4")
    assert result.exit_code == 0, result.output
    flat = " ".join(result.stdout.split())
    assert f"no results for bench/20260302-1000-t4: it was skipped: {GPU}. Its job never ran, so no upload is " \
           "expected." in flat
    assert "did not complete" not in flat and "no manifest" not in flat
    listing = json.loads(invoke("results", "bench/20260302-1000-t4", "--json").stdout)
    assert listing["source"] == "skipped" and listing["files"] == []


def test_a_run_skipped_before_any_attempt_is_no_error(invoke, bucket):
    bucket.add(make_record("bot", "20260302-1100", "skipped", created=NOW - timedelta(hours=1), attempts=(),
                           reason="forbidden: the previous run is still running"))
    result = invoke("results", "bot/20260302-1100")
    assert result.exit_code == 0, result.output
    assert "it was skipped: forbidden: the previous run is still running" in " ".join(result.stdout.split())
    cat = invoke("results", "bot/20260302-1100", "--cat", "metrics.json")
    assert cat.exit_code != 0 and "it has no metrics.json" in " ".join(cat.output.split())


def test_a_cancelled_run_without_a_manifest_says_it_was_cancelled(invoke, bucket):
    bucket.add(make_record("bench", "r2", "cancelled", created=NOW - timedelta(hours=1),
                           reason="spotcron up got SIGINT: cancelled"))
    result = invoke("results", "bench/r2")
    flat = " ".join(result.stdout.split())
    assert "no manifest for bench/r2 attempt 1 (cancelled): it was cancelled before its upload completed " \
           "(spotcron up got SIGINT: cancelled)" in flat
