"""The local bucket as local mode and the results CLI see it (cli/_bucket.py chooses between
it and a deployed stack's bucket).

Local mode stores everything in the local storage server through the same Cloud Storage client
the functions use on Google Cloud; the server itself enforces generation preconditions, so the
runners and any other process on the same state dir are held to them too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from spotcron.core.errors import SpotcronError
from spotcron.engine.ports import Blobs

LOCAL_BUCKET = "spotcron-local"
STATE_DIR = Path(".spotcron")


@contextlib.contextmanager
def open_local_bucket(state_dir: Path = STATE_DIR) -> Iterator[Blobs]:
    """The local results bucket under `state_dir`; SpotcronError when local mode has not run there."""
    from spotcron.local.bucket import LocalBucket

    data_dir = Path(state_dir) / "bucket"
    if not data_dir.exists():
        raise SpotcronError(f"no local runs yet ({data_dir} does not exist): run `spotcron up --once` or "
                            "`make run` first, or pass --bucket gs://NAME for a deployed stack")
    with LocalBucket(data_dir, LOCAL_BUCKET) as served:
        yield served.blobs()
