"""Where `report` and `cost` read run records and what jobs wrote: a folder laid out like the
bucket (runs/JOB/RUN/run.json, e.g. a copy of it), or the bucket itself through its Blobs port."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from spotcron.core.errors import SpotcronError
from spotcron.core.metrics import MAX_BYTES
from spotcron.core.runs import RunRecord
from spotcron.engine.results import read_capped

if TYPE_CHECKING:
    from spotcron.engine.ports import Blobs

# Job-written files are read up to their cap plus one byte, never whole: the parser then names
# the file as too big (core/jobdata.py) without the report holding it in memory.
READ_CAP = MAX_BYTES + 1


def read_records(root: Path) -> list[RunRecord]:
    """Every run.json under `root`, oldest first; a file that does not parse is an error naming it."""
    records = []
    for path in sorted(root.rglob("run.json")):
        try:
            records.append(RunRecord.from_json(path.read_bytes()))
        except (ValidationError, ValueError) as exc:
            first = str(exc).splitlines()[0]
            raise SpotcronError(f"{path}: not a run record ({first})") from None
    return sorted(records, key=lambda r: r.created_at)


def folder_reader(root: Path) -> Callable[[str], bytes | None]:
    """A job's file (e.g. its metrics.json) by its bucket name, from a folder laid out like the bucket."""
    def read(name: str) -> bytes | None:
        path = root / name
        if not path.is_file():
            return None
        with path.open("rb") as file:
            return file.read(READ_CAP)

    return read


def blobs_reader(blobs: Blobs) -> Callable[[str], bytes | None]:
    """A job's metrics.json as the control plane reads it (engine/results.read_capped): one ranged read
    of the cap plus one byte; JobDataProblem when it is stored compressed or is too big."""
    def read(name: str) -> bytes | None:
        return read_capped(blobs, name, MAX_BYTES, name)

    return read
