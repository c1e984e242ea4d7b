"""Where spotcron finds the runner and the functions' source: a wheel's packaged copies first, then
the checkout around the package; and the deploy archive is the same from either."""

from __future__ import annotations

import ast
import io
import zipfile
from pathlib import Path

import pytest

from spotcron.deploy.source import SourceTree, build_source
from spotcron.runtime import assets

ROOT = Path(__file__).resolve().parents[2]


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def checkout(root: Path, main: str = "def start_job(event):\n    pass\n") -> Path:
    """A checkout's layout: functions/, spotcron/ and vm_images/runner/ side by side."""
    _write(root / "functions" / "main.py", main)
    _write(root / "functions" / "requirements.txt", "functions-framework\n")
    for rel in ("spotcron/__init__.py", "spotcron/core/spec.py", "spotcron/runtime/assets.py",
                "spotcron/cli/__init__.py", "spotcron/cost/data/prices.yaml"):
        _write(root / rel, f"# {rel}\n")
    _write(root / "vm_images" / "runner" / "runner.sh", "#!/bin/bash\n")
    _write(root / "vm_images" / "runner" / "cloud-init.yaml", "#cloud-config\n")
    return root


def wheel_install(site: Path, main: str = "def start_job(event):\n    pass\n") -> Path:
    """What installing the wheel leaves in site-packages: the package, the folders under _bundled/."""
    built = checkout(site / "_src", main)
    package = site / "spotcron"
    for path in sorted((built / "spotcron").rglob("*")):
        if path.is_file():
            _write(package / path.relative_to(built / "spotcron"), path.read_text())
    for folder in ("functions", "vm_images/runner"):
        for path in sorted((built / folder).iterdir()):
            _write(package / "_bundled" / folder / path.name, path.read_text())
    return package


def test_a_checkout_runs_its_own_folders(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    assert assets.runner_dir(root / "spotcron") == root / "vm_images" / "runner"
    assert assets.functions_dir(root / "spotcron") == root / "functions"


def test_a_wheel_runs_its_packaged_copies(tmp_path: Path) -> None:
    package = wheel_install(tmp_path / "site-packages")
    assert assets.runner_dir(package) == package / "_bundled" / "vm_images" / "runner"
    assert assets.functions_dir(package) == package / "_bundled" / "functions"


def test_the_packaged_copy_wins_over_a_stray_folder_beside_the_package(tmp_path: Path) -> None:
    """site-packages may hold another distribution's top-level `functions/`: never ours."""
    package = wheel_install(tmp_path / "site-packages")
    _write(package.parent / "functions" / "main.py", "# someone else's\n")
    assert assets.functions_dir(package) == package / "_bundled" / "functions"


def test_a_missing_folder_says_where_it_looked(tmp_path: Path) -> None:
    package = tmp_path / "site-packages" / "spotcron"
    package.mkdir(parents=True)
    with pytest.raises(assets.MissingAsset) as error:
        assets.runner_dir(package)
    assert str(error.value) == (
        f"spotcron's vm_images/runner/ is missing: no {package}/_bundled/vm_images/runner/runner.sh or "
        f"{package.parent}/vm_images/runner/runner.sh; reinstall spotcron from a wheel built from its "
        "repository, or run it from a checkout")


def test_this_checkout_runs_the_repository_folders() -> None:
    assert assets.runner_dir() == ROOT / "vm_images" / "runner"
    assert assets.functions_dir() == ROOT / "functions"


def test_setup_py_bundles_exactly_the_folders_the_resolver_finds() -> None:
    tree = ast.parse((ROOT / "setup.py").read_text())
    bundled = next(node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                   and any(isinstance(t, ast.Name) and t.id == "BUNDLED" for t in node.targets))
    assert ast.literal_eval(bundled) == assets.FOLDERS
    assert f"/{assets.BUNDLED}/" in (ROOT / ".gitignore").read_text()
    manifest = (ROOT / "MANIFEST.in").read_text().splitlines()
    assert {f"graft {folder}" for folder in assets.FOLDERS} <= set(manifest)


def test_a_wheel_install_deploys_the_same_archive_as_the_checkout(tmp_path: Path) -> None:
    main = "import spotcron.core.spec, spotcron.runtime.assets\n"  # the archive holds what main imports
    from_checkout = build_source(checkout(tmp_path / "repo", main))
    package = wheel_install(tmp_path / "site-packages", main)
    from_wheel = build_source(SourceTree(functions=assets.functions_dir(package), package=package,
                                         runner=assets.runner_dir(package)))
    assert from_wheel.files == ("main.py", "requirements.txt", "spotcron/__init__.py", "spotcron/core/spec.py",
                                "spotcron/cost/data/prices.yaml", "spotcron/runtime/assets.py",
                                "vm_images/runner/cloud-init.yaml", "vm_images/runner/runner.sh")
    assert from_wheel.data == from_checkout.data
    with zipfile.ZipFile(io.BytesIO(from_wheel.data)) as archive:
        assert not [name for name in archive.namelist() if "_bundled" in name]


def test_deploy_ships_this_installation_when_no_root_is_given() -> None:
    assert build_source().data == build_source(ROOT).data
    assert SourceTree.installed() == SourceTree.checkout(ROOT)
