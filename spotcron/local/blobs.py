"""The bucket as local mode and the results CLI see it.

Local mode stores everything in gcp-storage-emulator through the same Cloud Storage client the
functions use on Google Cloud. The emulator ignores generation preconditions, so `GuardedBlobs`
enforces them in-process: in local mode every writer of run records lives in this one process
(the VM runners only write logs, results, manifests and checkpoints).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

from spotcron.core.errors import PreconditionFailed, SpotcronError
from spotcron.engine.ports import Blob, Blobs

LOCAL_BUCKET = "spotcron-local"
STATE_DIR = Path(".spotcron")


class GuardedBlobs:
    """Blobs whose preconditions hold even on a backend that ignores them (single process)."""

    def __init__(self, inner: Blobs):
        self.inner = inner
        self.bucket = inner.bucket
        self._lock = threading.RLock()

    def read(self, name: str) -> Blob | None:
        return self.inner.read(name)

    def write(self, name: str, data: bytes, *, if_generation_match: int | None = None,
              content_type: str = "application/octet-stream") -> int:
        if if_generation_match is None:
            return self.inner.write(name, data, content_type=content_type)
        with self._lock:
            current = self.inner.read(name)
            generation = current.generation if current else 0
            if generation != if_generation_match:
                raise PreconditionFailed(f"{name}: generation is {generation}, expected {if_generation_match}")
            return self.inner.write(name, data, content_type=content_type)

    def read_range(self, name: str, start: int, size: int) -> bytes | None:
        return self.inner.read_range(name, start, size)

    def list(self, prefix: str) -> list[str]:
        return self.inner.list(prefix)

    def delete(self, name: str) -> bool:
        with self._lock:
            return self.inner.delete(name)


def emulator_blobs(url: str, bucket: str) -> GuardedBlobs:
    """Cloud Storage client pointed at a local emulator, with no credentials."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    from spotcron.gcp.storage import GcsBlobs

    client = storage.Client(project="local", credentials=AnonymousCredentials(),
                            client_options={"api_endpoint": url})
    return GuardedBlobs(GcsBlobs(bucket, client=client))


@contextlib.contextmanager
def open_bucket(bucket: str | None, state_dir: Path = STATE_DIR) -> Iterator[Blobs]:
    """The results bucket: `gs://NAME` on Google Cloud, else the local one under `state_dir`."""
    if bucket:
        from spotcron.gcp.storage import GcsBlobs

        name = bucket.removeprefix("gs://").strip("/")
        if not name or "/" in name:
            raise SpotcronError(f"--bucket {bucket!r} is not a bucket; write gs://NAME")
        yield GcsBlobs(name)
        return
    from spotcron.local.bucket import LocalBucket

    data_dir = Path(state_dir) / "bucket"
    if not data_dir.exists():
        raise SpotcronError(f"no local runs yet ({data_dir} does not exist): run `spotcron up --once` or "
                            "`make run` first, or pass --bucket gs://NAME for a deployed stack")
    with LocalBucket(data_dir, LOCAL_BUCKET) as served:
        yield emulator_blobs(served.url, LOCAL_BUCKET)
