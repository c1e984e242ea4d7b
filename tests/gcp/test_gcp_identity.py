"""GoogleIdentity (ports.Identity) verifying tokens signed by LocalSigner, served like Google's certs."""

from __future__ import annotations

import base64
import json
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from spotcron.core.errors import InvalidToken, Transient
from spotcron.engine.ports import Identity
from spotcron.gcp.id_tokens import GoogleIdentity
from spotcron.local.signer import LocalSigner, instance_claims

AUDIENCE = "https://us-central1-p.cloudfunctions.net/job_done"
VM_ACCOUNT = "spotcron-vm@p.iam.gserviceaccount.com"


class CertsServer:
    """Serves one or more signers' certificates as https://www.googleapis.com/oauth2/v1/certs does."""

    def __init__(self, *signers: LocalSigner):
        self.signers = list(signers)
        self.requests = 0
        self.status = 200
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802
                outer.requests += 1
                certs = {}
                for signer in outer.signers:
                    certs.update(signer.certs())
                body = json.dumps(certs).encode()
                self.send_response(outer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/oauth2/v1/certs"


@pytest.fixture(scope="module")
def signer() -> LocalSigner:
    return LocalSigner()


@pytest.fixture
def certs(signer):
    server = CertsServer(signer)
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()
    server.thread.join()


def vm_claims(**changes):
    claims = instance_claims(service_account=VM_ACCOUNT, project_id="p", project_number=123456789012,
                             zone="us-central1-a", instance_id="4340508760561261530",
                             instance_name="sc-hello-20260101-1000-a1",
                             created_at=datetime(2026, 1, 1, 10, 0, tzinfo=UTC))
    claims.update(changes)
    return claims


def test_a_valid_token_yields_the_instance_claims(signer, certs):
    identity = GoogleIdentity(certs.url)
    assert isinstance(identity, Identity)

    claims = identity.verify(signer.sign_identity(AUDIENCE, vm_claims()), AUDIENCE)

    assert claims["aud"] == AUDIENCE
    assert claims["iss"] == "https://accounts.google.com"
    assert claims["email"] == VM_ACCOUNT and claims["email_verified"] is True
    assert claims["sub"] == claims["azp"] and claims["sub"].isdigit()
    assert claims["exp"] - claims["iat"] == 3600
    assert claims["google"]["compute_engine"] == {
        "project_id": "p", "project_number": 123456789012, "zone": "us-central1-a",
        "instance_id": "4340508760561261530", "instance_name": "sc-hello-20260101-1000-a1",
        "instance_creation_timestamp": int(datetime(2026, 1, 1, 10, 0, tzinfo=UTC).timestamp()),
    }


def test_each_token_is_distinct_like_compute_engine_mints_them(signer):
    assert signer.sign_identity(AUDIENCE, vm_claims()) != signer.sign_identity(AUDIENCE, vm_claims())


def test_wrong_audience_is_refused(signer, certs):
    token = signer.sign_identity("https://elsewhere.example/job_done", vm_claims())
    with pytest.raises(InvalidToken, match=r"^wrong audience 'https://elsewhere.example/job_done', "
                                           r"expected 'https://us-central1-p.cloudfunctions.net/job_done'$"):
        GoogleIdentity(certs.url).verify(token, AUDIENCE)


def test_expired_token_is_refused(certs):
    two_hours_ago = time.time() - 7200
    old = LocalSigner(clock=lambda: two_hours_ago)
    certs.signers.append(old)
    with pytest.raises(InvalidToken, match=r"^token expired$"):
        GoogleIdentity(certs.url).verify(old.sign_identity(AUDIENCE, vm_claims()), AUDIENCE)


def test_token_from_the_future_is_refused(signer, certs):
    token = signer.sign_identity(AUDIENCE, vm_claims(iat=int(time.time()) + 600))
    with pytest.raises(InvalidToken, match=r"^token issued in the future \(iat\)$"):
        GoogleIdentity(certs.url).verify(token, AUDIENCE)


def test_tampered_claims_break_the_signature(signer, certs):
    header, payload, signature = signer.sign_identity(AUDIENCE, vm_claims()).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["google"]["compute_engine"]["instance_name"] = "someone-elses-vm"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    with pytest.raises(InvalidToken, match=r"^bad signature$"):
        GoogleIdentity(certs.url).verify(f"{header}.{forged}.{signature}", AUDIENCE)


def test_a_key_google_does_not_publish_is_refused(certs):
    stranger = LocalSigner()
    with pytest.raises(InvalidToken, match=r"^signed by an unknown key \(kid [0-9a-f]{40}\)$"):
        GoogleIdentity(certs.url).verify(stranger.sign_identity(AUDIENCE, vm_claims()), AUDIENCE)


def test_wrong_issuer_is_refused(signer, certs):
    token = signer.sign_identity(AUDIENCE, vm_claims(iss="https://evil.example"))
    with pytest.raises(InvalidToken, match=r"^wrong issuer 'https://evil.example', expected one of "):
        GoogleIdentity(certs.url).verify(token, AUDIENCE)


@pytest.mark.parametrize(("token", "reason"), [
    ("", "no token"),
    ("   ", "no token"),
    ("not-a-jwt", "malformed token: a JWT has three dot-separated parts"),
    ("a.b", "malformed token: a JWT has three dot-separated parts"),
    ("!!.??.##", "malformed token"),
    ("eyJhbGciOiJub25lIn0.eyJhdWQiOiJ4In0.", "unsupported algorithm none"),
])
def test_garbage_is_refused_with_a_short_reason(certs, token, reason):
    with pytest.raises(InvalidToken) as caught:
        GoogleIdentity(certs.url).verify(token, AUDIENCE)
    assert str(caught.value) == reason


def test_certificates_are_fetched_once_and_refetched_for_a_new_key(signer, certs):
    identity = GoogleIdentity(certs.url)
    for _ in range(3):
        identity.verify(signer.sign_identity(AUDIENCE, vm_claims()), AUDIENCE)
    assert certs.requests == 1

    rotated = LocalSigner()
    certs.signers.append(rotated)  # Google published a new key since our cache was filled
    identity.verify(rotated.sign_identity(AUDIENCE, vm_claims()), AUDIENCE)
    assert certs.requests == 2


def test_certificates_expire_from_the_cache(signer, certs):
    now = [0.0]
    identity = GoogleIdentity(certs.url, certs_ttl_s=300, clock=lambda: now[0])
    identity.verify(signer.sign_identity(AUDIENCE, vm_claims()), AUDIENCE)
    now[0] = 301.0
    identity.verify(signer.sign_identity(AUDIENCE, vm_claims()), AUDIENCE)
    assert certs.requests == 2


def test_unreachable_certificates_are_transient_not_the_callers_fault(signer, certs):
    certs.status = 503
    with pytest.raises(Transient, match="could not fetch token certificates from http://127.0.0.1:"):
        GoogleIdentity(certs.url).verify(signer.sign_identity(AUDIENCE, vm_claims()), AUDIENCE)


def test_the_metadata_server_tokens_verify_against_its_certs_url():
    import urllib.request

    from spotcron.local.metadata import LocalMetadataServer

    with LocalMetadataServer() as metadata:
        metadata.register("vm-a", "europe-west1-b", {}, project="proj-x", instance_id="77")
        request = urllib.request.Request(
            metadata.url_for("vm-a") + f"/instance/service-accounts/default/identity?audience={AUDIENCE}&format=full",
            headers={"Metadata-Flavor": "Google"})
        token = urllib.request.urlopen(request, timeout=5).read().decode()
        claims = GoogleIdentity(metadata.certs_url).verify(token, AUDIENCE)
    assert claims["google"]["compute_engine"]["instance_name"] == "vm-a"
    assert claims["google"]["compute_engine"]["project_id"] == "proj-x"
    assert claims["google"]["compute_engine"]["instance_id"] == "77"
