"""The simulated fleet: a seeded mix of job specs, each with how its container behaves.

Most jobs run a few times a day; one job in seven runs every few minutes to every hour, so a
month of 60 jobs gives tens of thousands of ticks without drowning the run in 5-minute jobs. Time zones include
ones with DST (Europe/Berlin, America/New_York, Africa/Cairo with its change at midnight,
Australia/Lord_Howe with its half-hour change) and fixed-time jobs inside the hours that DST
skips or repeats, so the month crosses real transitions when it starts in late October or March.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from spotcron.core.spec import JobSpec

IMAGE = "us-docker.pkg.dev/sim-project/spotcron/job:1"


@dataclass(frozen=True)
class Behaviour:
    """How the job's container behaves when it gets a VM."""

    runtime_s: float  # median runtime
    spread: float = 0.4  # sigma of the log-normal around it
    p_exit_fail: float = 0.04  # the container exits non-zero
    p_overrun: float = 0.01  # the container runs past the job's timeout

    def runtime(self, rng: random.Random) -> float:
        return max(1.0, rng.lognormvariate(math.log(self.runtime_s), self.spread))


@dataclass(frozen=True)
class SimJob:
    spec: JobSpec
    behaviour: Behaviour


# (name, fields, behaviour). Frequent jobs first; see `make_jobs` for how they are mixed.
_FREQUENT: list[tuple[str, dict[str, Any], Behaviour]] = [
    # Usually still running at its next tick: most of its ticks are skipped (concurrency: forbid).
    ("every5", {"schedule": "*/5 * * * *", "timeout": "12m", "concurrency": "forbid",
                "starting_deadline": "2m", "history_limit": 5}, Behaviour(420, 0.5, p_overrun=0.02)),
    ("every10", {"schedule": "*/10 * * * *", "time_zone": "Europe/Berlin", "timeout": "20m",
                 "concurrency": "replace"}, Behaviour(240, 0.8)),
    ("every15", {"schedule": "*/15 * * * *", "time_zone": "America/New_York", "timeout": "30m",
                 "concurrency": "allow", "retries": {"failure": 1}}, Behaviour(600, 0.7, p_exit_fail=0.1)),
    ("every30", {"schedule": "*/30 * * * *", "time_zone": "Australia/Lord_Howe", "timeout": "15m",
                 "checkpoint": "/checkpoint", "retries": {"preemption": 5}}, Behaviour(300)),
    ("hourly-matrix", {"schedule": "30 * * * *", "time_zone": "Europe/London", "timeout": "20m",
                       "matrix": [{"name": "small", "machine": {"type": "e2-small"}},
                                  {"name": "std2", "machine": {"type": "e2-standard-2"}}]}, Behaviour(200)),
    ("hourly", {"schedule": "0 * * * *", "timeout": "30m", "on_demand_fallback": True,
                "history_limit": 20}, Behaviour(600)),
    ("every30-ny", {"schedule": "0,30 * * * *", "time_zone": "America/New_York", "timeout": "20m",
                    "concurrency": "replace"}, Behaviour(900, 0.5)),
    ("kolkata", {"schedule": "17 * * * *", "time_zone": "Asia/Kolkata", "timeout": "10m",
                 "starting_deadline": "1m"}, Behaviour(60)),
    ("hourly-berlin", {"schedule": "45 * * * *", "time_zone": "Europe/Berlin", "timeout": "15m",
                       "history_limit": 8}, Behaviour(300)),
    ("every20", {"schedule": "*/20 * * * *", "timeout": "15m", "retries": {"failure": 1}},
     Behaviour(200, p_exit_fail=0.1)),
]

_SLOW: list[tuple[str, dict[str, Any], Behaviour]] = [
    ("every4h", {"schedule": "0 */4 * * *", "time_zone": "Australia/Lord_Howe", "timeout": "1h",
                 "checkpoint": "/checkpoint", "retries": {"preemption": 4}}, Behaviour(1500)),
    ("berlin-0230", {"schedule": "30 2 * * *", "time_zone": "Europe/Berlin", "timeout": "1h"}, Behaviour(900)),
    ("cairo-midnight", {"schedule": "0 0 * * *", "time_zone": "Africa/Cairo", "timeout": "20m"}, Behaviour(300)),
    ("ny-0145", {"schedule": "45 1 * * *", "time_zone": "America/New_York", "timeout": "20m"}, Behaviour(400)),
    ("weekdays", {"schedule": "0 9 * * 1-5", "time_zone": "America/New_York", "timeout": "30m",
                  "on_demand_fallback": True}, Behaviour(700)),
    ("bench-matrix", {"schedule": "0 */6 * * *", "timeout": "1h", "checkpoint": "/checkpoint",
                      "retries": {"preemption": 3},
                      "matrix": [{"name": "e2s2", "machine": {"type": "e2-standard-2"}},
                                 {"name": "n1s4", "machine": {"type": "n1-standard-4"}},
                                 {"name": "ondemand", "machine": {"type": "e2-standard-2", "spot": False}}]},
     Behaviour(1800, 0.3)),
    ("every2h", {"schedule": "15 */2 * * *", "time_zone": "Europe/Berlin", "timeout": "30m",
                 "machine": {"zones": ["europe-west1-b", "europe-west1-c"]}}, Behaviour(500)),
    ("tokyo-evening", {"schedule": "30 18 * * 1-5", "time_zone": "Asia/Tokyo", "timeout": "15m"}, Behaviour(300)),
    ("twice-daily", {"schedule": "0 8,20 * * *", "timeout": "45m", "retries": {"failure": 2}},
     Behaviour(1200, p_exit_fail=0.15)),
    ("weekly", {"schedule": "0 3 * * 0", "timeout": "2h"}, Behaviour(3000)),
    ("fortnightly", {"schedule": "0 6 1,15 * *", "time_zone": "Europe/Paris", "timeout": "30m"}, Behaviour(600)),
    ("sao-paulo", {"schedule": "0 */3 * * *", "time_zone": "America/Sao_Paulo", "timeout": "25m",
                   "concurrency": "allow"}, Behaviour(800)),
    ("business-hours", {"schedule": "5 8-18 * * 1-5", "time_zone": "Europe/Berlin", "timeout": "20m",
                        "history_limit": 10}, Behaviour(240)),
    ("late-night", {"schedule": "59 23 * * *", "timeout": "30m", "starting_deadline": "30m"}, Behaviour(600)),
    # Its scheduler entry still fires (a pause not deployed yet): every trigger must be ignored.
    ("paused", {"schedule": "*/10 * * * *", "paused": True}, Behaviour(60)),
]


def make_jobs(rng: random.Random, count: int) -> list[SimJob]:
    """`count` jobs: every seventh from the frequent list, the rest from the slow list, in turn.

    Each job gets seeded variations (retries, fallback, starting deadline, machine) so two seeds
    exercise different corners with the same overall load.
    """
    jobs = []
    frequent = slow = 0
    for index in range(count):
        if index % 7 == 0:
            kind, fields, behaviour = _FREQUENT[frequent % len(_FREQUENT)]
            frequent += 1
        else:
            kind, fields, behaviour = _SLOW[slow % len(_SLOW)]
            slow += 1
        data: dict[str, Any] = {"name": f"{kind}-{index:02d}", "image": IMAGE, "timeout": "30m",
                                "machine": {"type": "e2-small"}, "history_limit": 60}
        data.update(_vary(rng, fields))
        data["machine"] = {"type": "e2-small", **fields.get("machine", {})}
        jobs.append(SimJob(JobSpec.model_validate(data), behaviour))
    return jobs


def _vary(rng: random.Random, fields: dict[str, Any]) -> dict[str, Any]:
    varied = dict(fields)
    if "retries" not in varied:
        varied["retries"] = {"preemption": rng.choice([0, 1, 2, 3, 3, 3]), "failure": rng.choice([0, 0, 0, 1])}
    if "on_demand_fallback" not in varied:
        varied["on_demand_fallback"] = rng.random() < 0.3
    if "starting_deadline" not in varied:
        varied["starting_deadline"] = rng.choice(["5m", "10m", "10m", "15m"])
    return varied
