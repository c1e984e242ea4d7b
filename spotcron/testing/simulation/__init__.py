"""A seeded month of faults, run through the real start_job, job_done and sweep functions.

Pure and repeatable: a fake clock, in-memory backends (spotcron.testing.memory) and one seeded random
stream. Cloud Scheduler ticks publish start messages that Pub/Sub delivers at least once
(duplicates in sequence and interleaved with the first delivery, late deliveries, redelivery
with backoff after a 500); every VM the engine creates gets a simulated life (boot, container,
upload, callback) with injected preemptions, stops, hangs, lost and repeated callbacks, while
Compute Engine answers with stockouts, quota and permission errors, slow and timed-out creates,
and every Compute and Storage call of the engine's fails now and then. Also what the exploration
(tests/reliability/test_exploration.py) injects: an insert that hangs for minutes while the world
goes on and Pub/Sub delivers the message again, callbacks with a forged or replayed token, and
function instances whose clock is a few seconds off. The sweep runs every sweep interval. After a drain period with
no new ticks the books are closed and the invariants of RELIABILITY.md are checked: every run
terminal, at most one VM per run attempt at any time, no managed VM alive past its deadline plus
one sweep interval (checked at that very instant for every VM), results present for every
success, no forged callback accepted.

History pruning (history_limit) deletes old runs while the month goes on, so runs are counted
from the simulator's own ledger of the engine's events, and a run's record and results are
checked when `run.finished` is published, which happens before the engine prunes (see ledger.py).

The parts: `world` (the faulty cloud and the functions' clients), `timeline` (fake time, and
checks at the instant a deadline passes), `jobs` (the fleet), `vm` (a VM's life), `adversary`,
`ledger` (the books and invariants) and `report` (the figures). `loop` alone builds the world and
hands each part only what it uses.

    python -m spotcron.testing.simulation --days 30 --jobs 60 --seed 7
"""

from spotcron.testing.simulation.figures import INVARIANTS, Report, reliability_coverage
from spotcron.testing.simulation.loop import Simulation, simulate
from spotcron.testing.simulation.world import FaultRates, SimConfig

__all__ = ["INVARIANTS", "FaultRates", "Report", "SimConfig", "Simulation", "reliability_coverage", "simulate"]
