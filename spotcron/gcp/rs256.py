"""RS256 tokens with google-auth's crypt: verification against keys we hold, and local signing.

engine/token_claims.py decodes a token and checks its claims against a clock we are given; this
module adds the signature (verify_rs256) and signs tokens for local mode's stand-in of Google's
token service (local/signer.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from spotcron.core.errors import InvalidToken
from spotcron.engine.token_claims import check_claims, decode_unverified


def verify_rs256(token: str, certs: Mapping[str, str], audience: str, now: datetime) -> dict[str, Any]:
    """Verified claims of `token`, signed by one of `certs` (key id → PEM cert or public key)."""
    from google.auth import crypt

    header, claims, signed, signature = decode_unverified(token)
    if header.get("alg") != "RS256":
        raise InvalidToken(f"unexpected algorithm {header.get('alg')!r}")
    keys = [certs[header["kid"]]] if header.get("kid") in certs else list(certs.values())
    if not any(crypt.RSAVerifier.from_string(pem).verify(signed, signature) for pem in keys):
        raise InvalidToken("signature does not verify")
    return check_claims(claims, audience, now)


class RS256Signer:
    """Signs JWTs with one RSA private key (PEM), its `key_id` in each token's header."""

    def __init__(self, key_pem: bytes, key_id: str):
        from google.auth import crypt

        self._signer = crypt.RSASigner.from_string(key_pem, key_id=key_id)

    def encode(self, payload: Mapping[str, Any]) -> str:
        from google.auth import jwt

        return jwt.encode(self._signer, dict(payload)).decode()
