"""`.dockerignore`, read as docker reads it, so a build context ships what `docker build` would.

Docker's rules (docs.docker.com/build/concepts/context/#dockerignore-files, and moby's
patternmatcher): one pattern a line; a line that starts with `#` (before any space) is a comment;
surrounding spaces are trimmed; each pattern is cleaned (`./a//b/` is `a/b`) and a leading `/` means
the context's root; `*` matches any run of characters but `/`, `?` one such character, `[...]` a
class (`[^...]` negated, as Go's filepath.Match reads it: `[!a]` is `!` or `a`), `**` any number of
folders (none included); a pattern that matches a folder excludes everything under it; a pattern
starting with `!` makes an exception, and of the patterns that match a path the last one decides.
The Dockerfile and its ignore file are sent whatever the file says (docker needs them).

Which file: a Dockerfile's own ignore file, named like it plus `.dockerignore`
(`Dockerfile.dockerignore`, `docker/app.Dockerfile.dockerignore`) beside it, "takes precedence
over the `.dockerignore` file at the root of the build context if both exist"
(docs.docker.com/build/concepts/context/, "Filename and location"): the one found is read alone,
the two are never merged.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path

NAME = ".dockerignore"


@dataclass(frozen=True)
class Pattern:
    text: str
    exclusion: bool  # False for a `!` exception
    regex: re.Pattern[str]


def parse(text: str) -> list[Pattern]:
    patterns = []
    for raw in text.splitlines():
        # Docker drops a comment before trimming: "  #x" is a pattern, not a comment.
        if raw.startswith("#"):
            continue
        line = raw.strip()
        if not line:
            continue
        exclusion = not line.startswith("!")
        if not exclusion:
            line = line[1:].strip()
        cleaned = posixpath.normpath(line).lstrip("/")
        if cleaned in ("", "."):
            continue
        patterns.append(Pattern(cleaned, exclusion, re.compile(_regex(cleaned), re.DOTALL)))
    return patterns


def _regex(pattern: str) -> str:
    out, i = ["^"], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            if pattern.startswith("**", i):
                i += 2
                if pattern.startswith("/", i):  # `**/` : any folders, none included
                    out.append("(?:.*/)?")
                    i += 1
                else:
                    out.append(".*")
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:end]
                # Go's filepath.Match negates a class with `^` only; `[!a]` matches `!` or `a`.
                negate = body.startswith("^")
                body = body[1:] if negate else body
                out.append(f"[{'^' if negate else ''}{body.replace(chr(92), chr(92) * 2)}]")
                i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    out.append("$")
    return "".join(out)


def excluded(patterns: list[Pattern], relative: str) -> bool:
    """Whether `relative` (a posix path inside the context) is left out: the last pattern that
    matches it or one of its parent folders decides."""
    parts = relative.split("/")
    prefixes = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    verdict = False
    for pattern in patterns:
        if any(pattern.regex.match(prefix) for prefix in prefixes):
            verdict = pattern.exclusion
    return verdict


def has_exceptions(patterns: list[Pattern]) -> bool:
    return any(not p.exclusion for p in patterns)


class OutsideContext(ValueError):
    """The context's `.dockerignore` is a link to a file outside the context."""


def ignore_file(folder: Path, dockerfile: str | None = None) -> str:
    """The ignore file docker reads for `dockerfile` (a path inside the context `folder`), relative
    to `folder`: the Dockerfile's own when it exists (a link counts: read() checks where it goes),
    else the context's `.dockerignore`."""
    if dockerfile:
        own = f"{posixpath.normpath(dockerfile).lstrip('/')}{NAME}"
        path = folder / own
        if path.is_file() or path.is_symlink():
            return own
    return NAME


def read(folder: Path, dockerfile: str | None = None) -> list[Pattern]:
    """The patterns of the ignore file docker reads for `dockerfile` in the context `folder`
    (ignore_file), none when there is none. Docker opens the file
    following a link (a shared ignore file) and drops a UTF-8 byte order mark, and so does this:
    otherwise the first pattern or the whole file would be ignored and what it excludes would ship.
    A link resolving outside the context is refused (OutsideContext), as the ignore file decides
    what leaves the machine and must be part of what is built."""
    name = ignore_file(folder, dockerfile)
    path = folder / name
    if path.is_symlink():
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError) as exc:  # a dangling link or a loop: docker could not read it either
            raise OutsideContext(f"{path}: a link that does not resolve ({exc}); make {name} a file in the "
                                 f"context") from exc
        if not target.is_relative_to(folder.resolve()):
            raise OutsideContext(f"{path}: a link to {target}, outside the build context {folder}; make "
                                 f"{name} a file in the context (or a link to one inside it)")
    if not path.is_file():
        return []
    return parse(path.read_text(encoding="utf-8-sig", errors="replace"))
