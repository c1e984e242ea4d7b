"""Defences of a run's lifecycle and its reports against hostile job text and edge cases: web
addresses and e-mail addresses in Markdown, .dockerignore read as docker reads it, invisible
characters on a terminal, bounded pruning per sweep pass, queued manual runs with overrides, and
placement keeping to a job's regions."""

from __future__ import annotations

import io
import json
import re
import tarfile
from datetime import timedelta
from pathlib import Path

import pytest

from spotcron.core import images
from spotcron.core.hardware import Hardware
from spotcron.core.loader import load_job_file
from spotcron.core.spec import Benchmark
from spotcron.cost.prices import load_prices
from spotcron.present import exports
from spotcron.present.neutral import md_text, printable
from spotcron.present.report import benchmark_report
from tests.cli.conftest import NOW, bucket, context, invoke, make_record, sleeps  # noqa: F401 - fixtures
from tests.examples import example
from tests.present.test_report import bench_run


def _names(tar: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        return sorted(archive.getnames())


def _context(root: Path) -> Path:
    folder = root / "images" / "bot"
    folder.mkdir(parents=True)
    (folder / "Dockerfile").write_text("FROM python:3.12-slim\nCOPY . /app\n")
    (folder / "bot.py").write_text("print('hi')\n")
    (folder / ".env").write_text("TOKEN=secret\n")
    return folder


# --- Markdown: an underscore right before a web address leaves no live autolink --------------------

def _unescaped(md: str) -> str:
    # What a Markdown renderer still reads as markup once every escaped character is text
    # (the criterion of tests/present/test_inert_exports.py).
    return re.sub(r"\\.", "_", md)


@pytest.mark.parametrize("text", ["_https://evil.example/pixel", "_www.evil.example", "x_http://evil.example"])
def test_md_text_breaks_a_web_address_after_an_underscore(text):
    # `_AUTOLINK` needs a word boundary before the scheme; `_` is a word character, so `_https://`
    # is left whole. The `_` itself is escaped (`\_`), which ends a text node in CommonMark, and
    # GFM's extended autolink then starts at `https://` (also after `_`, one of its delimiters).
    out = _unescaped(md_text(text))
    assert "://" not in out and "www." not in out, md_text(text)


def test_markdown_report_with_an_underscored_address_has_no_live_link():
    spec = load_job_file(example("dl-benchmark"))
    spec = spec.model_copy(update={"benchmark": Benchmark(base="highcpu-16", time_metric="train_seconds")})
    hostile = Hardware(machine_type="n1-highcpu-16", zone="us-central1-a", cpu_model="_https://evil.example/x",
                       cpus=16, memory_mib=14700)

    def metrics(seconds: float) -> str:
        return json.dumps({"work": {"value": 100, "unit": "_www.evil.example"},
                           "metrics": {"train_seconds": {"value": seconds, "unit": "s"}}})

    runs = [bench_run("highcpu-16", 900, 0, repeat=i, metrics=metrics(800 + i)).model_copy(
        update={"hardware": hostile}) for i in (1, 2, 3)]
    runs += [bench_run("t4", 300, 0, repeat=i, metrics=metrics(250 + i)).model_copy(
        update={"hardware": hostile}) for i in (1, 2, 3)]
    md = exports.markdown(benchmark_report("dl-benchmark", runs, load_prices(), "us-central1", spec=spec))
    assert "evil.example" in md
    unescaped = _unescaped(md)
    assert "://" not in unescaped and "www." not in unescaped


# --- .dockerignore read as docker reads it: the secret stays out ----------------------------------

def test_a_dockerignore_saved_with_a_byte_order_mark_still_excludes_its_first_line(tmp_path):
    # docker (moby's dockerignore.ReadAll) drops a UTF-8 BOM from the first line; read_text with
    # "utf-8" keeps U+FEFF, so the first pattern becomes "\ufeff.env" and matches nothing.
    folder = _context(tmp_path)
    (folder / ".dockerignore").write_bytes("\ufeff.env\n".encode())
    assert ".env" not in _names(images.context_tar(folder))


def test_a_dockerignore_that_is_a_symlink_is_still_honoured(tmp_path):
    # docker reads <context>/.dockerignore with os.Open, following a link (a shared ignore file);
    # dockerignore.read returns no patterns for a link, so everything ships.
    folder = _context(tmp_path)
    (folder / "ignore.txt").write_text(".env\n")
    (folder / ".dockerignore").symlink_to("ignore.txt")
    assert ".env" not in _names(images.context_tar(folder))


# --- Markdown: an e-mail address is no live (mailto:) link --------------------------------------

def test_md_text_leaves_no_email_autolink():
    # GFM's extended autolinks make `user@host.tld` a mailto: link with no scheme at all; `@` is
    # not in _MD_SPECIAL, so a job's unit or hardware string can still plant a link in the report.
    out = md_text("contact admin@evil.example")
    assert "admin@evil" not in _unescaped(out), out


# --- Terminal: every invisible or reordering character is escaped --------------------------------

HIDDEN = {
    "arabic letter mark (bidi)": "\u061c",
    "soft hyphen": "\u00ad",
    "tag characters (invisible text)": "\U000e0069\U000e0067\U000e006e",
    "line separator": "\u2028",
    "interlinear annotation (hides text)": "\ufff9",
    "mongolian vowel separator": "\u180e",
}


@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_printable_escapes_every_invisible_or_reordering_character(name):
    # printable() escapes C0/C1, U+200B-200F, U+202A-202E, U+2060-2069, U+FEFF, but not the other
    # format (Cf) and separator characters: a result file name holding tag characters shows as
    # `ok.txt` on the operator's terminal while naming something else.
    shown = printable(f"ok.txt{HIDDEN[name]}")
    assert shown.isprintable(), repr(shown)


def test_results_prints_a_file_name_with_tag_characters_visibly(invoke, bucket):  # noqa: F811 - fixtures
    bucket.add(make_record("bench", "r1", created=NOW - timedelta(hours=1)))
    bucket.results("bench", "r1", 1, {"ok.txt\U000e0069\U000e0067\U000e006e": b"x"})
    result = invoke("results", "bench/r1")
    assert result.exit_code == 0, result.output
    assert "\U000e0069" not in result.stdout, repr(result.stdout)


# --- Bounded pruning: one budget per job and sweep pass -------------------------------------------

def test_one_sweep_pass_deletes_at_most_one_budget_of_one_jobs_backlog(monkeypatch):
    """Each run end of a job whose pruning is unfinished leaves PRUNE owed on *its own* record
    (PruneIncomplete), so a frequent job piles up owed prunes; the sweep's _finish_ends then calls
    prune once per owed run (up to ENDS_PER_PASS = 100), each with a fresh PRUNE_DELETES budget and
    its own full listing: one pass does up to 100 budgets (100,000 deletes) for the one job, and the
    ends of other jobs behind it in the turn wait for that."""
    from spotcron.core import layout
    from spotcron.core.runs import Effect
    from spotcron.engine import store
    from spotcron.engine.sweep import LIST_LAG
    from spotcron.runtime import entrypoints
    from spotcron.testing.harness import Harness, make_spec

    budget = 10
    monkeypatch.setattr(store, "PRUNE_DELETES", budget)
    h = Harness()
    try:
        hog = make_spec(name="hog", schedule="0 * * * *", history_limit=1)
        h.start(hog)
        first = "20261122-1200"
        for i in range(40 * budget):
            h.blobs.write(f"{layout.attempt_prefix('hog', first, 1)}results/f{i:06d}", b"")
        h.finish_ok("hog", first)
        owing = []
        for hour in range(13, 19):
            h.clock.advance(3600)
            h.start(hog)
            run_id = f"20261122-{hour}00"
            h.clock.advance(60)
            assert h.finish_ok("hog", run_id).status_code == 200
            owing.append(run_id)
        assert all(Effect.PRUNE in h.record("hog", r).owed for r in owing[:-1])
        left = len(h.blobs.list(layout.run_prefix("hog", first)))
        deletes: list[str] = []
        delete = h.blobs.delete

        def counted(name, *args, **kwargs):
            deletes.append(name)
            return delete(name, *args, **kwargs)

        h.blobs.delete = counted
        h.clock.advance(LIST_LAG.total_seconds() + 1)
        h.sweep()
        pruned = [n for n in deletes if n.startswith(layout.run_prefix("hog", first))]
        assert left > budget
        assert len(pruned) <= budget, f"one sweep pass deleted {len(pruned)} objects of one job (budget {budget})"
    finally:
        entrypoints.use(None)


# --- Queued runs re-check the deployed spec: a manual run's overrides are not a change -----------

def test_a_queued_manual_run_with_overrides_still_gets_its_vm():
    """deployed_problem compares the deployed variant's payload with the run's copy, but a manual
    run's copy has its overrides applied (env, args): once it has waited (queued, or a retry) it
    always looks "deployed again with another spec" and ends without a VM, with nothing changed."""
    from spotcron.core.overrides import Overrides
    from spotcron.core.runs import RunState
    from spotcron.core.settings import Limits
    from spotcron.engine.deployed import SpecStore, start_message
    from spotcron.engine.run_overrides import start_message_with, write_overrides
    from spotcron.runtime import entrypoints
    from spotcron.testing.harness import Harness, make_spec

    h = Harness(limits=Limits(max_live_vms=1, manual_share=1.0))
    try:
        h.start(make_spec(name="a", schedule="0 12 * * *"))
        assert h.record("a", "20261122-1200").state == RunState.RUNNING
        bot = make_spec(name="bot", env={"B": "old"}, timeout="1h")
        SpecStore(h.blobs).write(bot)
        message = start_message_with(start_message(bot), write_overrides(h.blobs, Overrides(env={"B": "new"}).for_run("bot", "ab12")))
        h.start(message, attributes={"trigger": "manual", "nonce": "ab12"})
        [run] = [r for r in h.records("bot") if r.trigger == "manual"]
        assert run.state == RunState.QUEUED, (run.state, run.reason)
        h.clock.advance(60)
        assert h.finish_ok("a", "20261122-1200").status_code == 200  # room: the queue starts the manual run
        after = h.record("bot", run.run_id)
        assert after.state == RunState.RUNNING, (after.state, after.reason)
    finally:
        entrypoints.use(None)


# --- Placement: without usable advice a job keeps to the regions it may run in --------------------

@pytest.mark.parametrize("advised", [False, True])
def test_the_fixed_order_keeps_to_the_jobs_regions(advised):
    """`regions:` are "regions this job may run in"; with advice the order holds only them, but
    the fixed order used when advice is missing, stale or prices nothing starts with the stack's
    own zones (us-central1 here) for a job that allowed only us-west4."""
    from spotcron.engine.placement import place
    from spotcron.testing.harness import make_spec
    from tests.engine.test_placement import NOW, PRICES, TABLE, advice, settings

    spec = make_spec(regions=["us-west4"])
    stale = advice(PRICES, at=NOW - timedelta(hours=2)) if advised else None
    chosen = place(spec, settings(), advice=stale, table=TABLE, now=NOW)
    assert chosen.fallback  # the fixed order
    assert all(zone.startswith("us-west4-") for zone in chosen.zones), chosen.zones


# --- Markdown: a local run's host name is inert in the report's title line -----------------------

def test_a_local_hosts_name_is_inert_in_the_markdown_title():
    """hardware.json's `host` is job-written text (any printable, 128 characters); the Markdown
    report's first line is built with `measured_where`, which quotes the host names but never goes
    through md_text (present/exports.py markdown(): `where` is formatted in raw)."""
    spec = load_job_file(example("dl-benchmark"))
    spec = spec.model_copy(update={"benchmark": Benchmark(base="highcpu-16", time_metric="train_seconds")})
    host = "h ![x](https://evil.example/p.png) <img src=x>"
    local = Hardware(local=True, host=host, machine_type="n1-highcpu-16", cpus=16, memory_mib=14700)

    def metrics(seconds: float) -> str:
        return json.dumps({"metrics": {"train_seconds": {"value": seconds, "unit": "s"}}})

    runs = [bench_run(v, 900, 0, repeat=i, metrics=metrics(800 + i)).model_copy(update={"hardware": local})
            for v in ("highcpu-16", "t4") for i in (1, 2, 3)]
    report = benchmark_report("dl-benchmark", runs, load_prices(), "us-central1", spec=spec)
    assert report.measured_where and "evil.example" in report.measured_where
    md = exports.markdown(report)
    unescaped = _unescaped(md)
    for markup in ("![", "](", "<img", "://"):
        assert markup not in unescaped, (markup, md.splitlines()[0])


# --- Terminal: the report's trailing lines print a run's reason escaped ---------------------------

def test_the_terminal_reports_lines_hold_no_escape_sequences():
    """`spotcron report` (table format) prints, after its tables, `not measured: <run>: <reason>`
    and `metrics.json problem: ...` lines with console.print(markup=False): rich drops BEL, BS, VT,
    FF and CR but not ESC, and these lines never go through printable() (present/formats.py)."""
    import io as _io

    from rich.console import Console

    from spotcron.present.formats import render_report

    spec = load_job_file(example("dl-benchmark"))
    spec = spec.model_copy(update={"benchmark": Benchmark(base="highcpu-16", time_metric="train_seconds")})

    def metrics(seconds: float) -> str:
        return json.dumps({"metrics": {"train_seconds": {"value": seconds, "unit": "s"}}})

    runs = [bench_run(v, 900, 0, repeat=i, metrics=metrics(800 + i)) for v in ("highcpu-16", "t4") for i in (1, 2, 3)]
    runs.append(bench_run("t4", 900, 0, repeat=4, state="failed").model_copy(
        update={"reason": "metrics problem: \x1b[2J\x1b]8;;https://evil.example\x07click\x1b]8;;\x07"}))
    report = benchmark_report("dl-benchmark", runs, load_prices(), "us-central1", spec=spec)
    rendered = render_report(report, "table")
    out = _io.StringIO()
    console = Console(file=out, force_terminal=True, width=100)
    for line in rendered.lines:  # as cli/report.py prints them on a terminal
        console.print(line, markup=False, highlight=False)
    assert "\x1b[2J" not in out.getvalue() and "\x1b]8;;" not in out.getvalue(), repr(out.getvalue())


def test_a_dockerignore_linked_outside_the_context_refuses_the_build(tmp_path):
    from spotcron.core import dockerignore

    folder = _context(tmp_path)
    (tmp_path / "elsewhere.txt").write_text(".env\n")
    (folder / ".dockerignore").symlink_to(tmp_path / "elsewhere.txt")
    with pytest.raises(dockerignore.OutsideContext, match="outside the build context"):
        images.context_tar(folder)


def test_a_queued_manual_run_with_overrides_is_still_skipped_when_its_job_changed():
    """The overrides are re-applied to the deployed spec, not ignored: a job deployed again with
    another image while the manual run waited still ends it without a VM."""
    from spotcron.core.overrides import Overrides
    from spotcron.core.runs import RunState
    from spotcron.core.settings import Limits
    from spotcron.engine.deployed import SpecStore, start_message
    from spotcron.engine.run_overrides import start_message_with, write_overrides
    from spotcron.runtime import entrypoints
    from spotcron.testing.harness import Harness, make_spec

    h = Harness(limits=Limits(max_live_vms=1, manual_share=1.0))
    try:
        h.start(make_spec(name="a", schedule="0 12 * * *"))
        bot = make_spec(name="bot", env={"B": "old"}, timeout="1h")
        SpecStore(h.blobs).write(bot)
        message = start_message_with(start_message(bot), write_overrides(h.blobs, Overrides(env={"B": "new"}).for_run("bot", "ab12")))
        h.start(message, attributes={"trigger": "manual", "nonce": "ab12"})
        [run] = [r for r in h.records("bot") if r.trigger == "manual"]
        assert run.state == RunState.QUEUED, (run.state, run.reason)
        SpecStore(h.blobs).write(make_spec(name="bot", env={"B": "old"}, timeout="2h"))
        h.clock.advance(60)
        assert h.finish_ok("a", "20261122-1200").status_code == 200
        after = h.record("bot", run.run_id)
        assert after.state == RunState.SKIPPED and "deployed again" in (after.reason or ""), (after.state, after.reason)
    finally:
        entrypoints.use(None)


def test_a_dockerignore_line_is_a_comment_only_when_its_first_character_is_a_hash():
    """moby's ignorefile drops `#` lines before trimming, and Go's filepath.Match negates a class with
    `^` only: "  #secret" and "[!k]ey.pem" are patterns there, so they must exclude here too."""
    from spotcron.core.dockerignore import excluded, parse

    patterns = parse("  #secret\n[!k]ey.pem\n")
    assert excluded(patterns, "#secret")
    assert excluded(patterns, "key.pem") and excluded(patterns, "!ey.pem") and not excluded(patterns, "aey.pem")
