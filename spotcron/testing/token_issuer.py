"""A test identity: ports.Identity on a clock we are given, issuing and checking its own tokens."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spotcron.gcp.rs256 import verify_rs256

_SHARED: dict[int, Any] = {}  # key size → the signer whose key the harnesses of this process share


class ClockedIdentity:
    """ports.Identity on a clock we are given, with a LocalSigner issuing tokens on the same clock.

    Tests and the fault simulation run on a fake clock, where google-auth's own verification
    (which reads the real time) would call every token expired or not yet valid.
    """

    def __init__(self, clock, *, key_size: int = 2048, shared_key: bool = False):
        from spotcron.local.signer import LocalSigner

        self.clock = clock
        ticks = lambda: clock.now().timestamp()  # noqa: E731 - the signer's clock: this one's time
        if shared_key:
            # Making a 2048-bit key takes about half a second; the harness of every test would pay
            # it. Harnesses share one key per process, each on its own clock; an identity that must
            # not be trusted (a forger's) is made with a key of its own, the default.
            if key_size not in _SHARED:
                _SHARED[key_size] = LocalSigner(clock=ticks, key_size=key_size)
            self.signer = _SHARED[key_size].with_clock(ticks)
        else:
            self.signer = LocalSigner(clock=ticks, key_size=key_size)
        self.certs = self.signer.certs()

    def verify(self, token: str, audience: str) -> dict[str, Any]:
        return verify_rs256(token, self.certs, audience, self.clock.now())

    def issue(self, audience: str, claims: Mapping[str, Any], lifetime_s: int = 3600) -> str:
        expires = int(self.clock.now().timestamp()) + lifetime_s
        return self.signer.sign_identity(audience, {"exp": expires, **claims})
