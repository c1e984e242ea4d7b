"""The figures a simulation prints, and whether its invariants held."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from spotcron.core.runs import RunState
from spotcron.testing.simulation.ledger import Ledger
from spotcron.testing.simulation.world import SimConfig

# Every one must be 0. The first four are the ones RELIABILITY.md names; the rest keep the books honest.
INVARIANTS = ("leaked_vms", "duplicate_vms", "missing_results", "non_terminal", "double_finished",
              "record_mismatch", "missing_runs", "unexpected_runs", "stopped_lingering", "checkpoint_lost",
              "dropped_messages", "unexpected_errors", "forged_accepted", "rogue_vms", "foreign_writes",
              "vm_for_undeployed_spec", "days_over_limit", "hours_counted_twice", "unsettled_hours")


class Scored(Protocol):
    """Someone besides the ledger with figures of their own (the adversary)."""

    def problems(self) -> dict[str, int]: ...

    def figures(self) -> dict[str, int]: ...


@dataclass
class Report:
    days: float
    seed: int
    jobs: int
    runs: int
    states: dict[str, int]
    problems: dict[str, int]
    details: list[str]
    faults: dict[str, int]
    counts: dict[str, int]
    errors: dict[str, int]
    checkpoints_restored: int
    wall_s: float
    # Filled in by whoever holds the situations table (the CLI's --reliability-map): the
    # simulation knows nothing of the tests.
    coverage: tuple[int, int] | None = None
    extra: dict[str, int] = field(default_factory=dict)

    @classmethod
    def build(cls, config: SimConfig, *, jobs: int, ledger: Ledger, states: dict[str, int],
              faults: Mapping[str, int], checkpoints_restored: int, wall_s: float,
              adversary: Scored | None = None) -> Report:
        problems, extra = dict(ledger.problems), {}
        if adversary is not None:
            problems.update(adversary.problems())
            extra = adversary.figures()
        return cls(days=config.days, seed=config.seed, jobs=jobs, runs=len(ledger.seen),
                   states=dict(sorted(states.items())), problems=problems, details=list(ledger.details),
                   faults=dict(sorted(faults.items())), counts=dict(sorted(ledger.counts.items())),
                   errors=dict(ledger.errors), checkpoints_restored=checkpoints_restored, wall_s=wall_s,
                   extra=extra)

    def invariant(self, name: str) -> int:
        return self.problems.get(name, 0)

    @property
    def ok(self) -> bool:
        return not any(self.problems.get(name) for name in INVARIANTS)

    @property
    def succeeded(self) -> int:
        return self.states.get(RunState.SUCCEEDED, 0)

    def lines(self) -> list[str]:
        out = [f"simulated {self.days:g} days, {self.jobs} jobs, seed {self.seed}: {self.counts.get('ticks', 0)} "
               f"ticks, {self.runs} runs, {self.counts.get('vms created', 0)} VMs in {self.wall_s:.1f}s",
               "runs by terminal state: " + _pairs(self.states),
               f"VMs alive at once per run attempt: max {self.counts.get('max vms alive per attempt', 0)} "
               f"(must be 1); made again after the first was gone (deleted at once): "
               f"{self.counts.get('vms made again for an attempt', 0)}",
               "faults injected: " + _pairs(self.faults),
               "traffic: " + _pairs(self.counts),
               f"checkpoints restored on a later attempt: {self.checkpoints_restored}"]
        if self.errors:
            out.append("function errors (500, redelivered): " + _pairs(self.errors))
        if self.extra:
            out.append("adversary: " + _pairs(self.extra))
        out.append("invariants: " + " ".join(f"{name}={self.invariant(name)}" for name in INVARIANTS))
        out.extend(f"  {detail}" for detail in self.details)
        if self.coverage is not None:
            covered, total = self.coverage
            out.append(f"RELIABILITY.md situations covered by tests: {covered}/{total}")
        out.append(self.final_line())
        return out

    def final_line(self) -> str:
        return (f"reliability: runs={self.runs} jobs={self.jobs} succeeded={self.succeeded} "
                f"leaked_vms={self.invariant('leaked_vms')} duplicate_vms={self.invariant('duplicate_vms')} "
                f"missing_results={self.invariant('missing_results')} non_terminal={self.invariant('non_terminal')} "
                f"rogue_vms={self.invariant('rogue_vms')} foreign_writes={self.invariant('foreign_writes')}")


def _pairs(counts: dict[str, int]) -> str:
    return ", ".join(f"{key}={value}" for key, value in counts.items()) or "none"


def reliability_coverage(path: Path) -> tuple[int, int] | None:
    """(rows whose last column names a test and says no MISSING, all numbered rows) of the map at
    `path` (tests/RELIABILITY.md in a checkout), None where there is no such file."""
    if not path.exists():
        return None
    covered = total = 0
    for line in path.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.lstrip().startswith("|") or not cells[0].isdigit():
            continue
        total += 1
        if "::" in cells[-1] and "MISSING" not in cells[-1]:
            covered += 1
    return covered, total
