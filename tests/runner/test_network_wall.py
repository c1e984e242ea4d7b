"""The runner's metadata wall on a real network: real iptables in network namespaces, a real
podman container, a DNS and an HTTP server answering on the metadata server's address.

On Compute Engine a VM's resolver is the metadata server (169.254.169.254:53), and a container's
DNS queries leave from its own network namespace. The wall must drop the metadata server's HTTP
(its tokens) and let DNS through: a walled container resolves a name and reaches an "internet"
address, and cannot reach the metadata server. Everything lives in namespaces this test makes
(loopback and TEST-NET addresses only); every wait is bounded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.local import podman_image

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LAB = HERE / "netlab.sh"
APPLETS = (*podman_image.APPLETS, "nslookup")
IMAGE = podman_image.session_image("netlab")


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root: it makes network namespaces and sets iptables rules (run as root, e.g. in CI)"
    missing = [tool for tool in ("unshare", "nsenter", "ip", "iptables", "ip6tables", "sysctl") if not shutil.which(tool)]
    if missing:
        return f"needs {', '.join(missing)} (util-linux, iproute2, iptables)"
    probe = subprocess.run(["unshare", "--net", "--mount", "--fork", "sh", "-c",
                            "mount --make-rprivate / && iptables -w -S >/dev/null"],
                           capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"cannot make a network namespace with iptables here: {probe.stderr.strip()[-300:]}"
    return None


def test_a_walled_container_resolves_names_and_reaches_the_internet_but_not_the_metadata_server(tmp_path):
    reason = _why_not()
    if reason:
        pytest.skip(reason)
    with podman_image.ready(tmp_path, IMAGE, APPLETS) as podman:
        done = subprocess.run(["unshare", "--net", "--mount", "--fork", "bash", str(LAB), str(REPO), podman.image,
                               str(tmp_path), str(podman.containers_conf)],
                              capture_output=True, text=True, timeout=240)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    seen = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line and line[:1].isupper())
    assert seen.get("NETWORK_ARGS") == "--network spotcron-lab", output
    assert seen.get("METADATA", "").find("METADATA-SECRET-TOKEN") == -1, output  # the wall holds
    assert seen.get("RESOLVED") == "198.51.100.10", output  # DNS at the metadata address answers
    assert seen.get("TCP53") == "open", output  # over TCP too (large answers)
    assert seen.get("INTERNET") == "hello from the internet", output
