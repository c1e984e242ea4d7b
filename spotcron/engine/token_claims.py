"""RS256 identity tokens: decoding, and the claims checked against a clock we are given.

Local mode and the fault simulation sign their own instance identity tokens (Google signs them
on a real VM). Verification is real: the signature against the issuer's keys (gcp/rs256.py,
with google-auth's crypt), then audience, expiry and issued-at against `now` here, so a
simulated month can run on a fake clock.
"""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from spotcron.core.errors import InvalidToken

CLOCK_SKEW_S = 60


def _b64decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def decode_unverified(token: str) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    """(header, claims, signed bytes, signature); InvalidToken when it is not a JWT at all."""
    if not isinstance(token, str) or token.count(".") != 2:
        raise InvalidToken("not a JWT")
    header_b64, claims_b64, signature_b64 = token.split(".")
    try:
        header = json.loads(_b64decode(header_b64))
        claims = json.loads(_b64decode(claims_b64))
        signature = _b64decode(signature_b64)
    except (ValueError, json.JSONDecodeError) as exc:
        raise InvalidToken(f"malformed token: {exc}") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise InvalidToken("malformed token")
    return header, claims, f"{header_b64}.{claims_b64}".encode(), signature


def check_claims(claims: dict[str, Any], audience: str, now: datetime) -> dict[str, Any]:
    """`claims` when issued-at, expiry (against `now`) and audience hold; InvalidToken otherwise.

    The signature is checked before this, by whoever holds the keys (gcp/rs256.verify_rs256)."""
    timestamp = now.timestamp()
    try:
        issued, expires = float(claims["iat"]), float(claims["exp"])
    except (KeyError, TypeError, ValueError):
        raise InvalidToken("token has no valid iat/exp") from None
    if issued > timestamp + CLOCK_SKEW_S:
        raise InvalidToken("token used before it was issued")
    if expires < timestamp - CLOCK_SKEW_S:
        raise InvalidToken("token expired")
    aud = claims.get("aud")
    if aud != audience:
        raise InvalidToken(f"audience {aud!r} is not {audience!r}")
    return claims
