"""The map in docs/architecture.md, kept true: layers, no cycles, where Google's libraries and
test support may be imported, and who writes a run record.

Each check reads the source (tests/architecture/imports.py); a failure names the module, the
line and the rule, so the fix is a move or an import pointed the other way, never a new
exception here.
"""

from __future__ import annotations

import ast

import pytest

from tests.architecture.imports import ImportGraph
from tests.architecture.layers import ADMIN_IMPORTERS, FLOORS, package_of


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return ImportGraph()


def test_every_package_is_on_the_map(graph: ImportGraph) -> None:
    unplaced = []
    for module in graph.modules:
        try:
            package_of(module)
        except KeyError:
            unplaced.append(module)
    assert not unplaced, (f"modules in no package of tests/architecture/layers.py: {unplaced}; "
                          "put the new package on a floor there and in docs/architecture.md")


def test_imports_point_down(graph: ImportGraph) -> None:
    wrong = []
    for found in graph.imports:
        target = graph.resolve(found.imported)
        if target is None:
            continue
        source_package, target_package = package_of(found.importer), package_of(target)
        if source_package == target_package:
            continue
        if FLOORS[target_package] >= FLOORS[source_package]:
            wrong.append(f"{found.importer}:{found.line} imports {target} "
                         f"({source_package} on floor {FLOORS[source_package]}, "
                         f"{target_package} on floor {FLOORS[target_package]})")
    assert not wrong, "imports that point up or sideways:\n" + "\n".join(wrong)


def test_no_import_cycles(graph: ImportGraph) -> None:
    cycles = graph.cycles()
    assert not cycles, "modules that import each other (lazy imports count):\n" + "\n".join(
        " <-> ".join(group) for group in cycles)


def test_google_libraries_only_in_gcp(graph: ImportGraph) -> None:
    outside = [f"{found.importer}:{found.line} imports {found.imported}" for found in graph.external("google")
               if package_of(found.importer) not in ("spotcron.gcp", "spotcron.gcp.admin")]
    assert not outside, "Google's libraries imported outside spotcron/gcp/:\n" + "\n".join(outside)


def test_deploy_clients_only_for_deploy(graph: ImportGraph) -> None:
    """gcp/admin/ is not in the functions' archive: a shipped module importing it would fail there."""
    wrong = [f"{found.importer}:{found.line} imports {found.imported}" for found in graph.imports
             if (target := graph.resolve(found.imported)) and package_of(target) == "spotcron.gcp.admin"
             and package_of(found.importer) not in ADMIN_IMPORTERS | {"spotcron.gcp.admin"}]
    assert not wrong, "spotcron/gcp/admin/ imported by what the functions run:\n" + "\n".join(wrong)


def test_test_support_not_imported_by_production(graph: ImportGraph) -> None:
    wrong = [f"{found.importer}:{found.line} imports {found.imported}" for found in graph.imports
             if package_of(found.importer) != "spotcron.testing"
             and (found.imported == "tests" or found.imported.startswith(("tests.", "spotcron.testing")))]
    assert not wrong, "production code importing test support:\n" + "\n".join(wrong)


# --- the run record's one writer ----------------------------------------------------------------

# What changes a run record, and the one module allowed to do it. The transitions build every new
# record; engine.writer alone writes one, inside the store's read-modify-write.
RECORD_WRITERS = {
    "with_state": "spotcron.engine.transitions",
    "with_attempt": "spotcron.engine.transitions",
    "RunRecord": "spotcron.engine.transitions",
    "store.update": "spotcron.engine.writer",
    "store.create": "spotcron.engine.writer",
}
_DEFINED_IN = "spotcron.core.runs"


def _record_changes(tree: ast.AST):
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "RunRecord":
            yield "RunRecord", node.lineno
        elif isinstance(func, ast.Attribute):
            if func.attr in ("with_state", "with_attempt"):
                yield func.attr, node.lineno
            elif func.attr in ("update", "create") and (
                    (isinstance(func.value, ast.Attribute) and func.value.attr == "store")
                    or (isinstance(func.value, ast.Name) and func.value.id == "store")):
                yield f"store.{func.attr}", node.lineno


def test_run_records_change_only_through_the_transitions(graph: ImportGraph) -> None:
    wrong = []
    for module, path in graph.modules.items():
        if module == _DEFINED_IN or package_of(module) == "spotcron.testing":
            continue
        for change, line in _record_changes(ast.parse(path.read_text(encoding="utf-8"))):
            if module != RECORD_WRITERS[change]:
                wrong.append(f"{module}:{line} calls {change} (only {RECORD_WRITERS[change]} may)")
    assert not wrong, ("run records changed past engine/transitions.py and engine/writer.py:\n"
                       + "\n".join(wrong))
