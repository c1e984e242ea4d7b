from __future__ import annotations

import pytest

from spotcron.gcp.identity import GoogleIdentity
from spotcron.local.bucket import LocalBucket, vm_tokens
from spotcron.local.metadata import LocalMetadataServer
from spotcron.local.signer import LocalSigner
from tests.runner.harness import BUCKET, Receiver, RunnerHarness


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
def harness(tmp_path, metadata, bucket, receiver) -> RunnerHarness:
    metadata.access_tokens = vm_tokens(bucket)  # the runner's token reaches only its own attempt
    return RunnerHarness(tmp_path, metadata, bucket, receiver)
