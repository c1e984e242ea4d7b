"""The retry loop in front of Google's APIs, with the runtime's translation (errors.translate);
deploy's translation on the same loop is tested in tests/deploy/test_validate_calls.py."""

from __future__ import annotations

import pytest
from google.api_core import exceptions as gexc

from spotcron.core.errors import NotFound, SpotcronError, Transient
from spotcron.gcp.error_map import translate
from spotcron.gcp.retry import Caller


def plain(exc: BaseException, what: str) -> SpotcronError:
    return translate(exc, what) or SpotcronError(f"{what}: {exc}")


def failing(*errors: BaseException):
    pending = list(errors)

    def call() -> str:
        if pending:
            raise pending.pop(0)
        return "ok"

    return call


def test_a_transient_failure_is_retried_after_a_jittered_capped_wait() -> None:
    sleeps: list[float] = []
    caller = Caller(plain, attempts=3, base_delay=2.0, max_delay=3.0, sleep=sleeps.append)
    caller._rng.uniform = lambda low, high: high
    assert caller("get x", failing(gexc.ServiceUnavailable("busy"), gexc.ServiceUnavailable("busy"))) == "ok"
    assert sleeps == [2.0, 3.0] and (caller.calls, caller.retries) == (3, 2)


def test_a_permanent_failure_is_raised_translated_at_once() -> None:
    caller = Caller(plain, sleep=lambda s: pytest.fail("no wait for a permanent failure"))
    with pytest.raises(NotFound, match="^get x: not found: gone$") as raised:
        caller("get x", failing(gexc.NotFound("gone")))
    assert isinstance(raised.value.__cause__, gexc.NotFound) and caller.calls == 1


def test_the_last_transient_failure_says_how_often_it_tried() -> None:
    caller = Caller(plain, attempts=2, sleep=lambda s: None)
    with pytest.raises(Transient, match=r"\(gave up after 2 attempts\)$"):
        caller("get x", failing(*[gexc.ServiceUnavailable("busy")] * 2))
