"""plan(desired, actual) -> [Action]: what to create, update and delete. Pure: no I/O, no clock.

Deletions are "deployed minus desired", and only for resources that carry our label or name
prefix (actual.py marks them `owned`); buckets, service accounts and IAM policies are never
deleted. IAM policies are compared binding by binding, for our accounts and managed roles only,
so bindings that other people granted never show up here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from spotcron.deploy.resources import CREATE_ONLY, IAM_POLICY, NEVER_DELETED, Inventory, Resource, phase

CREATE, UPDATE, DELETE = "create", "update", "delete"
_MARK = {CREATE: "+", UPDATE: "~", DELETE: "-"}


@dataclass(frozen=True)
class Action:
    kind: str  # create | update | delete
    resource_type: str
    name: str
    changes: dict[str, tuple[Any, Any]]  # field -> (old, new); None for "absent"
    # The desired resource (create, update) or the deployed one (delete), for the executor.
    resource: Resource | None = field(default=None, compare=False, repr=False)
    current: Resource | None = field(default=None, compare=False, repr=False)

    @property
    def phase(self) -> int:
        return phase(self.resource_type, self.name, self.kind)

    @property
    def title(self) -> str:
        return f"{self.kind} {self.resource_type} {self.name}"


def _iam_changes(want: Mapping[str, Any], have: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    changes = {}
    for role in sorted(set(want) | set(have)):
        old, new = tuple(have.get(role) or ()), tuple(want.get(role) or ())
        if set(old) != set(new):
            changes[role] = (old, new)
    return changes


def diff(want: Resource, have: Resource) -> dict[str, tuple[Any, Any]]:
    """The fields of `want` that `have` does not match (create-only fields are not compared)."""
    if want.type == IAM_POLICY:
        return _iam_changes(want.fields, have.fields)
    skip = CREATE_ONLY.get(want.type, frozenset())
    return {name: (have.fields.get(name), value) for name, value in want.fields.items()
            if name not in skip and have.fields.get(name) != value}


def plan(desired: Inventory, actual: Inventory) -> list[Action]:
    """The actions that turn `actual` into `desired`, in execution order."""
    actions: list[Action] = []
    for key, want in desired.items():
        have = actual.get(key)
        if want.type == IAM_POLICY:
            changes = _iam_changes(want.fields, have.fields if have else {})
            if changes:
                actions.append(Action(UPDATE, want.type, want.name, changes, want, have))
        elif have is None:
            actions.append(Action(CREATE, want.type, want.name,
                                  {name: (None, value) for name, value in want.fields.items()}, want))
        else:
            changes = diff(want, have)
            if changes:
                actions.append(Action(UPDATE, want.type, want.name, changes, want, have))
    for key, have in actual.items():
        if key not in desired and have.owned and have.type not in NEVER_DELETED:
            actions.append(Action(DELETE, have.type, have.name,
                                  {name: (value, None) for name, value in have.fields.items()}, have, have))
    return sorted(actions, key=lambda a: (a.phase, a.resource_type, a.name))


# --- printing ----------------------------------------------------------------------------------

def _short(value: Any, width: int = 70) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    text = json.dumps(text) if isinstance(value, str) else text
    return text if len(text) <= width else text[: width - 1] + "…"


def _change_lines(action: Action) -> list[str]:
    lines = []
    for name, (old, new) in action.changes.items():
        if action.resource_type == IAM_POLICY:
            lines += [f"    + {name} {m}" for m in sorted(set(new or ()) - set(old or ()))]
            lines += [f"    - {name} {m}" for m in sorted(set(old or ()) - set(new or ()))]
        elif isinstance(old, Mapping) and isinstance(new, Mapping):
            for key in sorted(set(old) | set(new)):
                if old.get(key) != new.get(key):
                    lines.append(f"    {name}.{key}: {_short(old.get(key))} → {_short(new.get(key))}")
        else:
            lines.append(f"    {name}: {_short(old)} → {_short(new)}")
    return lines


def format_plan(actions: list[Action]) -> list[str]:
    """The plan as diff-like lines: `+ create`, `~ update` with field changes, `- delete`."""
    lines = []
    for action in actions:
        lines.append(f"{_MARK[action.kind]} {action.title}")
        if action.kind == UPDATE:
            lines += _change_lines(action)
    lines.append(summary(actions))
    return lines


def summary(actions: list[Action]) -> str:
    if not actions:
        return "No changes: the deployed stack matches the job specs and settings."
    counts = {kind: sum(1 for a in actions if a.kind == kind) for kind in (CREATE, UPDATE, DELETE)}
    return f"Plan: {counts[CREATE]} to create, {counts[UPDATE]} to update, {counts[DELETE]} to delete."
