from __future__ import annotations

import pytest

from spotcron.gcp.id_tokens import GoogleIdentity
from spotcron.local.bucket import LocalBucket
from spotcron.local.metadata import LocalMetadataServer
from spotcron.local.signer import LocalSigner
from tests.runner.harness import BUCKET, CredentialsBroker, Receiver, RunnerHarness


@pytest.fixture(scope="session")
def signer() -> LocalSigner:
    return LocalSigner()


@pytest.fixture
def metadata(signer):
    with LocalMetadataServer(signer, long_poll_s=10) as server:
        yield server


@pytest.fixture
def bucket():
    with LocalBucket(None, BUCKET) as served:
        yield served


@pytest.fixture
def receiver(metadata):
    served = Receiver(GoogleIdentity(metadata.certs_url))
    served.start()
    yield served
    served.stop()


@pytest.fixture
def broker(metadata, bucket):
    """The runner's storage tokens come from here, as on Google Cloud: only its own attempt's."""
    served = CredentialsBroker(GoogleIdentity(metadata.certs_url), metadata, bucket)
    served.start()
    yield served
    served.stop()


@pytest.fixture
def harness(tmp_path, metadata, bucket, receiver, broker) -> RunnerHarness:
    return RunnerHarness(tmp_path, metadata, bucket, receiver, broker)
