"""The runner's shell helpers on their own: runner.sh is sourced (sourcing runs nothing), and its
JSON reader, JSON writer, URL encoder and path check are compared with Python's."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from urllib.parse import quote

import pytest

from spotcron.core.descriptor import RunDescriptor
from tests.runner.harness import RUNNER, needs_runner_tools

pytestmark = needs_runner_tools

SEP = "\x1f"

DUMP = r"""
source "$RUNNER"
json_parse "$1" || { echo "PARSE-FAILED at: ${JREST:0:20}" >&2; exit 3; }
for k in "${!J[@]}"; do printf 'J\0%s\0%s\0' "$k" "${J[$k]}"; done
for k in "${!JT[@]}"; do printf 'T\0%s\0%s\0' "$k" "${JT[$k]}"; done
for k in "${!JK[@]}"; do printf 'K\0%s\0%s\0' "$k" "${JK[$k]}"; done
"""


def bash(script: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["bash", "-c", script, "runner-test", *args], capture_output=True,
                          env={"RUNNER": str(RUNNER), "PATH": "/usr/bin:/bin"}, timeout=30)


def parse_with_runner(document: str):
    done = bash(DUMP, document)
    if done.returncode != 0:
        raise ValueError(done.stderr.decode(errors="replace"))
    parts = done.stdout.split(b"\0")[:-1]
    tables: dict[str, dict[str, str]] = {"J": {}, "T": {}, "K": {}}
    for i in range(0, len(parts), 3):
        kind, key, value = (p.decode("utf-8", errors="surrogateescape") for p in parts[i:i + 3])
        tables[kind][key] = value

    def build(path: str):
        kind, value = tables["T"][path], tables["J"][path]
        if kind == "o":
            keys = [tables["K"][f"{path}{SEP}#{n}"] for n in range(int(value))]
            return {key: build(path + SEP + key) for key in keys}
        if kind == "a":
            return [build(f"{path}{SEP}{n}") for n in range(int(value))]
        return {"s": lambda: value, "n": lambda: json.loads(value), "b": lambda: value == "true",
                "z": lambda: None}[kind]()

    return build("v")


NASTY = ["", "plain", 'quote " and \\ backslash', "new\nline\r\ttab", "\x01\x02\x1b\x1f\x7f", "/slash/",
         "é ☃ 😀 𝄞", "$(rm -rf /)", "`id`", "'single'", "\\u0041 is not an escape here", "{}[],:"]


@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize("indent", [None, 2])
def test_json_reader_matches_python(ensure_ascii, indent):
    document = {
        "strings": NASTY,
        "numbers": [0, -1, 12345678901234, 1.5, -2.5e-3, 1e21],
        "literals": [True, False, None],
        "empty": {"object": {}, "array": [], "string": ""},
        "nested": {"a": {"b": {"c": [[1, [2, []]], {"d": "e"}]}}},
        "keys with spaces": {"k e y": 1, "ключ": "значение", "": "empty key"},
    }
    text = json.dumps(document, ensure_ascii=ensure_ascii, indent=indent)
    assert parse_with_runner(text) == json.loads(text)


def test_json_reader_reads_what_the_engine_writes():
    descriptor = RunDescriptor(
        job="bench", run_id="20260101-1000-gpu", attempt=3, image="us-docker.pkg.dev/p/r/bench:1",
        command=["python", "-c", "print('hi')"], args=NASTY, env={f"K{i}": v for i, v in enumerate(NASTY)},
        checkpoint_path="/checkpoint", bucket="b", prefix="runs/bench/20260101-1000-gpu/",
        job_done_url="https://example.invalid/job_done", deadline=datetime(2026, 1, 1, 10, 30, tzinfo=UTC),
        timeout_s=1800, gpu={"type": "nvidia-tesla-t4", "count": 1}, local_command=None)
    text = descriptor.to_metadata()
    assert parse_with_runner(text) == json.loads(text)


@pytest.mark.parametrize("document", ['{"a":1', '{"a" 1}', "[1,]", '"\\x"', '{"a":tru}', "", "[1] 2",
                                      '{"a":"unterminated}', "01", '{"a":"\\u12"}'])
def test_json_reader_rejects_malformed_documents(document):
    with pytest.raises(ValueError, match="PARSE-FAILED"):
        parse_with_runner(document)


def test_json_writer_round_trips_through_python():
    script = 'source "$RUNNER"; for s in "$@"; do json_quote "$s"; printf "%s\\0" "$JQ"; done'
    done = bash(script, *NASTY)
    assert done.returncode == 0, done.stderr
    quoted = [q.decode("utf-8") for q in done.stdout.split(b"\0")[:-1]]
    assert [json.loads(q) for q in quoted] == NASTY


def test_url_encoding_matches_python_quote():
    values = [*NASTY[1:], "runs/job/20260101-1000/attempt-1/results/a b%2F.txt", "name=x&y=z?#"]
    script = 'source "$RUNNER"; for s in "$@"; do url_encode "$s"; printf "%s\\0" "$URLENC"; done'
    done = bash(script, *values)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split("\0")[:-1] == [quote(v, safe="") for v in values]


@pytest.mark.parametrize(("path", "safe"), [
    ("progress.txt", True), ("state/model.pt", True), (".hidden/x", True), ("a..b/c", True),
    ("", False), ("/etc/passwd", False), ("../escape", False), ("a/../../escape", False), ("a/./b", False),
    ("a//b", False), ("dir/", False), ("..", False), (".", False),
])
def test_checkpoint_paths_from_the_bucket_must_stay_inside_the_checkpoint_dir(path, safe):
    done = bash('source "$RUNNER"; safe_relpath "$1"', path)
    assert (done.returncode == 0) is safe


def test_sourcing_the_runner_runs_nothing():
    done = bash('source "$RUNNER"; echo sourced')
    assert done.returncode == 0
    assert done.stdout == b"sourced\n"
    assert done.stderr == b""


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
