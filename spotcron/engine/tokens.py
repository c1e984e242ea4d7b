"""RS256 identity tokens: decoding, and verification against a clock we are given.

Local mode and the fault simulation sign their own instance identity tokens (Google signs them
on a real VM). Verification here is real: signature against the issuer's keys, audience,
expiry and issued-at against `now`, so a simulated month can run on a fake clock.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
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


def verify_rs256(token: str, certs: Mapping[str, str], audience: str, now: datetime) -> dict[str, Any]:
    """Verified claims of `token`, signed by one of `certs` (key id → PEM cert or public key)."""
    from google.auth import crypt

    header, claims, signed, signature = decode_unverified(token)
    if header.get("alg") != "RS256":
        raise InvalidToken(f"unexpected algorithm {header.get('alg')!r}")
    keys = [certs[header["kid"]]] if header.get("kid") in certs else list(certs.values())
    if not any(crypt.RSAVerifier.from_string(pem).verify(signed, signature) for pem in keys):
        raise InvalidToken("signature does not verify")
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
