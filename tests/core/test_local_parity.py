"""A job that only works locally: a stock image, a local command, and nothing that tells the VM
to run the job's code (no command:, args: or build:)."""

from __future__ import annotations

import pytest

from spotcron.core.local_parity import local_command_warnings, stock_image
from spotcron.core.spec import JobSpec

LOCAL = {"local": {"command": "python3 bot/bot.py"}}


def job(**fields) -> JobSpec:
    return JobSpec.model_validate({"name": "mybot", "schedule": "0 * * * *", **fields})


@pytest.mark.parametrize(("image", "stock"), [
    ("python:3.11-slim", True), ("library/python:3.12", True), ("docker.io/library/busybox:1.36", True),
    ("mirror.gcr.io/library/python:3.11-slim", True), ("me/bot:1", False), ("mirror.gcr.io/me/bot:1", False),
    ("us-docker.pkg.dev/p/r/bot:1", False), ("spotcron/bot:latest", False),
])
def test_stock_images_are_docker_hubs_official_ones(image, stock):
    assert stock_image(image) is stock


def test_a_stock_image_with_only_a_local_command_is_warned_about():
    [warning] = local_command_warnings(job(image="mirror.gcr.io/library/python:3.11-slim", **LOCAL))
    assert warning.startswith("local.command runs `python3 bot/bot.py` on this machine, but on a VM the job runs "
                              "mirror.gcr.io/library/python:3.11-slim's own default command (the job has no "
                              "command:, args: or build:)")
    assert "Build an image with your code (build: " in warning and "or write command:" in warning


@pytest.mark.parametrize("fields", [
    {"image": "mirror.gcr.io/library/python:3.11-slim", "command": "python3 -c 'print(1)'"},
    {"image": "mirror.gcr.io/library/busybox:1.36", "args": ["sh", "-c", "date"]},
    {"image": "us-docker.pkg.dev/p/r/bot:1"},  # the user's own image: its entrypoint may be the script
    {"build": "vm_images/bot"},
])
def test_a_job_that_says_what_its_vm_runs_is_not(fields):
    assert local_command_warnings(job(**fields, **LOCAL)) == []
    assert local_command_warnings(job(**{k: v for k, v in fields.items()})) == []  # no local command at all


def test_each_matrix_entry_is_judged_with_its_own_image_and_build():
    spec = job(image="python:3.12", **LOCAL, matrix=[{"name": "built", "build": "vm_images/bot"}, {"name": "stock"}])
    assert [w.split(":")[0] for w in local_command_warnings(spec)] == ["matrix entry 'stock'"]
