"""Where a job's VM can reach: `internet:`, images outside Google's registries, and init's example."""

from __future__ import annotations

import pytest

from spotcron.cli.scaffold import JOB_TEXT
from spotcron.core.egress import image_host, nat_warning, network_warnings, pull_problem
from spotcron.core.errors import ConfigError
from spotcron.core.loader import load_jobs
from spotcron.core.spec import JobSpec
from spotcron.deploy.validate import preflight
from tests.deploy.conftest import make_settings


def _job(**fields) -> JobSpec:
    return JobSpec(name="bot", schedule="0 * * * *", **fields)


@pytest.mark.parametrize(("image", "host"), [
    ("busybox:1.36", "docker.io"), ("library/busybox", "docker.io"), ("ghcr.io/o/i:1", "ghcr.io"),
    ("us-central1-docker.pkg.dev/p/r/i:1", "us-central1-docker.pkg.dev"), ("mirror.gcr.io/library/busybox", "mirror.gcr.io"),
    ("localhost:5000/x", "localhost"),
])
def test_image_hosts(image, host):
    assert image_host(image) == host


def test_internet_gives_the_vm_an_external_address_unless_the_file_says_a_nat_does():
    assert _job(image="busybox", internet=True).external_ip is True
    assert JobSpec.from_payload(_job(image="busybox", internet=True).to_payload()).external_ip is True
    nat = _job(image="busybox", internet=True, external_ip=False)
    assert nat.external_ip is False and nat.has_egress
    assert "Cloud NAT" in nat_warning(nat)
    assert "internet" not in _job(image="busybox").to_payload()  # old specs keep their digests


def test_an_image_its_vm_cannot_pull_is_named_with_the_ways_out():
    problem = pull_problem(_job(image="busybox:1.36"))
    assert "docker.io" in problem and "mirror.gcr.io" in problem and "internet: true" in problem
    for fine in (_job(image="busybox:1.36", internet=True), _job(image="mirror.gcr.io/library/busybox:1.36"),
                 _job(image="us-central1-docker.pkg.dev/p/r/i:1"), _job(image="busybox", external_ip=True),
                 _job(build="vm_images/bot")):
        assert pull_problem(fine) is None


def test_a_matrix_entry_on_docker_hub_is_named():
    job = _job(image="mirror.gcr.io/library/python:3.12",
               matrix=[{"name": "ok"}, {"name": "hub", "image": "python:3.12"}])
    assert pull_problem(job).startswith("matrix entry 'hub': image 'python:3.12'")


def test_deploy_refuses_it_before_any_call(tmp_path):
    with pytest.raises(ConfigError) as caught:
        preflight(make_settings(), [_job(image="busybox:1.36")], None, {"bot": tmp_path / "jobs" / "bot.yaml"})
    assert "outside Google's registries" in str(caught.value)


def test_inits_example_deploys_as_written(tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "hello.yaml").write_text(JOB_TEXT)
    [job] = load_jobs([tmp_path / "jobs"])
    assert network_warnings(job) == []
    preflight(make_settings(), [job], None)  # nothing to refuse
