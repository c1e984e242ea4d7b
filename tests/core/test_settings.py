"""Deployment settings: a deployed function without its project or bucket stops with the variable to set."""

from __future__ import annotations

import pytest

from spotcron.core.errors import ConfigError
from spotcron.core.settings import load_settings


def test_a_function_without_spotcron_project_stops_instead_of_using_a_placeholder():
    from spotcron.runtime.google import google_deps

    with pytest.raises(ConfigError) as caught:
        google_deps({"SPOTCRON_ZONES": "us-central1-a"})

    assert str(caught.value).splitlines() == [
        "<environment>: project: not set: set SPOTCRON_PROJECT (deploy sets it on every function)",
        "<environment>: bucket: not set: set SPOTCRON_BUCKET (deploy sets it on every function)",
    ]


def test_required_fields_may_come_from_the_file(tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text("project: acme-prod\n")

    with pytest.raises(ConfigError) as caught:
        load_settings(stack, {}, required=("project", "bucket"))

    assert str(caught.value) == (f"{stack}: bucket: not set: set SPOTCRON_BUCKET (deploy sets it on every "
                                 f"function) or bucket in {stack}")
    assert load_settings(stack, {"SPOTCRON_BUCKET": "acme-results"}, required=("project", "bucket")).project == \
        "acme-prod"
