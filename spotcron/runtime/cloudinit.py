"""The `user-data` a job VM boots with: vm_images/runner/cloud-init.yaml with the runner inside
(found by runtime/assets.py: the wheel's copy or the checkout's).

Pure and deterministic: the same files give the same bytes, so a deploy plan can compare it and
tests can parse it. The engine puts it in the instance metadata under `user-data`, beside the
`spotcron-run` descriptor that tells the runner what to do. The runner is runner.sh plus the
parts it sources (one concern each); each becomes one `write_files` entry.
"""

from __future__ import annotations

from pathlib import Path

from spotcron.runtime import assets

TEMPLATE = "cloud-init.yaml"
SCRIPT = "runner.sh"
MARKER = "{{RUNNER_FILES}}"
INSTALL_DIR = "/var/lib/spotcron/runner"
USER_DATA_KEY = "user-data"
# Compute Engine allows 256 KB per metadata value.
MAX_VALUE_BYTES = 256 * 1024


def runner_files(runner_dir: Path | None = None) -> list[Path]:
    """runner.sh first, then the parts it sources, by name (left out: the runner this installation runs)."""
    runner_dir = runner_dir or assets.runner_dir()
    parts = sorted(p for p in runner_dir.glob("*.sh") if p.name != SCRIPT)
    return [runner_dir / SCRIPT, *parts]


def _entry(path: Path, indent: str) -> str:
    script = path.read_text(encoding="utf-8")
    # A literal block keeps every byte of the script once the indentation is taken off; blank
    # lines stay empty so no trailing spaces end up in the YAML.
    body = "".join(f"{indent}    {text}\n" if text else "\n" for text in script.rstrip("\n").split("\n"))
    mode = "0755" if path.name == SCRIPT else "0644"
    return (f'{indent}- path: {INSTALL_DIR}/{path.name}\n{indent}  permissions: "{mode}"\n'
            f"{indent}  owner: root\n{indent}  content: |\n{body}")


def render_user_data(runner_dir: Path | None = None) -> str:
    """The #cloud-config text with every runner file embedded as a YAML literal block."""
    runner_dir = runner_dir or assets.runner_dir()
    template = (runner_dir / TEMPLATE).read_text(encoding="utf-8")
    lines = template.splitlines(keepends=True)
    marked = [i for i, line in enumerate(lines) if line.strip() == MARKER]
    if len(marked) != 1:
        raise ValueError(f"{runner_dir / TEMPLATE}: expected one line holding only {MARKER}, "
                         f"found {len(marked)}")
    line = lines[marked[0]]
    indent = line[: len(line) - len(line.lstrip())]
    entries = "".join(_entry(path, indent) for path in runner_files(runner_dir))
    rendered = "".join(lines[: marked[0]]) + entries + "".join(lines[marked[0] + 1:])
    size = len(rendered.encode("utf-8"))
    if size > MAX_VALUE_BYTES:
        raise ValueError(f"user-data is {size} bytes; Compute Engine allows {MAX_VALUE_BYTES} per metadata value")
    return rendered
