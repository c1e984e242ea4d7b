"""job_done keeps the version each secret resolved to, and only what looks like one."""

from __future__ import annotations

from spotcron.engine.job_done import CallbackBody

BASE = {"job": "bot", "run_id": "20260101-1000", "attempt": 1, "status": "exited"}


def test_variable_names_and_version_ids_are_kept():
    body = CallbackBody.model_validate({**BASE, "secret_versions": {"BOT_TOKEN": "12", "KEY": "local-env"}})
    assert body.secret_versions == {"BOT_TOKEN": "12", "KEY": "local-env"}


def test_anything_else_is_dropped_without_refusing_the_report():
    body = CallbackBody.model_validate({**BASE, "secret_versions": {
        "BOT_TOKEN": "ghp_" + "x" * 60, "1BAD": "3", "OK": 7, "WITH SPACE": "1", "FINE": "2", **{
            f"V{i}": "1" for i in range(100)}}})
    assert "BOT_TOKEN" not in body.secret_versions and "FINE" in body.secret_versions
    assert len(body.secret_versions) <= 64
    assert CallbackBody.model_validate({**BASE, "secret_versions": ["x"]}).secret_versions == {}
