"""A local stand-in for Google's token signing: RS256 ID tokens checked against a local cert.

Tokens look like a Compute Engine instance identity token requested with `format=full`
(`.../service-accounts/default/identity?audience=URL&format=full`):

    {"iss": "https://accounts.google.com", "aud": URL, "azp": SA_ID, "sub": SA_ID,
     "email": SA_EMAIL, "email_verified": true, "iat": ..., "exp": iat + 3600,
     "google": {"compute_engine": {"project_id", "project_number", "zone", "instance_id",
                                   "instance_name", "instance_creation_timestamp"}}}

`certs()` has the shape of https://www.googleapis.com/oauth2/v1/certs ({kid: PEM x509 cert}),
so `google.oauth2.id_token.verify_token(..., certs_url=...)` verifies these tokens unchanged.
"""

from __future__ import annotations

import copy
import hashlib
import secrets
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

ISSUER = "https://accounts.google.com"
TOKEN_LIFETIME_S = 3600


def service_account_id(email: str) -> str:
    """A stable 21-digit numeric id for a service account, like the `sub` Google puts in tokens."""
    digest = int.from_bytes(hashlib.sha256(email.encode()).digest()[:9], "big")
    return "1" + f"{digest:020d}"[-20:]


def instance_claims(*, service_account: str, project_id: str, project_number: int, zone: str,
                    instance_id: str, instance_name: str, created_at: datetime,
                    full: bool = True) -> dict[str, Any]:
    """The identity claims of one VM (everything but iss/aud/iat/exp, which the signer adds)."""
    account_id = service_account_id(service_account)
    claims: dict[str, Any] = {"azp": account_id, "sub": account_id}
    if full:
        claims["email"] = service_account
        claims["email_verified"] = True
        claims["google"] = {"compute_engine": {
            "project_id": project_id,
            "project_number": int(project_number),
            "zone": zone,
            "instance_id": str(instance_id),
            "instance_name": instance_name,
            "instance_creation_timestamp": int(created_at.timestamp()),
        }}
    return claims


class LocalSigner:
    """Holds one RSA key and its self-signed certificate; signs ID tokens with it.

    `clock` returns epoch seconds; tests pass an old clock to mint expired tokens. The fault
    simulation signs tens of thousands of tokens and asks for a smaller `key_size`.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time, lifetime_s: int = TOKEN_LIFETIME_S,
                 common_name: str = "spotcron-local-signer", key_size: int = 2048):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import NameOID

        from spotcron.gcp.rs256 import RS256Signer

        self._clock = clock
        self.lifetime_s = lifetime_s
        key = rsa.generate_private_key(public_exponent=65537, key_size=key_size)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        not_before = datetime.fromtimestamp(clock(), UTC) - timedelta(days=1)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_before + timedelta(days=3650))
            .sign(key, hashes.SHA256())
        )
        public_der = key.public_key().public_bytes(serialization.Encoding.DER,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo)
        self.key_id = hashlib.sha1(public_der).hexdigest()
        self._cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
        key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
        self._signer = RS256Signer(key_pem, self.key_id)

    def with_clock(self, clock: Callable[[], float]) -> LocalSigner:
        """The same key and certificate, signing on another clock (a copy; this one is unchanged)."""
        other = copy.copy(self)
        other._clock = clock
        return other

    def sign_identity(self, audience: str, claims: Mapping[str, Any]) -> str:
        """A signed JWT for `audience`; `claims` may override anything, iat and exp included.

        Each token carries a random `jti`: Compute Engine mints a distinct token per request,
        and a replay guard keyed on the token must see retries as new tokens here too.
        """
        issued_at = int(self._clock())
        payload: dict[str, Any] = {
            "iss": ISSUER,
            "aud": audience,
            "iat": issued_at,
            "exp": issued_at + self.lifetime_s,
            "jti": secrets.token_hex(8),
            **claims,
        }
        return self._signer.encode(payload)

    def certs(self) -> dict[str, str]:
        """{key id: PEM certificate}, the format of Google's oauth2/v1/certs."""
        return {self.key_id: self._cert_pem}
