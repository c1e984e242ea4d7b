"""The example jobs as the tests see them: named files, or a copy of them in a folder of its own.

jobs/ is the user's folder: a job added there, broken or half-written, must not change what
`make test` checks. Tests name an example (`example("dl-benchmark")`) or work on a copy
(`copy_examples(tmp_path)`), never on the folder itself.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ("hello-bot", "dl-benchmark")
BUILDS = ("vm_images/bot", "vm_images/benchmark")  # the folders the examples build their images from (`build:`)
SCHEMA = ROOT / "jobs" / "schema.json"  # `make schema` writes it; the examples point editors at it


def example(name: str) -> Path:
    """The example job file `name` as shipped in the repository."""
    return ROOT / "jobs" / f"{name}.yaml"


def copy_examples(dest: Path) -> Path:
    """A jobs folder at `dest` holding the example jobs and their schema, and nothing else; the
    folders they build from go beside it (build paths are relative to the folder holding jobs/),
    so `dest` is a folder of its own test's, never tmp_path itself."""
    dest.mkdir(parents=True, exist_ok=True)
    for folder in BUILDS:
        shutil.copytree(ROOT / folder, dest.parent / folder, dirs_exist_ok=True)
    for name in EXAMPLES:
        shutil.copy(example(name), dest / f"{name}.yaml")
    shutil.copy(SCHEMA, dest / "schema.json")
    return dest
