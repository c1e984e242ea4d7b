"""Local mode through the real credentials broker, as on Google Cloud (docs/security.md).

The stack serves the `credentials` function of functions/main.py; every descriptor names it;
the runner trades its VM's identity token there for its attempt's storage token. The VM's own
access token (the metadata server's) reaches no storage at all.
"""

from __future__ import annotations

import json
import os

import pytest

from spotcron.core import layout
from spotcron.core.loader import load_job_file
from spotcron.local.stack import LocalStack
from tests.local.conftest import python_job, write_job

pytestmark = pytest.mark.slow

CODE = ("import os, pathlib; env = os.environ;"
        " pathlib.Path(env['SPOTCRON_RESULTS_DIR'], 'one.txt').write_text('1');"
        " pathlib.Path(env['SPOTCRON_CHECKPOINT_DIR'], 'step').write_text('7'); print('ran')")
JOB = python_job(CODE, extra="checkpoint: /checkpoint\n")


@pytest.fixture
def stack(tmp_path):
    started = LocalStack(tmp_path / "state", environ=dict(os.environ), cwd=tmp_path, runtime_for=lambda image: None,
                         sweep_interval=3600, grace=20).start()
    yield started
    started.stop()


def test_a_local_run_stores_everything_with_the_brokers_token(stack, tmp_path):
    """Every kind of object a runner writes, through a token fetched from the broker: a single
    small file, the logs, the hardware it measured, the manifest, and the checkpoint (downloaded
    first, then uploaded).
    A broker refresh once re-encoded the object name of the request being built (the 403s)."""
    spec = load_job_file(write_job(tmp_path / "jobs", "writer", JOB))
    [(job, run_id)] = runs = stack.run_now(spec)
    [record] = stack.wait(runs, timeout=90)

    assert record.state == "succeeded", record.reason
    prefix = layout.attempt_prefix(job, run_id, 1)
    assert stack.bucket.names(layout.run_prefix(job, run_id)) == sorted([
        layout.checkpoint_archive(job, run_id), layout.hardware(job, run_id, 1), prefix + "logs.txt",
        prefix + "manifest.json", prefix + "results/one.txt", layout.run_record(job, run_id)])
    assert record.hardware is not None and record.hardware.local  # measured, and read back into the record
    assert b"ran" in stack.bucket.read(prefix + "logs.txt")
    minted = [json.loads(line) for line in (tmp_path / "state" / "spotcron.log").read_text().splitlines()
              if '"event": "credentials"' in line]
    assert minted and {(m["job"], m["run_id"], m["attempt"]) for m in minted} == {(job, run_id, 1)}


def test_the_descriptors_credentials_url_is_the_stacks_broker(stack):
    """Settings carry it into every descriptor (engine/attempts.instance_request); the deployed
    entry point answers there: no identity token, no storage token."""
    import urllib.error
    import urllib.request

    url = stack.settings.credentials_url
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(urllib.request.Request(url, data=b"{}", method="POST"), timeout=10)
    assert refused.value.code == 401
    assert "send the VM's identity token" in json.loads(refused.value.read())["error"]
