"""The exceptions spotcron raises. Adapters translate Google's exceptions into these."""

from __future__ import annotations

from dataclasses import dataclass


class SpotcronError(Exception):
    """Base of every error spotcron raises on purpose; the CLI prints these without a traceback."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a user's input, located as precisely as we can."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class ConfigError(SpotcronError):
    """Invalid job specs or settings; carries every problem found, not just the first."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class CronError(SpotcronError, ValueError):
    """A schedule Cloud Scheduler would reject, or one that can never fire.

    `detail` says the same without naming the field (schedule, time_zone), for a caller that
    shows the field apart, as the job loader does.
    """

    def __init__(self, message: str, *, detail: str | None = None):
        super().__init__(message)
        self.detail = message if detail is None else detail


# --- cloud edges -----------------------------------------------------------------------------


class NotFound(SpotcronError):
    """The resource does not exist (HTTP 404)."""


class AlreadyExists(SpotcronError):
    """A create collided with an existing resource of the same name (HTTP 409)."""


class PreconditionFailed(SpotcronError):
    """A generation precondition did not hold (HTTP 412)."""


class Transient(SpotcronError):
    """A timeout or 5xx: the call may or may not have happened; safe to retry idempotently."""


class EncodedObject(SpotcronError):
    """An object stored with a Content-Encoding (gzip, deflate, ...), or one whose encoding could not be
    decoded. Objects are read as the bytes stored, never inflated: a few KiB of gzip a job uploads
    inflate to gigabytes, and a ranged read's cap counts stored bytes."""


class ObjectKept(SpotcronError):
    """Cloud Storage refused to delete or replace an object: it is under a temporary or event-based
    hold, or younger than a retention policy (HTTP 403, "... cannot be deleted, overwritten or
    archived until hold is removed"). Retrying does not help until someone releases the hold."""


class CreateFailed(SpotcronError):
    """Compute Engine refused to create an instance. `kind` says whether another zone may help."""

    STOCKOUT = "stockout"
    QUOTA = "quota"
    PERMISSION = "permission"
    IMAGE = "image"
    INVALID = "invalid"

    def __init__(self, kind: str, reason: str):
        self.kind = kind
        self.reason = reason
        super().__init__(f"{kind}: {reason}")

    @property
    def try_another_zone(self) -> bool:
        return self.kind == self.STOCKOUT


class InvalidToken(SpotcronError):
    """A callback's identity token is missing, malformed, unsigned, expired or for someone else."""
