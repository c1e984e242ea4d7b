"""What a hostile job can't do through the runner: steer an upload to a
host file by swapping its outputs for links while they are uploaded, or reach the metadata
server (and the VM's tokens) from its container unless the job opted in."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import sys
import uuid
from pathlib import Path

import pytest

from tests.runner.harness import JOB, FaultProxy, RunnerHarness, needs_runner_tools

PREFIX = "runs/hello/20260101-1000/"
ATTEMPT1 = PREFIX + "attempt-1/"

pytestmark = [pytest.mark.slow, needs_runner_tools]


def _host_secret(tmp: Path) -> tuple[Path, bytes]:
    folder = tmp / "host"
    folder.mkdir()
    marker = f"HOST-SECRET-{uuid.uuid4()}".encode()
    secret = folder / "secret.txt"
    secret.write_bytes(marker + b"\n")
    return secret, marker


@pytest.mark.parametrize("checkpoint", [False, True])
def test_outputs_swapped_for_links_while_uploading_never_upload_a_host_file(harness: RunnerHarness, checkpoint):
    secret, marker = _host_secret(harness.tmp)
    pidfile = harness.tmp / "swapper.pid"
    proxy = FaultProxy(harness.bucket.url)
    proxy.start()
    harness.storage_url = proxy.base_url
    extra = {"checkpoint_path": "/checkpoint"} if checkpoint else {}
    try:
        result = harness.run(harness.descriptor(
            local_command=[sys.executable, str(JOB), "swap", str(secret), "20", str(pidfile)], **extra))
    finally:
        proxy.stop()
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pidfile.read_text()), signal.SIGKILL)

    assert result.rc == 0, result.stderr
    uploads = [body for body in proxy.bodies if body]
    leaked = [body[:60] for body in uploads if marker in body]
    assert leaked == [], f"{len(leaked)} of {len(uploads)} uploads carried the host file"
    manifest = json.loads(harness.bucket.read(ATTEMPT1 + "manifest.json"))
    # The race was run: the runner met result files while they were being swapped, and stored or
    # skipped each. How many of each depends on the swapping (2 uploads in all once: every result
    # skipped), so the count is of files met, not of uploads.
    met = [f for f in manifest["files"] if f["name"].startswith("results/")] + manifest["skipped"]
    assert len(met) >= 3, manifest
    safe = hashlib.sha256(b"safe\n").hexdigest()
    # What was stored is the job's own content; a file moved while it was being read is skipped,
    # so how many are stored depends on the swapping, never what.
    assert {f["sha256"] for f in manifest["files"] if f["name"].startswith("results/")} <= {safe}


# --- the container and the metadata server ----------------------------------------------------


def _dns_rules(chain: str, address: str) -> list[str]:
    """What the wall does for DNS after a new DROP: any old ACCEPT goes, a new one goes above the DROP."""
    calls = []
    for proto in ("udp", "tcp"):
        rule = f"{chain} -i spotcron0 -d {address} -p {proto} --dport 53 -j ACCEPT"
        calls += [f"-w -D {rule}", f"-w -C {rule}", f"-w -I {rule}"]
    return calls


def test_the_container_runs_on_a_network_that_drops_the_metadata_server(harness: RunnerHarness):
    result = harness.run(harness.descriptor(), docker=harness.fake_docker)

    assert result.rc == 0, result.stderr
    calls = harness.docker_calls()
    assert ["network", "inspect", "spotcron"] in calls
    assert ["network", "create", "--driver", "bridge", "-o", "com.docker.network.bridge.name=spotcron0",
            "spotcron"] in calls
    # DNS to the metadata server's address is let through, above the DROP (the VM's resolver is there).
    assert harness.iptables_calls() == [
        "-w -C DOCKER-USER -i spotcron0 -d 169.254.169.254/32 -j DROP",
        "-w -I DOCKER-USER -i spotcron0 -d 169.254.169.254/32 -j DROP",
        *_dns_rules("DOCKER-USER", "169.254.169.254/32"),
    ]
    # Compute Engine's metadata server also answers on IPv6, at fd20:ce::254.
    assert harness.iptables_calls("ip6tables") == [
        "-w -n -L DOCKER-USER",
        "-w -C DOCKER-USER -i spotcron0 -d fd20:ce::254/128 -j DROP",
        "-w -I DOCKER-USER -i spotcron0 -d fd20:ce::254/128 -j DROP",
        *_dns_rules("DOCKER-USER", "fd20:ce::254/128"),
    ]
    [run] = [argv for argv in calls if argv[0] == "run"]
    assert run[run.index("--network") + 1] == "spotcron"
    assert "host" not in run
    assert harness.receiver.accepted[0].body["exit_code"] == 0


def test_without_docker_ipv6_rules_the_ipv6_wall_goes_first_in_forward(harness: RunnerHarness):
    # A docker that writes no IPv6 rules has no DOCKER-USER chain in ip6tables.
    Path(harness.fake_ip6tables).write_text(
        f'#!/bin/sh\necho "$*" >> "{harness.tmp}/ip6tables.log"\n'
        'case "$*" in *-L*|*-C*) echo "ip6tables: No chain/target/match by that name." >&2; exit 1;; esac\n')
    result = harness.run(harness.descriptor(), docker=harness.fake_docker)

    assert result.rc == 0, result.stderr
    assert harness.iptables_calls("ip6tables") == [
        "-w -n -L DOCKER-USER",
        "-w -C FORWARD -i spotcron0 -d fd20:ce::254/128 -j DROP",
        "-w -I FORWARD -i spotcron0 -d fd20:ce::254/128 -j DROP",
        *_dns_rules("FORWARD", "fd20:ce::254/128"),
    ]
    assert [argv for argv in harness.docker_calls() if argv[0] == "run"]


def test_a_second_attempt_on_the_same_machine_reuses_the_network_and_the_rule(harness: RunnerHarness):
    harness.run(harness.descriptor(), docker=harness.fake_docker)
    for tool in ("iptables", "ip6tables"):  # the rules are there now
        (harness.tmp / tool).write_text(f'#!/bin/sh\necho "$*" >> "{harness.tmp}/{tool}.log"\nexit 0\n')
        (harness.tmp / f"{tool}.log").unlink()
    (harness.tmp / "docker.jsonl").unlink()
    harness.run(harness.descriptor(), docker=harness.fake_docker)

    assert not [argv for argv in harness.docker_calls() if argv[:2] == ["network", "create"]]
    dns = "-w -C {} -i spotcron0 -d {} -p {} --dport 53 -j ACCEPT"
    assert harness.iptables_calls() == ["-w -C DOCKER-USER -i spotcron0 -d 169.254.169.254/32 -j DROP",
                                        *(dns.format("DOCKER-USER", "169.254.169.254/32", p) for p in ("udp", "tcp"))]
    assert harness.iptables_calls("ip6tables") == ["-w -n -L DOCKER-USER",
                                                   "-w -C DOCKER-USER -i spotcron0 -d fd20:ce::254/128 -j DROP",
                                                   *(dns.format("DOCKER-USER", "fd20:ce::254/128", p)
                                                     for p in ("udp", "tcp"))]


def test_a_job_that_opts_in_gets_the_host_network_and_no_rule(harness: RunnerHarness):
    result = harness.run(harness.descriptor(metadata_access=True), docker=harness.fake_docker)

    assert result.rc == 0, result.stderr
    calls = harness.docker_calls()
    assert not [argv for argv in calls if argv[0] == "network"]
    assert harness.iptables_calls() == harness.iptables_calls("ip6tables") == []
    [run] = [argv for argv in calls if argv[0] == "run"]
    assert run[run.index("--network") + 1] == "host"


@pytest.mark.parametrize("tool", ["iptables", "ip6tables"])
def test_without_its_wall_the_job_does_not_run_and_the_logs_say_why(harness: RunnerHarness, tool: str):
    wrapper = harness.fake_iptables if tool == "iptables" else harness.fake_ip6tables
    Path(wrapper).write_text(f"#!/bin/sh\necho '{tool}: Permission denied' >&2\nexit 4\n")
    result = harness.run(harness.descriptor(), docker=harness.fake_docker)

    assert result.rc == 0, result.stderr
    assert not [argv for argv in harness.docker_calls() if argv[0] == "run"]
    [call] = harness.receiver.accepted
    assert (call.body["status"], call.body["exit_code"], call.body["started_at"]) == ("exited", None, None)
    why = (b"could not block the metadata server for the job network; the job does not run without its wall"
           if tool == "iptables" else b"the job does not run without its wall (" + wrapper.encode() + b" failed)")
    assert why in harness.bucket.read(ATTEMPT1 + "logs.txt")
