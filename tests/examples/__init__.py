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
SCHEMA = ROOT / "jobs" / "schema.json"  # `make schema` writes it; the examples point editors at it


def example(name: str) -> Path:
    """The example job file `name` as shipped in the repository."""
    return ROOT / "jobs" / f"{name}.yaml"


def copy_examples(dest: Path) -> Path:
    """A jobs folder at `dest` holding the example jobs and their schema, and nothing else."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in EXAMPLES:
        shutil.copy(example(name), dest / f"{name}.yaml")
    shutil.copy(SCHEMA, dest / "schema.json")
    return dest
