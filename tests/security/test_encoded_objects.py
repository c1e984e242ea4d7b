"""Objects a job uploads with a Content-Encoding are never inflated by spotcron.

GcsBlobs (the Blobs port on Cloud Storage, and in local mode on the local storage server) asks
for the stored bytes: a Range counts stored bytes, and an object stored with any Content-Encoding
is refused with EncodedObject instead of being decoded. Driven on the local storage server, which
models Cloud Storage's decompressive transcoding (tests/contracts).
"""

from __future__ import annotations

import gzip
import http.client
import random
import zlib

import pytest
import requests

from spotcron.core.errors import EncodedObject
from spotcron.engine.broker import boundary_rules
from spotcron.gcp.error_map import translate
from spotcron.local.bucket import LocalBucket
from tests.contracts.storage_servers import StorageApi
from tests.contracts.test_storage_cloud_behaviour_contract import _media, _multipart


@pytest.fixture(scope="module")
def bucket():
    with LocalBucket(None, "spotcron-encoded") as served:
        yield served


def upload(bucket, name: str, data: bytes, encoding: str) -> None:
    """What a job's container may do with its attempt's token: store bytes with any Content-Encoding."""
    token = bucket.downscoped_token(boundary_rules(bucket.bucket, "bot", "r", 1))
    job = StorageApi("local-server", bucket.url, bucket.bucket, token)
    assert _multipart(job, {"name": name, "contentEncoding": encoding}, data).status == 200


@pytest.mark.parametrize(("encoding", "data"), [
    ("gzip", gzip.compress(b" " * (8 << 20))),
    ("gzip", b"not gzip at all"),
    ("deflate", zlib.compress(b" " * (8 << 20))),
    ("br", b"\x00\x01"),
])
def test_an_encoded_object_is_refused_by_read_and_read_range_never_inflated(bucket, encoding, data):
    name = f"runs/bot/r/attempt-1/results/{encoding}-{len(data)}"
    upload(bucket, name, data, encoding)
    blobs = bucket.blobs()
    with pytest.raises(EncodedObject, match="stored compressed"):
        blobs.read_range(name, 0, 1024)
    with pytest.raises(EncodedObject, match="stored compressed"):
        blobs.read(name)


def test_a_body_that_does_not_decode_is_an_encoded_object_not_a_crash():
    error = translate(requests.exceptions.ContentDecodingError("bad gzip"), "read gs://b/x")
    assert isinstance(error, EncodedObject)
    assert "could not be decoded" in str(error)


@pytest.mark.parametrize("stored", [b"not gzip at all", gzip.compress(random.Random(24).randbytes(1 << 20))[:300_000]],
                         ids=["not-gzip", "truncated-gzip"])
def test_the_local_server_cuts_a_transcoded_body_that_does_not_decode_and_serves_on(bucket, stored, caplog):
    """A reader that does not accept gzip gets the object decompressed (Cloud Storage's decompressive
    transcoding). When the stored gzip does not decode, or ends early, the local storage server
    closes the connection before the body's end (the reader sees an incomplete body, never a
    shorter one that looks whole) and goes on serving: no traceback, no reply written into a body."""
    name = f"runs/bot/r/attempt-1/results/cut-{len(stored)}"
    upload(bucket, name, stored, "gzip")
    job = StorageApi("local-server", bucket.url, bucket.bucket,
                     bucket.downscoped_token(boundary_rules(bucket.bucket, "bot", "r", 1)))
    with pytest.raises(http.client.IncompleteRead):
        _media(job, name, {"Accept-Encoding": "identity"})
    raw = _media(job, name, {"Accept-Encoding": "gzip"})
    assert raw.status == 200 and raw.body == stored
    errors = [r.getMessage() for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert not errors, errors  # a job's bytes are not the server failing
