"""hardware.json: what the runner measured a run ran on, read as hostile input, kept on the record."""

from __future__ import annotations

import json

import pytest

from spotcron.core import layout
from spotcron.core.hardware import MAX_BYTES, HardwareProblem, parse_hardware
from spotcron.testing.harness import make_spec

RUN = "20261122-1200"
T4_VM = {"version": 1, "local": False, "host": "sc-bench-1", "machine_type": "n1-standard-8",
         "zone": "us-central1-a", "cpu_model": "Intel(R) Xeon(R) CPU @ 2.20GHz", "cpus": 8, "memory_mib": 30100,
         "gpus": [{"name": "Tesla T4", "driver": "535.104.05", "memory_mib": 15360}]}
LAPTOP = {"version": 1, "local": True, "host": "laptop", "machine_type": None, "zone": None,
          "cpu_model": "AMD Ryzen 7 5800U with Radeon Graphics", "cpus": 16, "memory_mib": 15800, "gpus": []}


def test_what_the_runner_writes_reads_back_with_a_label_and_a_key():
    t4 = parse_hardware(json.dumps(T4_VM).encode())
    assert t4.label == ("n1-standard-8: 8 CPU Intel Xeon @ 2.20GHz, 29 GiB, "
                        "1x Tesla T4 (driver 535.104.05)")
    laptop = parse_hardware(json.dumps(LAPTOP).encode())
    assert laptop.label == "local laptop: 16 CPU AMD Ryzen 7 5800U with Radeon Graphics, 15 GiB, no GPU"
    # Memory the kernel reserves differently from boot to boot is the same hardware; a GPU is not.
    assert parse_hardware(json.dumps({**T4_VM, "memory_mib": 30000}).encode()).key == t4.key
    assert parse_hardware(json.dumps({**T4_VM, "zone": "us-east1-c", "host": "x"}).encode()).key == t4.key
    assert parse_hardware(json.dumps({**T4_VM, "gpus": []}).encode()).key != t4.key
    assert parse_hardware(json.dumps({**LAPTOP, "host": "desktop"}).encode()).key != laptop.key


@pytest.mark.parametrize(("data", "words"), [
    (b"[" * 5_000, "nested deeper than 64"),
    (b'{"cpus": 1' + b"0" * 400 + b"}", "digits"),
    (b'{"cpu_model": "\xff"}', "UTF-8"),
    (b"[]", "not a JSON object"),
    (json.dumps({**T4_VM, "cpus": -1}).encode(), "cpus is not a whole number"),
    (json.dumps({**T4_VM, "cpu_model": "x" * 200}).encode(), "cpu_model is not printable text"),
    (json.dumps({**T4_VM, "host": "a\u001b[31m"}).encode(), "host is not printable text"),
    (json.dumps({**T4_VM, "gpus": [{"name": "T4"}] * 17}).encode(), "at most 16"),
    (json.dumps({**T4_VM, "gpus": [{"driver": "1"}]}).encode(), "gpus[0].name is missing"),
    (json.dumps({**T4_VM, "local": "yes"}).encode(), "local is not true or false"),
    (b'{"pad": "' + b"x" * MAX_BYTES + b'"}', "more than the"),
])
def test_a_bad_file_is_a_problem_that_says_where(data, words):
    with pytest.raises(HardwareProblem) as caught:
        parse_hardware(data, "hardware.json of attempt 1")
    assert words in str(caught.value) and "hardware.json of attempt 1" in str(caught.value)


def test_the_run_end_keeps_the_hardware_or_its_problem_in_the_record(h):
    h.start(make_spec(repeat=2))
    good, bad = f"{RUN}-r1", f"{RUN}-r2"
    h.blobs.write(layout.hardware("bot", good, 1), json.dumps(T4_VM).encode())
    h.blobs.write(layout.hardware("bot", bad, 1), b"[" * 5_000)
    assert h.finish_ok("bot", good).status_code == 200 and h.finish_ok("bot", bad).status_code == 200
    record = h.record("bot", good)
    assert record.state == "succeeded" and record.hardware.gpus[0].name == "Tesla T4"
    assert record.hardware.machine_type == "n1-standard-8" and record.hardware_problem is None
    broken = h.record("bot", bad)
    assert broken.state == "succeeded" and broken.hardware is None
    assert "hardware.json of attempt 1: nested deeper than 64" in broken.hardware_problem


def test_a_hardware_file_far_over_the_cap_is_never_read_whole(h):
    h.start(make_spec())
    h.upload("bot", RUN)
    name = layout.hardware("bot", RUN, 1)
    h.blobs.write(name, b'{"host": "' + b"x" * (64 * MAX_BYTES) + b'"}')
    sizes = []
    read_range = h.blobs.read_range

    def counting_range(object_name, start, size):
        piece = read_range(object_name, start, size)
        if object_name == name and piece is not None:
            sizes.append(len(piece))
        return piece

    h.blobs.read_range = counting_range
    assert h.callback("bot", RUN).status_code == 200
    record = h.record("bot", RUN)
    assert record.state == "succeeded" and "more than the" in record.hardware_problem
    assert sizes and max(sizes) <= MAX_BYTES + 1
