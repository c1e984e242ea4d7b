"""tests/README.md's map from modules to test files is the one tests/architecture/tests_of.py makes."""

from __future__ import annotations

from tests.architecture.tests_of import BEGIN, END, README, readme_with_tables, tables


def test_the_readmes_map_of_tests_is_current():
    readme = README.read_text(encoding="utf-8")
    assert BEGIN in readme and END in readme, "tests/README.md lost its generated section's markers"
    assert readme_with_tables(readme, tables()) == readme, (
        "tests/README.md's map of tests is stale: run `.venv/bin/python -m tests.architecture.tests_of --write`")


def test_the_map_names_a_module_by_the_tests_that_import_it():
    generated = tables()
    [limits] = [line for line in generated.splitlines() if line.startswith("| `engine/limits.py`")]
    assert "test_guards" in limits  # tests/security/test_guards.py imports spotcron.engine.limits
    [job_done] = [line for line in generated.splitlines() if line.startswith("| `engine/job_done.py`")]
    assert "engine/" in job_done.split("|")[3]  # reached by the harness's callbacks in tests/engine


def test_every_test_a_doc_names_exists():
    """A doc that points to a test (tests/…/test_x.py::test_name) points to one that is there, so a
    moved or renamed test cannot leave a reader at a dead end."""
    import re

    from tests.architecture.imports import ROOT

    docs = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "tests" / "README.md"]
    missing = []
    for doc in docs:
        for path, test in re.findall(r"(tests/[\w/]+\.py)(?:::(\w+))?", doc.read_text(encoding="utf-8")):
            source = ROOT / path
            if not source.is_file():
                missing.append(f"{doc.name}: {path} does not exist")
            elif test and not re.search(rf"^\s*(?:async )?def {test}\(", source.read_text(encoding="utf-8"), re.M):
                missing.append(f"{doc.name}: {path} has no {test}")
    assert missing == []
