"""Job VMs are closed to the network ): no external address unless the job
asks for one, project SSH keys blocked, a network tag for deploy's deny-ingress rule, and the
address priced where a VM has one."""

from __future__ import annotations

from spotcron.cost.billing import run_cost
from spotcron.cost.prices import load_prices
from spotcron.gcp.compute import instance_body
from spotcron.testing.harness import make_spec

RUN = "20261122-1200"


def test_a_job_vm_has_no_external_address_and_blocks_project_ssh_keys(h):
    h.start(make_spec())
    [request] = h.compute.created
    assert request.external_ip is False
    body = instance_body(request)
    assert "accessConfigs" not in body["networkInterfaces"][0]
    assert {"key": "block-project-ssh-keys", "value": "true"} in body["metadata"]["items"]
    assert body["tags"] == {"items": ["spotcron-vm"]}


def test_a_job_that_asks_for_an_external_address_gets_one_and_pays_for_it(h):
    h.start(make_spec(external_ip=True))
    [request] = h.compute.created
    assert request.external_ip is True
    assert instance_body(request)["networkInterfaces"][0]["accessConfigs"] == [
        {"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]
    h.clock.advance(3600)
    h.finish_ok("bot", RUN)
    record = h.record("bot", RUN)
    assert record.attempts[0].external_ip is True
    table = load_prices(None)
    cost = run_cost(record, table, "us-central1")
    # One Spot VM-hour (plus the seconds of the callback) at the in-use Spot rate of an external IPv4.
    assert 0.0025 <= cost.items["external_ip"] < 0.0026
    without = run_cost(record.model_copy(update={"attempts": (record.attempts[0].model_copy(
        update={"external_ip": False}),)}), table, "us-central1")
    assert "external_ip" not in without.items and cost.total_usd > without.total_usd
