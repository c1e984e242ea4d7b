"""A policy key names one role's bindings under one condition title, whatever the title holds.

A condition's title is free text chosen by whoever writes the binding
(Expr.title, https://cloud.google.com/iam/docs/reference/rest/v1/Expr): deploy's keys
(`ROLE|TITLE`, `ROLE|TITLE|outdated`) read back the title and the mark exactly as written.
"""

from __future__ import annotations

import pytest

from spotcron.deploy.iam import condition_key, split_key
from spotcron.deploy.policies import apply_changes, managed_view

TITLES = ["", "plain", "keep|me", "a|b|c", "x|outdated", "back\\slash", "end\\", "\\|", "|", "||outdated"]


@pytest.mark.parametrize("title", TITLES)
@pytest.mark.parametrize("outdated", [False, True])
def test_every_title_reads_back_as_written(title: str, outdated: bool) -> None:
    assert split_key(condition_key("roles/x", title, outdated)) == ("roles/x", title, outdated)


def test_an_unconditional_key_is_the_role() -> None:
    assert split_key(condition_key("roles/x", None)) == ("roles/x", None, False)


@pytest.mark.parametrize("title", TITLES)
def test_a_managed_role_under_a_condition_of_any_title_is_revoked(title: str) -> None:
    me = "serviceAccount:a@p.iam.gserviceaccount.com"
    policy = {"bindings": [
        {"role": "roles/x", "members": [me], "condition": {"title": title, "expression": "true"}},
        {"role": "roles/x", "members": ["user:other@example.com"]},
    ]}
    view = managed_view(policy, frozenset({me}), frozenset({"roles/x"}))
    assert list(view.values()) == [(me,)]
    assert apply_changes(policy, {key: (members, ()) for key, members in view.items()})
    assert policy["bindings"] == [{"role": "roles/x", "members": ["user:other@example.com"]}]
