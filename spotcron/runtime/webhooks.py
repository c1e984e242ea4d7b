"""The notifier's HTTP POST (engine/notifications.py's `Post`), on the standard library.

Used by the functions and by `spotcron up` alike, so a local webhook receiver gets the very
requests the deployed functions send. A short timeout: a receiver that hangs fails the hook,
which stays owed for the next toucher, instead of holding a function.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Mapping

TIMEOUT_S = 10.0
USER_AGENT = "spotcron-notify"


def post(url: str, body: bytes, headers: Mapping[str, str]) -> int:
    """POST `body` to `url`; the HTTP status (an error status too). OSError when unreachable."""
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"User-Agent": USER_AGENT, **headers})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 - http(s) only (core/notify_spec)
            response.read(1 << 16)
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
