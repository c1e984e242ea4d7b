"""`spotcron run JOB --env K=V --args ...`: the run gets them and records them; the deployed spec and
the schedule do not, and a start message can only name overrides the control plane stored."""

from __future__ import annotations

import json

import pytest

from spotcron.core.descriptor import METADATA_KEY, RunDescriptor
from spotcron.core.overrides import Overrides, object_name
from spotcron.engine.deployed import SpecStore, canonical, start_message
from spotcron.engine.run_overrides import start_message_with, write_overrides
from spotcron.runtime.run_end import install
from spotcron.testing.harness import make_spec

MANUAL = {"trigger": "manual", "nonce": "ab12"}


def manual_run(h, spec, overrides):
    SpecStore(h.blobs).write(spec)
    message = start_message(spec)
    if overrides is not None:
        message = start_message_with(message, write_overrides(h.blobs, overrides.for_run(spec.name, MANUAL["nonce"])))
    assert h.start(message, attributes=MANUAL).status_code in (200, 204)
    return [r for r in h.records("bot") if r.trigger == "manual"]


def test_a_manual_run_gets_the_overrides_and_records_them_the_deployed_spec_does_not(h):
    spec = make_spec(env={"A": "1", "B": "old"}, args=["--full"])
    [record] = manual_run(h, spec, Overrides(env={"B": "new", "C": "3"}, args="--dry-run --steps 5"))
    assert record.overrides == {"digest": record.overrides["digest"], "env": ["B", "C"],
                                "args": ["--dry-run", "--steps", "5"]}
    assert record.spec["env"] == {"A": "1", "B": "new", "C": "3"}
    assert record.spec["args"] == ["--dry-run", "--steps", "5"]
    assert h.blobs.read("deployed/bot.json").data == canonical(spec)  # the schedule runs the job as deployed
    [vm] = [i for i in h.compute.all_instances() if "ab12" in i.name]
    descriptor = RunDescriptor.from_metadata(vm.metadata[METADATA_KEY])  # what the VM runs
    assert descriptor.args == ["--dry-run", "--steps", "5"] and descriptor.env["B"] == "new"


def test_every_matrix_entry_gets_the_overrides(h):
    spec = make_spec(matrix=[{"name": "a", "env": {"E": "a"}}, {"name": "b", "args": ["b"]}])
    records = manual_run(h, spec, Overrides(env={"E": "x"}))
    assert sorted((r.variant, r.spec["env"]["E"]) for r in records) == [("a", "x"), ("b", "x")]


def test_overrides_not_in_the_bucket_or_not_matching_their_name_start_nothing(h):
    spec = make_spec()
    SpecStore(h.blobs).write(spec)
    missing = start_message_with(start_message(spec), "0" * 64)
    assert h.start(missing, attributes=MANUAL).status_code in (200, 204)
    forged = Overrides(env={"X": "1"}).for_run("bot", MANUAL["nonce"])
    h.blobs.write(object_name(forged.digest), b'{"env": {"X": "2"}}')  # not what the name hashes
    h.start(start_message_with(start_message(spec), forged.digest), attributes=MANUAL)
    # A scheduled start may not carry overrides at all.
    h.start(start_message_with(start_message(spec), write_overrides(h.blobs, forged)))
    assert h.records("bot") == []


def test_a_manual_run_with_overrides_is_no_part_of_the_health_streak(h):
    sent: list[str] = []
    install(h.deps, post=lambda url, data, headers: sent.append(json.loads(data)["event"]) or 200, secrets=None)
    spec = make_spec(notify={"webhook": "http://hooks.example/x"})
    h.start(spec)
    h.clock.advance(60)
    h.upload("bot", "20261122-1200", exit_code=1)
    h.callback("bot", "20261122-1200", exit_code=1)
    [manual] = manual_run(h, spec, Overrides(env={"FIX": "1"}))
    h.clock.advance(60)
    h.finish_ok("bot", manual.run_id)
    assert h.record("bot", manual.run_id).state == "succeeded"
    assert sent == ["failure"], "a run with overrides neither recovers the job nor notifies"


@pytest.mark.parametrize("pairs", [("NOEQUALS",), ("1BAD=x",)])
def test_bad_env_pairs_are_refused(pairs):
    from pydantic import ValidationError

    from spotcron.core.overrides import parse_env_pairs

    with pytest.raises((ValueError, ValidationError)):
        Overrides.model_validate({"env": parse_env_pairs(pairs)})


def test_overrides_serve_only_the_request_they_were_written_for(h, caplog):
    import logging

    spec = make_spec()
    SpecStore(h.blobs).write(spec)
    digest = write_overrides(h.blobs, Overrides(env={"T": "once"}).for_run("bot", "ab12"))
    with caplog.at_level(logging.WARNING):
        # The same job's next manual start (another nonce), or one with no nonce, may not reuse them.
        h.start(start_message_with(start_message(spec), digest), attributes={"trigger": "manual", "nonce": "cd34"})
        h.start(start_message_with(start_message(spec), digest), attributes={"trigger": "manual"})
    assert h.records("bot") == []
    refusals = [r.getMessage() for r in caplog.records if "are not for it" in r.getMessage()]
    assert len(refusals) == 2 and all("another start request" in m for m in refusals), refusals
    h.start(start_message_with(start_message(spec), digest), attributes=MANUAL)
    [run] = h.records("bot")
    assert run.spec["env"]["T"] == "once"


def test_overrides_past_their_keep_days_start_nothing(h):
    from spotcron.core.overrides import KEEP_DAYS

    spec = make_spec()
    SpecStore(h.blobs).write(spec)
    digest = write_overrides(h.blobs, Overrides(env={"T": "old"}).for_run("bot", MANUAL["nonce"]))
    h.clock.advance(KEEP_DAYS * 86400 + 60)  # the bucket's lifecycle rule deletes them by then; locally none runs
    h.start(start_message_with(start_message(spec), digest), attributes=MANUAL)
    assert h.records("bot") == []
