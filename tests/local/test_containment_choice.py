"""Which containment local VMs get, and what `spotcron up` says about it (no process started)."""

from __future__ import annotations

from spotcron.local.containment import PID_NAMESPACE, PROCESS_GROUP, detect


def UNSHARE(name: str) -> str:  # noqa: N802 - stands for shutil.which on a machine with util-linux
    return f"/usr/bin/{name}"


def test_root_gets_a_pid_namespace_without_a_user_namespace():
    tried = []
    found = detect(platform="linux", is_root=True, which=UNSHARE,
                   probe=lambda prefix: tried.append(prefix) or True)
    assert found.kind == PID_NAMESPACE and found.whole
    assert tried == [found.prefix] and "--user" not in found.prefix and "--kill-child" in found.prefix
    assert found.command(["bash", "runner.sh"], runtime=None)[-2:] == ["bash", "runner.sh"]
    # A container is a PID namespace of its own, which deleting the VM kills and removes.
    assert found.command(["bash", "runner.sh"], runtime="/usr/bin/podman") == ["bash", "runner.sh"]


def test_other_users_get_a_user_namespace_too():
    found = detect(platform="linux", is_root=False, which=UNSHARE, probe=lambda prefix: True)
    assert found.whole and found.prefix[1:3] == ("--user", "--map-root-user")
    assert found.command(["bash", "runner.sh"], runtime=None)[0] == "/usr/bin/unshare"
    assert found.command(["bash", "runner.sh"], runtime="/usr/bin/podman") == ["bash", "runner.sh"]


def test_where_no_namespace_can_be_made_the_statement_says_what_is_not_contained():
    refused = detect(platform="linux", is_root=False, which=UNSHARE, probe=lambda prefix: False)
    assert refused.kind == PROCESS_GROUP and refused.command(["x"], runtime=None) == ["x"]
    assert "daemonizes (setsid) can outlive its VM" in refused.statement
    assert "kernel.unprivileged_userns_clone" in refused.statement
    mac = detect(platform="darwin", probe=lambda prefix: True)
    assert mac.kind == PROCESS_GROUP and "on darwin" in mac.statement
    missing = detect(platform="linux", which=lambda name: None, probe=lambda prefix: True)
    assert missing.kind == PROCESS_GROUP and "`unshare` (util-linux) is not installed" in missing.statement
