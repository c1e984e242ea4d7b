"""The notifier's HTTP POST (engine/notifications.py's `Post`), on the standard library.

Used by the functions and by `spotcron up` alike, so a local webhook receiver gets the very
requests the deployed functions send. A short timeout: a receiver that hangs fails the hook,
which stays owed for the next toucher, instead of holding a function.
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping

TIMEOUT_S = 10.0
USER_AGENT = "spotcron-notify"


def post(url: str, body: bytes, headers: Mapping[str, str]) -> int:
    """POST `body` to `url`; the HTTP status (an error status too). OSError when unreachable.

    The URL may be a secret's value (a Slack or Teams incoming webhook): urllib's own errors quote
    it, so each is raised again as a fixed description of its kind, never chained."""
    try:
        parts = urllib.parse.urlsplit(url)
        if (parts.scheme not in ("http", "https") or not parts.hostname
                or any(c.isspace() or not c.isprintable() for c in url)):
            raise ValueError
        request = urllib.request.Request(url, data=body, method="POST",
                                         headers={"User-Agent": USER_AGENT, **headers})
    except ValueError:
        raise ValueError("the webhook's URL is not an http(s) URL") from None
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 - http(s) only (checked above)
            response.read(1 << 16)
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except TimeoutError:
        raise TimeoutError(f"the webhook did not answer within {TIMEOUT_S:g} s") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, TimeoutError):
            raise TimeoutError(f"the webhook did not answer within {TIMEOUT_S:g} s") from None
        raise OSError(f"the webhook could not be reached ({type(reason).__name__})") from None
    except (ValueError, http.client.HTTPException) as exc:
        raise OSError(f"the webhook's request failed ({type(exc).__name__})") from None
