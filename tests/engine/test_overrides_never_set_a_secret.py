"""An override may not set a variable the job declares in `secrets:`: the value would be a secret kept
as plain text in the overrides object, the run record and the VM's metadata. The CLI refuses it
(tests/cli/test_run_env_refuses_a_secret.py); start_job refuses an overrides object written some
other way at once, before any record exists, and deletes it. Overrides.applied validates the copy it
makes against every rule of the spec, so no caller gets a configuration that names one twice."""

from __future__ import annotations

import logging

import pytest
from pydantic import ValidationError

from spotcron.core.overrides import Overrides, object_name
from spotcron.core.spec import JobSpec
from spotcron.engine.deployed import SpecStore, start_message
from spotcron.engine.run_overrides import start_message_with, write_overrides

MANUAL = {"trigger": "manual", "nonce": "ab12"}
VALUE = "Tr0ub4dor-and-3-more"  # a password: no well-known token prefix, so no value check catches it


def _spec(**fields) -> JobSpec:
    return JobSpec.model_validate({"name": "bot", "schedule": "0 1 * * *", "image": "python:3.12", **fields})


class _Lines(logging.Handler):
    """Every line start_job logs (the structured logging of the functions does not propagate)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def lines():
    handler = _Lines()
    logger = logging.getLogger("spotcron.functions")
    logger.addHandler(handler)
    yield handler.records
    logger.removeHandler(handler)


def _everything_stored(h) -> list[str]:
    stored = [name for name in h.blobs.list_quietly("") if VALUE.encode() in h.blobs.peek(name).data]
    return stored + [i.name for i in h.compute.all_instances() if any(VALUE in v for v in i.metadata.values())]


@pytest.mark.parametrize("fields", [{"secrets": {"TOKEN": "bot-token"}},
                                    {"matrix": [{"name": "a"}, {"name": "b", "secrets": {"TOKEN": "b-token"}}]}],
                         ids=["job", "matrix-entry"])
def test_an_override_of_a_declared_secret_is_refused_at_once_and_kept_out_of_records(h, lines, fields):
    spec = _spec(**fields)
    SpecStore(h.blobs).write(spec)
    # As a publisher that bypasses the CLI would write it (the CLI refuses before writing).
    digest = write_overrides(h.blobs, Overrides(env={"TOKEN": VALUE}).for_run("bot", MANUAL["nonce"]))
    h.start(start_message_with(start_message(spec), digest), attributes=MANUAL)
    assert h.records("bot") == []  # refused before any run exists: nothing waits for the sweep
    assert _everything_stored(h) == [], "the value of declared secret TOKEN is stored"
    assert h.blobs.read(object_name(digest)) is None  # usable by this request alone, and refused: deleted
    [refusal] = [r for r in lines if "refused the manual start of job bot" in r.getMessage()]
    message = refusal.getMessage()
    assert "TOKEN" in message and "secrets:" in message and "spotcron secrets set" in message, message
    assert VALUE not in "".join(r.getMessage() + repr(getattr(r, "fields", "")) for r in lines)
    assert refusal.fields["event"] == "bad_message" and refusal.fields["security"] is True


def test_applied_overrides_are_validated_against_the_rules_of_the_spec():
    [variant] = _spec(secrets={"TOKEN": "bot-token"}).variants()
    with pytest.raises(ValidationError, match="set in both env and secrets"):
        Overrides(env={"TOKEN": VALUE}).applied(variant)
    applied = Overrides(env={"LEVEL": "debug"}, args="--dry-run").applied(variant)
    assert applied.env == {"LEVEL": "debug"} and applied.args == ("--dry-run",) and "TOKEN" in applied.secrets


def test_the_problem_names_the_variable_and_the_secret_never_the_value():
    problem = Overrides(env={"TOKEN": VALUE, "LEVEL": "debug"}).problem(_spec(secrets={"TOKEN": "bot-token"}))
    assert problem is not None and VALUE not in problem
    assert "--env TOKEN: job bot declares TOKEN (secret bot-token) in `secrets:`" in problem
    assert "spotcron secrets set bot-token --cloud" in problem
    assert Overrides(env={"LEVEL": "debug"}).problem(_spec(secrets={"TOKEN": "bot-token"})) is None


def test_launch_checks_every_configuration_before_it_creates_any_run(h):
    from spotcron.engine.start_job import launch
    from spotcron.engine.ticks import BadTrigger

    spec = _spec(matrix=[{"name": "a"}, {"name": "b", "secrets": {"TOKEN": "b-token"}}])
    with pytest.raises(BadTrigger, match="TOKEN"):
        launch(h.deps, spec, requested_at=h.clock.now(), manual=True, nonce="ab12",
               overrides=Overrides(env={"TOKEN": VALUE}).for_run("bot", "ab12"))
    assert h.records("bot") == []  # not even entry a, which has no such secret
