"""The runner's shell helpers on their own: runner.sh is sourced (sourcing runs nothing), and its
descriptor reader, JSON writer, URL encoder and name check are compared with Python's."""

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


def bash(script: str, *args: str | bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["bash", "-c", script, "runner-test", *args], capture_output=True,
                          env={"RUNNER": str(RUNNER), "PATH": "/usr/bin:/bin"}, timeout=30)


NASTY = ["", "plain", 'quote " and \\ backslash', "new\nline\r\ttab", "\x01\x02\x1b\x1f\x7f", "/slash/",
         "é ☃ 😀 𝄞", "$(rm -rf /)", "`id`", "'single'", "\\u0041 is not an escape here", "{}[],:", "=", "a=b"]

READ = r"""
source "$RUNNER"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
md_fetch() { printf '%s' "$DESCRIPTOR" >"$2"; }
load_descriptor || exit 3
printf '%s\0' "$D_JOB" "$D_RUN_ID" "$D_ATTEMPT" "$D_IMAGE" "$D_CHECKPOINT_OBJECT" "$D_METADATA_ACCESS" "$D_GPU_TYPE" \
  "$D_CREDENTIALS_URL" "${#D_COMMAND[@]}" "${D_COMMAND[@]}" "${#D_ARGS[@]}" "${D_ARGS[@]}" "${#D_ENV[@]}" "${D_ENV[@]}"
"""


def test_the_runner_reads_every_item_of_what_the_engine_writes_verbatim():
    descriptor = RunDescriptor(
        job="bench", run_id="20260101-1000-gpu", attempt=3, image="us-docker.pkg.dev/p/r/bench:1",
        command=["python", "-c", "print('hi')"], args=NASTY, env={f"K{i}": v for i, v in enumerate(NASTY)},
        checkpoint_path="/checkpoint", bucket="b", prefix="runs/bench/20260101-1000-gpu/",
        job_done_url="https://example.invalid/job_done", credentials_url="https://example.invalid/credentials",
        deadline=datetime(2026, 1, 1, 10, 30, tzinfo=UTC), timeout_s=1800, gpu={"type": "nvidia-tesla-t4", "count": 1},
        metadata_access=True)
    text = descriptor.to_metadata()
    assert RunDescriptor.from_metadata(text) == descriptor
    done = subprocess.run(["bash", "-c", READ], capture_output=True, timeout=30,
                          env={"RUNNER": str(RUNNER), "PATH": "/usr/bin:/bin", "DESCRIPTOR": text})
    assert done.returncode == 0, done.stderr
    items = [p.decode("utf-8") for p in done.stdout.split(b"\0")[:-1]]
    head, rest = items[:8], items[8:]
    assert head == ["bench", "20260101-1000-gpu", "3", "us-docker.pkg.dev/p/r/bench:1",
                    "runs/bench/20260101-1000-gpu/checkpoint/checkpoint.tar", "true", "nvidia-tesla-t4",
                    "https://example.invalid/credentials"]
    lists = []
    while rest:
        n = int(rest[0])
        lists.append(rest[1:1 + n])
        rest = rest[1 + n:]
    assert lists == [descriptor.command, NASTY, [f"K{i}={v}" for i, v in enumerate(NASTY)]]


@pytest.mark.parametrize(("field", "value"), [("image", "a\nb"), ("job_done_url", "http://x/\r"),
                                              ("args", ["nul\x00byte"]), ("env", {"A=B": "x"})])
def test_the_descriptor_refuses_what_a_flat_line_or_an_argv_cannot_carry(field, value):
    fields = {"job": "j", "run_id": "r", "attempt": 1, "image": "i", "bucket": "b", "prefix": "runs/j/r/",
              "job_done_url": "http://x/", "deadline": datetime(2026, 1, 1, tzinfo=UTC), "timeout_s": 1}
    with pytest.raises(ValueError):
        RunDescriptor(**{**fields, field: value})


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


NAMES = [b"plain.txt", "é ☃ 😀 𝄞.txt".encode(), b"bad\xff.txt", b"line\nfeed", b"carriage\rreturn",
         b"\xed\xa0\x80surrogate", b"\xc0\xafoverlong", b"\xf4\x90\x80\x80too-high", b"tab\tand \"quote\"",
         b"x" * 1024, b"x" * 1025, "€".encode()[:2] + b"cut"]


def test_names_cloud_storage_cannot_take_are_the_ones_python_cannot_decode_or_that_break_a_line():
    script = 'source "$RUNNER"; for s in "$@"; do if name_problem "$s"; then echo "$REASON"; else echo ok; fi; done'
    done = bash(script, *NAMES)
    assert done.returncode == 0, done.stderr

    def expected(name: bytes) -> str:
        if b"\n" in name:
            return "it contains a line feed"
        if b"\r" in name:
            return "it contains a carriage return"
        if len(name) > 1024:
            return "it is longer than 1024 bytes"
        try:
            name.decode("utf-8")
        except UnicodeDecodeError:
            return "it is not valid UTF-8"
        return "ok"

    assert done.stdout.decode().splitlines() == [expected(n) for n in NAMES]


def test_token_answers_are_read_without_a_json_parser(tmp_path):
    answer = tmp_path / "token.json"
    answer.write_text('{\n  "access_token": "ya29.a-b_c.d", "expires_in" : 3599, "token_type": "Bearer"}')
    done = bash('source "$RUNNER"; json_field access_token "$1" && echo "$JV"; json_field expires_in "$1" && '
                'echo "$JV"; json_field missing "$1" || echo absent', str(answer))
    assert done.stdout.decode().splitlines() == ["ya29.a-b_c.d", "3599", "absent"]


def test_sourcing_the_runner_runs_nothing():
    done = bash('source "$RUNNER"; echo sourced')
    assert done.returncode == 0
    assert done.stdout == b"sourced\n"
    assert done.stderr == b""


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
