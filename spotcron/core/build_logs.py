"""The bucket the job images' builds write their logs to: its name, and where a build's log lands.

A build that runs as its own account and stores its log in a user-created bucket needs, by Google's
page, the Storage Admin role on that bucket when the build does not use Cloud Build's legacy account
("Store build logs in a user-created bucket", https://cloud.google.com/build/docs/securing-builds/
store-view-build-logs). Storage Admin on the results bucket would hand a job's Dockerfile every
run record, result and the bucket's own IAM, so the logs get a bucket of their own that holds
nothing else (deploy/desired.py creates it, deploy/iam.py grants the role there only).

Its name is the results bucket's with `-build-logs` after it. Bucket names are 3 to 63
characters of lowercase letters, digits, dashes, underscores and dots, start and end with a
letter or digit, and a dotted name (up to 222 characters, each dot-separated part at most 63)
needs its domain verified (https://cloud.google.com/storage/docs/buckets#naming). When the suffix
would not fit, or the results bucket's name has dots, the name is derived instead from a cut of
the results bucket's name and 8 hex digits of its SHA-256: always the same for one results bucket,
valid, without dots, and distinct for two results buckets that share the cut.
"""

from __future__ import annotations

import hashlib
import re

SUFFIX = "-build-logs"
MAX_NAME = 63
_ALLOWED = re.compile(r"[^a-z0-9_-]+")


def build_logs_bucket(results_bucket: str) -> str:
    """The name of the build logs' bucket of the stack whose results bucket is `results_bucket`."""
    plain = f"{results_bucket}{SUFFIX}"
    if len(plain) <= MAX_NAME and "." not in results_bucket:
        return plain
    digest = hashlib.sha256(results_bucket.encode()).hexdigest()[:8]
    room = MAX_NAME - len(SUFFIX) - len(digest) - 1
    stem = _ALLOWED.sub("-", results_bucket.lower())[:room].strip("-_") or "spotcron"
    return f"{stem}-{digest}{SUFFIX}"


def build_logs_location(bucket: str) -> str:
    """A build's `logsBucket`: the whole logs bucket (`gs://BUCKET`, no path)."""
    return f"gs://{bucket}"


def build_log_object(build_id: str) -> str:
    """The object a build's log is written to in the logs bucket ("Logs file names will be of the
    format ${logsBucket}/log-${build_id}.txt",
    https://cloud.google.com/build/docs/api/reference/rest/v1/projects.builds)."""
    return f"log-{build_id}.txt"
