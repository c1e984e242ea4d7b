"""spotcron's import graph, read from the source with `ast` (nothing is imported or run).

Every import counts, those inside functions too: a lazy import still ties two modules together,
it only hides the tie from Python until the first call. `python -m tests.architecture.imports`
prints the packages' arrows, the cycles and the modules importing Google's libraries.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from spotcron.deploy.imports import imported_names

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = "functions"  # the Cloud Functions' entry points: a layer of their own, above runtime


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str  # the full dotted name as written (`google.cloud.storage`, `spotcron.engine.store`)
    line: int


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports_of(name: str, path: Path) -> Iterator[Import]:
    for imported, line in imported_names(path.read_text(encoding="utf-8"), name,
                                         is_package=path.name == "__init__.py", filename=str(path)):
        yield Import(name, imported, line)


@dataclass
class ImportGraph:
    """Modules of spotcron/ and functions/, and what each imports."""

    root: Path = ROOT
    modules: dict[str, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for top in ("spotcron", FUNCTIONS):
            for path in sorted((self.root / top).rglob("*.py")):
                if "_bundled" not in path.parts:
                    self.modules[module_name(path, self.root)] = path

    @cached_property
    def imports(self) -> list[Import]:
        return [found for name, path in self.modules.items() for found in _imports_of(name, path)]

    def resolve(self, dotted: str) -> str | None:
        """The module of ours that `dotted` names (a module, or a name inside one), else None."""
        while dotted and dotted not in self.modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    @cached_property
    def edges(self) -> dict[str, set[str]]:
        edges: dict[str, set[str]] = {name: set() for name in self.modules}
        for found in self.imports:
            target = self.resolve(found.imported)
            if target is not None and target != found.importer:
                edges[found.importer].add(target)
        return edges

    def cycles(self) -> list[list[str]]:
        """Strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on_stack: set[str] = set()
        found: list[list[str]] = []
        for start in sorted(self.edges):
            if start in index:
                continue
            work = [(start, iter(sorted(self.edges[start])))]
            index[start] = low[start] = len(index)
            stack.append(start)
            on_stack.add(start)
            while work:
                node, children = work[-1]
                child = next(children, None)
                if child is not None:
                    if child not in index:
                        index[child] = low[child] = len(index)
                        stack.append(child)
                        on_stack.add(child)
                        work.append((child, iter(sorted(self.edges[child]))))
                    elif child in on_stack:
                        low[node] = min(low[node], index[child])
                    continue
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
        return found

    def external(self, prefix: str) -> list[Import]:
        """Imports of a library outside ours: `google` matches google.cloud…, not google_crc32c."""
        seen: dict[tuple[str, int], Import] = {}
        for found in self.imports:  # `from google.cloud import storage` is one import, not two
            if found.imported == prefix or found.imported.startswith(prefix + "."):
                seen.setdefault((found.importer, found.line), found)
        return list(seen.values())


def main() -> None:
    from tests.architecture.layers import package_of

    graph = ImportGraph()
    arrows: dict[str, set[str]] = {}
    for importer, targets in graph.edges.items():
        for target in targets:
            if package_of(importer) != package_of(target):
                arrows.setdefault(package_of(importer), set()).add(package_of(target))
    for package in sorted(arrows):
        print(f"{package} -> {', '.join(sorted(arrows[package]))}")
    print(f"modules {len(graph.modules)}, package arrows {sum(len(v) for v in arrows.values())}")
    cycles = graph.cycles()
    print(f"cycles {len(cycles)}")
    for group in cycles:
        print("  " + " <-> ".join(group))
    google = sorted({found.importer for found in graph.external("google")
                     if not found.importer.startswith("spotcron.gcp")})
    print(f"modules importing google.* outside spotcron/gcp/: {len(google)}")
    for name in google:
        print(f"  {name}")


if __name__ == "__main__":
    main()
