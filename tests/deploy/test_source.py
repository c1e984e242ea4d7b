"""The functions' source archive: what goes in, and that the same code gives the same bytes."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import pytest

from spotcron.core.errors import ConfigError
from spotcron.deploy.source import build_source
from tests.deploy.conftest import make_source_root

# The entry points import what they use; the archive follows those imports (and never past the
# allowlist: gcp/admin and cost/projection stay out even when something names them).
MAIN = """def start_job(event):
    import spotcron.core.spec, spotcron.engine.start_job, spotcron.gcp.compute
    from spotcron.cost import billing, projection
    from spotcron.gcp.admin import clients
"""


def tree(root: Path) -> Path:
    make_source_root(root, MAIN)
    (root / "functions" / "requirements.txt").write_text("functions-framework\n")
    for rel in ("spotcron/core/spec.py", "spotcron/engine/start_job.py", "spotcron/cost/data/prices.yaml",
                "spotcron/cost/billing.py", "spotcron/cost/projection.py", "spotcron/cli/__init__.py",
                "spotcron/deploy/planner.py", "spotcron/gcp/compute.py", "spotcron/gcp/admin/__init__.py",
                "spotcron/gcp/admin/clients.py", "spotcron/__pycache__/spec.cpython-311.pyc",
                "vm_images/runner/cloud-init.yaml", "vm_images/bot/Dockerfile"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n")
    return root


def test_archive_holds_the_runtime_and_not_the_deployer(tmp_path: Path) -> None:
    bundle = build_source(tree(tmp_path))
    assert bundle.files == (
        "main.py", "requirements.txt", "spotcron/__init__.py", "spotcron/core/spec.py", "spotcron/cost/billing.py",
        "spotcron/cost/data/prices.yaml", "spotcron/engine/start_job.py", "spotcron/gcp/compute.py",
        "vm_images/runner/cloud-init.yaml",
        "vm_images/runner/runner.sh")
    with zipfile.ZipFile(io.BytesIO(bundle.data)) as archive:
        assert archive.read("requirements.txt") == b"functions-framework\n"
        assert archive.read("main.py").startswith(b"def start_job")
    assert bundle.object_name == f"deploy/source-{bundle.sha256[:16]}.zip"


def test_same_code_same_bytes_whatever_the_file_times(tmp_path: Path) -> None:
    first = build_source(tree(tmp_path / "a"))
    second_root = tree(tmp_path / "b")
    os.utime(second_root / "functions" / "main.py", (1_000_000, 1_000_000))
    assert build_source(second_root).data == first.data
    (second_root / "spotcron" / "core" / "spec.py").write_text("# changed\n")
    assert build_source(second_root).sha256 != first.sha256


def test_missing_requirements_is_a_config_error(tmp_path: Path) -> None:
    root = make_source_root(tmp_path)
    (root / "functions" / "requirements.txt").unlink()
    with pytest.raises(ConfigError) as error:
        build_source(root)
    assert str(error.value) == (f"{root}/functions/requirements.txt: missing: the packages the deployed "
                                "functions install")


def test_the_archive_is_an_allowlist(tmp_path: Path) -> None:
    root = make_source_root(tmp_path)
    (root / "functions" / "main.py").write_text(
        "import spotcron.cli, spotcron.deploy, spotcron.local, spotcron.testing, spotcron.present\n"
        "import spotcron.newly_added, spotcron.loose_module\n")
    for package in ("cli", "deploy", "local", "testing", "present", "newly_added"):
        (root / "spotcron" / package).mkdir()
        (root / "spotcron" / package / "__init__.py").write_text("")
    (root / "spotcron" / "loose_module.py").write_text("")
    (root / "vm_images" / "bot").mkdir()
    (root / "vm_images" / "bot" / "bot.py").write_text("")
    with zipfile.ZipFile(io.BytesIO(build_source(root).data)) as archive:
        assert sorted(archive.namelist()) == ["main.py", "requirements.txt", "spotcron/__init__.py",
                                              "vm_images/runner/runner.sh"]


def test_only_what_the_entry_points_can_import_ships(tmp_path: Path) -> None:
    root = make_source_root(tmp_path, "def start_job(event):\n    from spotcron.engine import start_job\n")
    for rel, text in (("spotcron/engine/__init__.py", ""), ("spotcron/engine/start_job.py", "from . import writer\n"),
                      ("spotcron/engine/writer.py", "def later():\n    from spotcron.core.runs import RunRecord\n"),
                      ("spotcron/core/__init__.py", ""), ("spotcron/core/runs.py", ""),
                      ("spotcron/core/loader.py", "import spotcron.core.runs\n"),
                      ("spotcron/cost/data/prices.yaml", "n1: 1\n")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    assert build_source(root).files == (
        "main.py", "requirements.txt", "spotcron/__init__.py", "spotcron/core/__init__.py", "spotcron/core/runs.py",
        "spotcron/cost/data/prices.yaml", "spotcron/engine/__init__.py", "spotcron/engine/start_job.py",
        "spotcron/engine/writer.py", "vm_images/runner/runner.sh")


def test_missing_entry_points_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        build_source(tmp_path)
    assert str(error.value) == (f"{tmp_path}/functions/main.py: missing: the functions' entry points "
                                "(start_job, sweep, job_done) live there")


def test_the_real_checkout_builds(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    if not (root / "functions" / "main.py").is_file():
        pytest.skip("functions/main.py is not in this checkout yet")
    bundle = build_source(root)
    assert "main.py" in bundle.files and "spotcron/core/settings.py" in bundle.files
    assert not [f for f in bundle.files if f.startswith(("spotcron/cli/", "spotcron/deploy/", "spotcron/gcp/admin/",
                                                          "tests/"))]


# What must never reach the functions: test support, presentation, local mode, the deployer and
# its Google side, and the monthly projection (the functions price runs, never schedules).
NOT_SHIPPED = ("spotcron.testing", "spotcron.present", "spotcron.local", "spotcron.cli", "spotcron.deploy",
               "spotcron.gcp.admin", "spotcron.cost.projection")


def test_the_real_archive_holds_no_test_support_or_presentation_and_imports_none(tmp_path: Path) -> None:
    """Neither the modules themselves nor an import of them from what ships (it would fail at run time)."""
    import ast

    root = Path(__file__).resolve().parents[2]
    bundle = build_source(root)
    shipped_modules = {f.removesuffix(".py").replace("/", ".") for f in bundle.files if f.endswith(".py")}
    assert not [m for m in shipped_modules if m.startswith(NOT_SHIPPED)]
    assert "spotcron.cost.billing" in shipped_modules  # what the engine prices a run's end with
    assert not [f for f in bundle.files if f.startswith("spotcron/") and f.endswith((".png", ".html", ".css"))]
    reaching = []
    with zipfile.ZipFile(io.BytesIO(bundle.data)) as archive:
        for name in archive.namelist():
            if not name.endswith(".py"):
                continue
            for node in ast.walk(ast.parse(archive.read(name))):
                targets = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names] \
                    if isinstance(node, ast.ImportFrom) else []
                reaching += [f"{name}: {t}" for t in targets if t.startswith(NOT_SHIPPED)]
    assert reaching == []
    requirements = (root / "functions" / "requirements.txt").read_text()
    assert "matplotlib" not in requirements and "numpy" not in requirements
