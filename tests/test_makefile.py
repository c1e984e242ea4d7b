"""`make help` lists every target the Makefile documents (a `## ` comment after its name)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on PATH")
def test_make_help_lists_every_documented_target():
    documented = re.findall(r"^([A-Za-z0-9_-]+):.*## ", (ROOT / "Makefile").read_text(), flags=re.MULTILINE)
    assert "e2e" in documented
    done = subprocess.run(["make", "--no-print-directory", "-s", "help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True)
    listed = re.findall(r"^  make (\S+)", done.stdout, flags=re.MULTILINE)
    assert listed == documented
