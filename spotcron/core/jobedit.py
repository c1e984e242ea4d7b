"""Small edits to a job file's text that keep everything else as the user wrote it.

`spotcron pause` sets the job's top-level `paused:` field in its file and `resume` removes it
(false is the default, so a resumed file reads as one that was never paused): the file stays the
one description of the job (what `up` runs and `deploy` deploys), and its comments, order and
layout are kept. Only a top-level `paused:` line is touched (a comment on it stays, on its own
line), or one is added at the end; a file whose layout this cannot follow (a flow mapping,
`paused` set by an anchor) is refused and the caller says to edit it by hand.
"""

from __future__ import annotations

import re

import yaml

_PAUSED = re.compile(r"^paused[ \t]*:[^\n#]*(?P<comment>#[^\n]*)?$", re.MULTILINE)


class CannotEdit(ValueError):
    """The edit would not give a file whose `paused` is the value asked for."""


def with_paused(text: str, paused: bool) -> str:
    """`text` with its top-level `paused:` set to `paused`: a line added to pause, removed to resume."""
    value = "true" if paused else "false"
    found = list(_PAUSED.finditer(text))
    if len(found) > 1:
        raise CannotEdit("it has more than one top-level paused: line")
    if found and not paused:
        match = found[0]
        end = match.end() + 1 if text[match.end():match.end() + 1] == "\n" else match.end()
        kept = f"{match.group('comment')}\n" if match.group("comment") else ""
        edited = text[:match.start()] + kept + text[end:]
    elif found:
        match = found[0]
        comment = f"  {match.group('comment')}" if match.group("comment") else ""
        edited = text[:match.start()] + f"paused: {value}{comment}" + text[match.end():]
    elif not paused:
        edited = text  # nothing to remove: the check below refuses a file paused some other way
    else:
        edited = text + ("" if not text or text.endswith("\n") else "\n") + f"paused: {value}\n"
    try:
        loaded = yaml.safe_load(edited)
    except yaml.YAMLError as exc:
        raise CannotEdit(f"it does not parse once edited ({str(exc).splitlines()[0]})") from None
    if not isinstance(loaded, dict) or loaded.get("paused", False) is not paused:
        raise CannotEdit("its layout hides where paused: goes")
    return edited
