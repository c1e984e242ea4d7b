"""Instance requests the Google adapter tests and the contract suites share."""

from __future__ import annotations

from spotcron.engine.ports import GpuRequest, InstanceRequest

ZONE = "us-central1-a"
VM_ACCOUNT = "spotcron-vm@test-project.iam.gserviceaccount.com"


def cpu_request(**overrides) -> InstanceRequest:
    """A Spot e2-small for job `bot`, run 20261122-1000, attempt 1."""
    values = dict(
        name="sc-bot-20261122-1000-a1", zone=ZONE, machine_type="e2-small", spot=True, max_run_duration_s=900,
        disk_gb=10, labels={"spotcron": "1", "job": "bot", "run": "20261122-1000", "attempt": "1"},
        metadata={"spotcron-run": '{"version":1}', "user-data": "#cloud-config\nruncmd: []\n"},
        service_account=VM_ACCOUNT)
    values.update(overrides)
    return InstanceRequest(**values)


def gpu_request(**overrides) -> InstanceRequest:
    """An on-demand n1-standard-8 with one T4 for job `bench`."""
    values = dict(name="sc-bench-20261122-1000-t4-a1", machine_type="n1-standard-8", spot=False,
                  max_run_duration_s=4200, disk_gb=50, gpu=GpuRequest("nvidia-tesla-t4", 1), secure_boot=False,
                  labels={"spotcron": "1", "job": "bench", "run": "20261122-1000-t4", "attempt": "1"})
    values.update(overrides)
    return cpu_request(**values)
