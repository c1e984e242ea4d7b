"""A manual run's overrides serve one run: the first start that uses them consumes them.

The nonce that binds overrides to their request is in the run id (`m...-NONCE`) and the digest is
on the run record, so whoever may publish on the start topic can copy both. A message with the same
{job, digest, overrides} and the same nonce, published again later (a new publishTime: a new run
id), must not start a second run with the operator's one-off args and env values; a redelivery of
the one message (same publishTime, same message id) must still name its run and go on.
"""

from __future__ import annotations

import json

from spotcron.core.overrides import Overrides, used_name
from spotcron.core.runs import manual_run_id
from spotcron.engine.deployed import SpecStore, start_message
from spotcron.engine.run_overrides import claim, start_message_with, write_overrides
from spotcron.testing.harness import Harness, make_spec

MANUAL = {"trigger": "manual", "nonce": "beef"}


def _request(h: Harness, spec) -> tuple[str, bytes]:
    SpecStore(h.blobs).write(spec)
    overrides = Overrides(env={"ONE_OFF_TOKEN": "tok"}, args=("--drop-everything",)).for_run(spec.name, "beef")
    digest = write_overrides(h.blobs, overrides)
    return digest, start_message_with(start_message(spec), digest)


def _with_them(h: Harness, job: str, digest: str) -> list[str]:
    return [r.run_id for r in h.records(job) if (r.overrides or {}).get("digest") == digest and r.had_vm]


def test_overrides_replayed_with_their_own_nonce_start_no_later_run_of_the_same_job(h: Harness) -> None:
    spec = make_spec(name="a", timeout="10m")
    digest, message = _request(h, spec)
    h.start(message, attributes=MANUAL)  # the operator's own run
    [first] = _with_them(h, "a", digest)
    h.finish_ok("a", first)
    # An hour later a publisher sends the same message again (its nonce is in the run id, the
    # digest on the run record).
    h.clock.advance(3600)
    h.start(message, attributes=MANUAL)
    ran = _with_them(h, "a", digest)
    assert ran == [first], (
        f"the one-off overrides (args --drop-everything, env ONE_OFF_TOKEN) ran again in {ran[1:]}: a "
        f"replayed start of the same request is a later run of the same job")
    assert [r.run_id for r in h.records("a")] == [first], "the replay leaves no record either"
    assert json.loads(h.blobs.read(used_name(digest)).data)["run"] == first  # the run they served


def test_a_redelivery_of_the_same_message_still_names_its_one_run(h: Harness) -> None:
    spec = make_spec(name="a", timeout="10m", matrix=[{"name": "x"}, {"name": "y"}])
    digest, message = _request(h, spec)
    published = h.clock.now()
    h.start(message, publish_time=published, attributes=MANUAL, message_id="m-1")
    h.clock.advance(40)  # Pub/Sub delivers the same message again (its ack was lost)
    h.start(message, publish_time=published, attributes=MANUAL, message_id="m-1")
    ran = _with_them(h, "a", digest)
    assert sorted(ran) == [manual_run_id(published, "beef", v) for v in ("x", "y")], ran
    assert len(h.compute.created) == 2, "one VM per matrix entry, whatever the deliveries"


def test_a_start_that_consumed_them_and_stopped_before_its_record_runs_on_its_redelivery(h: Harness) -> None:
    spec = make_spec(name="a", timeout="10m")
    digest, message = _request(h, spec)
    published = h.clock.now()
    # The first delivery wrote the mark, then its function instance went away before the record.
    claim(h.blobs, digest, job="a", run=manual_run_id(published, "beef"))
    assert h.blobs.read(used_name(digest)) is not None
    h.start(message, publish_time=published, attributes=MANUAL)
    assert _with_them(h, "a", digest) == [manual_run_id(published, "beef")]
