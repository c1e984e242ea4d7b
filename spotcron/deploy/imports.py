"""What a Python source imports, read with `ast` (nothing is imported or run).

Every import counts, those inside functions too: a lazy import still needs its module present
when it runs. The source archive ships only the modules the functions can reach this way, and
tests/architecture/ reads the whole import graph with the same reader.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator


def imported_names(source: str | bytes, module: str, *, is_package: bool = False,
                   filename: str = "<source>") -> Iterator[tuple[str, int]]:
    """(dotted name, line) for each import in `source`, the module `module` (a package's
    __init__ when `is_package`). `from a.b import c` yields a.b and a.b.c, since c may be a
    module; relative imports are made absolute."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base, node.lineno
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno
