"""`make help` lists every target the Makefile documents (a `## ` comment after its name)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
def test_make_help_lists_every_documented_target():
    documented = re.findall(r"^([A-Za-z0-9_-]+):.*## ", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    assert "e2e" in documented
    done = subprocess.run(["make", "--no-print-directory", "-s", "help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True)
    listed = re.findall(r"^  make (\S+)", done.stdout, flags=re.MULTILINE)
    assert listed == documented


def test_make_run_ends_by_saying_how_to_put_spotcron_on_path():
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^run:.*\n((?:\t.*\n)+)", makefile, flags=re.MULTILINE).group(1).splitlines()
    assert recipe[-1].startswith("\t@echo ")
    assert "'. $(BIN)/activate'" in recipe[-1] and "$(BIN)/spotcron" in recipe[-1]
    assert "'pipx install .'" in recipe[-1]


def test_the_readme_quickstart_says_how_to_get_spotcron_on_path_and_as_a_tool():
    readme = (ROOT / "README.md").read_text()
    quickstart = readme[readme.index("## Quickstart"):readme.index("## How it works")]
    for words in ("`. .venv/bin/activate`", "`.venv/bin/spotcron`", "pipx install .", "spotcron init"):
        assert words in quickstart, words


def test_the_readmes_first_way_to_install_the_tool_needs_only_python():
    """pipx is not everywhere: the README's first install line is a venv and pip, pipx beside it."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### Your jobs, in your own repository"):]
    first = next(line for line in section.splitlines() if "install ." in line)
    assert first.startswith("python3 -m venv ") and "/bin/pip install ." in first
    assert section.index("python3 -m venv") < section.index("pipx install .")
    assert 'export PATH="$HOME/.venvs/spotcron/bin:$PATH"' in section


def test_make_lint_covers_setup_py():
    lint = re.search(r"^lint:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(), flags=re.MULTILINE).group(1)
    assert re.search(r"ruff check .*\bsetup\.py\b", lint)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
def test_the_first_install_says_what_it_is_doing_before_its_quiet_minutes(tmp_path):
    """pip runs with --quiet: without a line first, a newcomer's `make run` is minutes of silence."""
    done = subprocess.run(["make", "--no-print-directory", "-n", "install", f"VENV={tmp_path / 'venv'}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=True)
    lines = done.stdout.splitlines()
    first_pip = next(i for i, line in enumerate(lines) if "pip install" in line)
    said = " ".join(lines[:first_pip])
    assert "Installing spotcron" in said and "PyTorch" in said and "minutes" in said
