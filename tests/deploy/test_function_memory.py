"""Each deployed function's memory comes from its measured peak RSS (bench/function_memory.py,
kept in bench/data/function_memory.json and BENCHMARKS.md), with at least half again as headroom:
a function loading Google's Compute Engine, Storage and Pub/Sub clients peaks near 195 MiB, which
256M (Cloud Run's M: 10^6 bytes, about 244 MiB) does not hold with room to spare."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from spotcron.deploy.desired import MEMORY, desired_state
from spotcron.deploy.naming import FUNCTIONS
from tests.deploy.conftest import make_settings

FIGURES = Path(__file__).resolve().parents[2] / "bench" / "data" / "function_memory.json"
HEADROOM = 1.5
UNITS = {"k": 1e3, "M": 1e6, "G": 1e9, "Mi": 2 ** 20, "Gi": 2 ** 30}  # availableMemory's units


def size_bytes(memory: str) -> float:
    number, unit = re.fullmatch(r"(\d+)(k|M|G|Mi|Gi)", memory).groups()
    return int(number) * UNITS[unit]


@pytest.mark.parametrize("function", sorted(FUNCTIONS))
def test_each_function_gets_its_measured_peak_with_headroom(function):
    peak_mib = json.loads(FIGURES.read_text())["peak_mib"][function]
    assert size_bytes(MEMORY[function]) >= HEADROOM * peak_mib * 2 ** 20, (function, MEMORY[function], peak_mib)


def test_the_desired_functions_carry_their_own_memory():
    from spotcron.deploy.resources import FUNCTION

    desired = desired_state(make_settings(scheduling="shared"), [], "deploy/source-x.zip", "")
    memory = {r.name: r.fields["memory"] for r in desired.values() if r.type == FUNCTION}
    assert memory["spotcron-start-job"] == "512M" and memory["spotcron-dispatch"] == "256M"
