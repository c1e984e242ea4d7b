"""The user-data a job VM boots with."""

from __future__ import annotations

import shutil
import subprocess

import pytest
import yaml

from spotcron.runtime.assets import runner_dir
from spotcron.runtime.cloudinit import INSTALL_DIR, MARKER, render_user_data, runner_files


def test_user_data_is_cloud_config_carrying_every_runner_file_byte_for_byte():
    text = render_user_data()
    assert text.startswith("#cloud-config\n")
    config = yaml.safe_load(text)
    files = {f["path"]: f for f in config["write_files"]}
    names = sorted(p.name for p in runner_dir().glob("*.sh"))
    assert names == ["checkpoint.sh", "container.sh", "hardware.sh", "http.sh", "metadata.sh", "preemption.sh",
                     "runner.sh", "secrets.sh", "storage.sh"]
    for name in names:
        entry = files[f"{INSTALL_DIR}/{name}"]
        assert entry["content"] == (runner_dir() / name).read_text()
        assert entry["permissions"] == ("0755" if name == "runner.sh" else "0644")
    assert runner_files()[0].name == "runner.sh"
    assert MARKER not in text


def test_user_data_is_valid_for_cloud_inits_own_schema(tmp_path):
    tool = shutil.which("cloud-init")
    if tool is None:
        pytest.skip("cloud-init is not installed (apt-get install cloud-init, or make tools)")
    path = tmp_path / "user-data.yaml"
    path.write_text(render_user_data())
    done = subprocess.run([tool, "schema", "--config-file", str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Valid cloud-config" in done.stdout


def test_the_unit_runs_the_runner_once_and_lets_it_handle_shutdown():
    config = yaml.safe_load(render_user_data())
    unit = {f["path"]: f for f in config["write_files"]}["/etc/systemd/system/spotcron-runner.service"]["content"]
    lines = unit.splitlines()
    assert "ExecStart=/bin/bash /var/lib/spotcron/runner/runner.sh" in lines  # /var is noexec on COS
    assert "KillMode=mixed" in lines  # SIGTERM to the runner only; it stops the container itself
    assert "After=network-online.target docker.service" in lines  # stopped before docker and network
    assert not any(line.startswith("Restart=") for line in lines)
    assert config["runcmd"] == ["systemctl daemon-reload", "systemctl start --no-block spotcron-runner.service"]


def test_rendering_is_deterministic():
    assert render_user_data() == render_user_data()


def test_a_template_without_the_marker_is_refused(tmp_path):
    shutil.copy(runner_dir() / "runner.sh", tmp_path / "runner.sh")
    (tmp_path / "cloud-init.yaml").write_text("#cloud-config\nruncmd: []\n")
    with pytest.raises(ValueError, match=r"cloud-init.yaml: expected one line holding only \{\{RUNNER_FILES\}\}, found 0"):
        render_user_data(tmp_path)
