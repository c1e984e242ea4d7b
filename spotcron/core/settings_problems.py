"""The stack file's problems as a user reads them: file:line, the setting, what is wrong and what
to write instead (a misspelt setting gets the one it resembles, not pydantic's "extra inputs")."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from spotcron.core.errors import Problem


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line of every mapping key in a YAML text, by its path; empty for text that is not YAML."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return {}
    lines: dict[tuple[str, ...], int] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    lines.setdefault((*path, key.value), key.start_mark.line + 1)
                    walk(value, (*path, key.value))

    walk(root, ())
    return lines


def settings_problems(errors: Iterable[Mapping[str, Any]], name: str, lines: Mapping[tuple[str, ...], int],
                      from_env: Mapping[str, str], known: Iterable[str]) -> list[Problem]:
    """One Problem per pydantic error of the stack's settings, located in the file when it came from there.

    `from_env` maps each top-level setting an environment variable set to that variable's name;
    `known` are the settings that exist (for a suggestion when one is misspelt).
    """
    known = list(known)
    problems = []
    for error in errors:
        loc = tuple(str(part) for part in error.get("loc", ()))
        field = ".".join(loc)
        where = from_env.get(loc[0]) if loc else None
        line = None if where else _line(lines, loc)
        if error.get("type") == "extra_forbidden" and len(loc) == 1:
            close = difflib.get_close_matches(loc[0], known, n=1)
            message = f"unknown setting; did you mean {close[0]!r}?" if close else \
                f"unknown setting; the settings are: {', '.join(known)}"
        else:
            message = str(error.get("msg", "")).removeprefix("Value error, ") + f" (got {error.get('input')!r})"
        if where:
            message += f" (from {where})"
        problems.append(Problem(name, line, field, message))
    return sorted(problems, key=lambda p: p.line or 0)


def _line(lines: Mapping[tuple[str, ...], int], loc: tuple[str, ...]) -> int | None:
    for end in range(len(loc), 0, -1):
        if loc[:end] in lines:
            return lines[loc[:end]]
    return None
