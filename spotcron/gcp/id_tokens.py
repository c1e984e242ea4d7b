"""ports.Identity on Google's ID-token verification (signature, expiry, audience, issuer).

`google.oauth2.id_token.verify_token` fetches the signing certificates on every call; this
adapter hands it a request object that caches the certificates for a few minutes (Google
rotates them over days), and refetches once when a token names a key it has not seen yet.
The transport is imported on first use: a cold-started function that never verifies a token
does not pay for `requests`.

Failures say why in a few words and never echo the token. A certificate endpoint that cannot
be reached is not the caller's fault: that raises `Transient`, so job_done answers 5xx and the
runner retries, instead of a 4xx that would make it give up.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from spotcron.core.errors import InvalidToken, Transient

GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v1/certs"
GOOGLE_ISSUERS = ("https://accounts.google.com", "accounts.google.com")
CERTS_TTL_S = 300.0
CLOCK_SKEW_S = 10

_UNKNOWN_KEY = re.compile(r"Certificate for key id (\S+) not found")
_REASONS: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str]], ...] = (
    (re.compile(r"Token expired"), lambda m: "token expired"),
    (re.compile(r"Token used too early"), lambda m: "token issued in the future (iat)"),
    (re.compile(r"wrong audience (.*), expected one of \[(.*)\]"),
     lambda m: f"wrong audience {m.group(1)!r}, expected {m.group(2).strip(chr(39))!r}"),
    (re.compile(r"Could not verify token signature"), lambda m: "bad signature"),
    (_UNKNOWN_KEY, lambda m: f"signed by an unknown key (kid {m.group(1)})"),
    (re.compile(r"Unsupported signature algorithm (.*)"), lambda m: f"unsupported algorithm {m.group(1)}"),
    (re.compile(r"does not contain required claim (\w+)"), lambda m: f"missing claim {m.group(1)!r}"),
)


class _UnknownKey(InvalidToken):
    """Signed by a key the cached certificates lack: Google may have rotated its keys since."""


def _reason(exc: BaseException) -> str:
    text = str(exc)
    for pattern, describe in _REASONS:
        match = pattern.search(text)
        if match:
            return describe(match)
    return "malformed token"


class _CachingRequest:
    """A google.auth transport Request that remembers successful GETs for `ttl_s` seconds."""

    def __init__(self, ttl_s: float, clock: Callable[[], float]):
        self._ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, Any]] = {}
        self._inner: Any = None
        self.fetches = 0  # how many times the network was asked; tests check caching with it

    def __call__(self, url: str, method: str = "GET", **kwargs: Any) -> Any:
        now = self._clock()
        if method == "GET":
            with self._lock:
                hit = self._cache.get(url)
            if hit is not None and hit[0] > now:
                return hit[1]
        if self._inner is None:
            import google.auth.transport.requests as transport

            self._inner = transport.Request()
        kwargs.setdefault("timeout", 10)
        response = self._inner(url, method=method, **kwargs)
        self.fetches += 1
        if method == "GET" and response.status == 200:
            with self._lock:
                self._cache[url] = (now + self._ttl_s, response)
        return response

    def forget(self, url: str) -> None:
        with self._lock:
            self._cache.pop(url, None)


class GoogleIdentity:
    """Verifies Google-signed ID tokens (or a LocalSigner's, given its certs URL)."""

    def __init__(self, certs_url: str = GOOGLE_CERTS_URL, issuers: Iterable[str] = GOOGLE_ISSUERS, *,
                 certs_ttl_s: float = CERTS_TTL_S, clock_skew_s: int = CLOCK_SKEW_S,
                 clock: Callable[[], float] = time.monotonic):
        self.certs_url = certs_url
        self.issuers = tuple(issuers)
        self.clock_skew_s = clock_skew_s
        self._request = _CachingRequest(certs_ttl_s, clock)

    @property
    def certificate_fetches(self) -> int:
        return self._request.fetches

    def verify(self, token: str, audience: str) -> dict[str, Any]:
        if not isinstance(token, str) or not token.strip():
            raise InvalidToken("no token")
        token = token.strip()
        if token.count(".") != 2:
            raise InvalidToken("malformed token: a JWT has three dot-separated parts")
        try:
            claims = self._verify(token, audience)
        except _UnknownKey:
            # Google may have rotated its keys since we cached them: look once more.
            self._request.forget(self.certs_url)
            claims = self._verify(token, audience)
        issuer = claims.get("iss")
        if issuer not in self.issuers:
            raise InvalidToken(f"wrong issuer {issuer!r}, expected one of {list(self.issuers)}")
        return dict(claims)

    def _verify(self, token: str, audience: str) -> Any:
        from google.auth import exceptions
        from google.oauth2 import id_token

        try:
            return id_token.verify_token(token, self._request, audience=audience, certs_url=self.certs_url,
                                         clock_skew_in_seconds=self.clock_skew_s)
        except exceptions.TransportError as exc:
            raise Transient(f"could not fetch token certificates from {self.certs_url}: {exc}") from None
        except (ValueError, exceptions.GoogleAuthError) as exc:
            unknown_key = _UNKNOWN_KEY.search(str(exc)) is not None
            raise (_UnknownKey if unknown_key else InvalidToken)(_reason(exc)) from None
