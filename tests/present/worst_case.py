"""A bucket holding the widest page spotcron can write, made by the functions themselves.

Every section and table the results page can show, from records the engine wrote as runs went
(the harness posts the start messages, the VMs' callbacks and the sweep): a matrix benchmark
job named at the name length limit with entries at theirs, three repeats a tick over two ticks,
a manual request of it, a preempted attempt retried in another zone, a failure, an unpriced
machine type, work in samples (samples/s) and compared metrics, per-attempt hardware; a plain
job with missed ticks (the schedule health table) and notifications; what the jobs wrote made
hostile (200 characters without a space in a unit, a metric name and a CPU model).
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from spotcron.core import layout
from spotcron.core.metrics import METRICS_FILE
from spotcron.cost.billing import cost_function
from spotcron.engine.missed import LOCAL_REASON, record_missed
from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec

BENCH = "nightly-dl-benchmark-spot-gpus"  # 30 characters: JOB_NAME_MAX
BOT = "hello-bot-posting-a-daily-note"
START = datetime(2026, 11, 16, 3, 0, 5, tzinfo=UTC)  # a Monday: the benchmark's tick
HOSTILE = "Z" * 200  # what a job writes may have no place to break
WORK_UNIT = "samples_of_augmented_imagenet_1k"  # UNIT_MAX characters, no place to break
LONG_METRIC = ("eval_seconds_on_the_held_out_validation_split_" + "x" * 64)[:64]  # a metric name's limit
ENTRIES = (  # names at ENTRY_NAME_MAX (12)
    ("highcpu-16ab", {"type": "n1-highcpu-16"}),
    ("e2-standard4", {"type": "e2-standard-4"}),
    ("t4-n1-std-8x", {"type": "n1-standard-8", "gpu": {"type": "nvidia-tesla-t4", "count": 1}}),
    ("l4-g2-std-8x", {"type": "g2-standard-8"}),
    ("a100-40gb-1g", {"type": "a2-highgpu-1g"}),
    ("c3-highcpu4x", {"type": "c3-highcpu-4"}),  # no price in the table: cost `-` with a note
)
SECONDS = {"highcpu-16ab": 500, "e2-standard4": 1300, "t4-n1-std-8x": 190, "l4-g2-std-8x": 120,
           "a100-40gb-1g": 45, "c3-highcpu4x": 900}


def bench_spec():
    return make_spec(name=BENCH, schedule="0 3 * * 1", repeat=3, timeout="2h",
                     matrix=[{"name": name, "machine": machine} for name, machine in ENTRIES],
                     benchmark={"time_metric": "train_seconds", "compare": ["load_seconds", LONG_METRIC],
                                "overall": True},
                     notify={"webhook": "http://hooks.example/spotcron", "ping": "https://hc-ping.com/" + "p" * 60})


def bot_spec():
    return make_spec(name=BOT, schedule="0 */6 * * *", starting_deadline="2m",
                     notify={"webhook": "http://hooks.example/" + "h" * 80})


def metrics(entry: str, repeat: int, week: int) -> bytes:
    # The second round of e2-standard4 is far slower: rounds that disagree are not pooled, and say so.
    seconds = SECONDS[entry] * (1 + 0.03 * repeat + (0.6 if entry == "e2-standard4" else 0.02) * week)
    doc = {"work": {"value": 1_281_167, "unit": WORK_UNIT},
           "metrics": {"train_seconds": {"value": seconds, "unit": "s"},
                       "load_seconds": {"value": seconds / 9, "unit": "s"},
                       LONG_METRIC: {"value": seconds / 7, "unit": "s"},
                       "peak_memory": {"value": 31_457_280_000, "unit": "B" * 32}}}
    if entry == "e2-standard4" and repeat == 2:
        # Every problem a file can have, each named on the page beside `succeeded`.
        doc["metrics"][HOSTILE[:64]] = {"value": 1, "unit": HOSTILE}
        doc["metrics"]["load_seconds"] = {"value": "fast", "unit": HOSTILE}
    return json.dumps(doc).encode()


def hardware(entry: str, machine: dict) -> bytes:
    gpus = [{"name": "NVIDIA " + entry.upper() + " Tensor Core GPU with a long marketing name", "driver": "550.54.15",
             "memory_mib": 40960}] if "gpu" in machine or entry.startswith(("l4", "a100")) else []
    return json.dumps({"local": False, "host": f"sc-{BENCH}-long-host-name", "machine_type": machine["type"],
                       "zone": "us-central1-a", "cpu_model": HOSTILE[:128] if entry == "c3-highcpu4x" else
                       "Intel(R) Xeon(R) CPU @ 2.20GHz", "cpus": 16, "memory_mib": 61440, "gpus": gpus,
                       "threads": 16, "load_start": 0.12, "load_end": 3.5}).encode()


def _finish(h: Harness, job: str, run_id: str, attempt: int, entry: str | None, week: int, repeat: int,
            exit_code: int = 0) -> None:
    if entry is not None:
        h.blobs.write(layout.results_prefix(job, run_id, attempt) + METRICS_FILE, metrics(entry, repeat, week))
        h.blobs.write(layout.hardware(job, run_id, attempt), hardware(entry, dict(ENTRIES)[entry]))
    h.upload(job, run_id, attempt, exit_code=exit_code)
    h.callback(job, run_id, attempt, exit_code=exit_code)


def _bench_round(h: Harness, spec, week: int, *, manual: bool = False) -> None:
    before = {r.run_id for r in h.records(BENCH)}
    h.run_now(spec, nonce="ab12") if manual else h.start(spec)
    started = sorted((r for r in h.records(BENCH) if r.run_id not in before), key=lambda r: r.run_id)
    h.clock.advance(30)
    for record in started:
        entry, repeat = record.variant, record.repeat or 1
        h.clock.advance(SECONDS[entry] // 10)
        if entry == "t4-n1-std-8x" and repeat == 1:
            # Preempted: the retry's attempt 2 runs in the next zone.
            h.callback(BENCH, record.run_id, 1, status="preempted", exit_code=None, uploaded=False)
            h.clock.advance(60)
            _finish(h, BENCH, record.run_id, 2, entry, week, repeat)
        elif entry == "a100-40gb-1g" and repeat == 3:
            _finish(h, BENCH, record.run_id, 1, entry, week, repeat, exit_code=137)
        else:
            _finish(h, BENCH, record.run_id, 1, entry, week, repeat)


def worst_case() -> Harness:
    """The harness, its bucket holding the records; its clock a day after the last tick."""
    h = Harness(now=START, limits={"max_gpus": 64, "max_live_vms": 100, "max_vm_hours_per_day": 10_000})
    # Each run priced as it ends, as the deployed functions and `spotcron up` price it.
    h.deps = replace(h.deps, run_cost=cost_function(None, h.settings.region))
    entrypoints.use(h.deps)
    bench, bot = bench_spec(), bot_spec()
    h.deploy(bench, bot)
    for week in range(2):
        _bench_round(h, bench, week)
        for quarter in range(4):  # the bot's ticks of the next day, every 6 hours
            h.clock.set(START.replace(hour=0) + timedelta(days=7 * week + 1, hours=6 * quarter))
            h.start(bot)
            run_id = next(r.run_id for r in sorted(h.records(BOT), key=lambda r: r.created_at, reverse=True))
            h.clock.advance(40)
            if quarter == 3:
                h.upload(BOT, run_id, exit_code=1)
                h.callback(BOT, run_id, exit_code=1)
            elif quarter == 2 and week == 1:
                # Cut off by its timeout: no logs.txt, only the live parts it shipped (more than the page links).
                for part in range(60):
                    h.blobs.write(layout.log_part(BOT, run_id, 1, part * 1000), b"step\n" * 200)
                h.clock.advance(3600)
                h.sweep()
            else:
                h.finish_ok(BOT, run_id)
        if week == 0:
            # `up` stopped for a day: the bot's ticks fell and none started.
            since = START + timedelta(days=2)
            h.clock.set(since + timedelta(days=1))
            record_missed(h.deps, [bot], {BOT: since}, reason=lambda tick: LOCAL_REASON)
            h.clock.set(START + timedelta(days=7))
    h.clock.set(START + timedelta(days=8, hours=17))
    _bench_round(h, bench, 1, manual=True)  # the newest runs: manual ids are the longest
    h.clock.set(START.replace(hour=0) + timedelta(days=9))
    h.start(bot)  # running as the page is written
    h.clock.set(START.replace(hour=0) + timedelta(days=9, minutes=3))
    return h


LOCAL = "local-bench"
LOCAL_ENTRIES = {"cpu-16": ({"type": "n1-highcpu-16"}, 600, 380), "e2-4": ({"type": "e2-standard-4"}, 900, 20),
                 "e2-quick": ({"type": "e2-standard-4"}, 12, 700),  # under the billing minimum once its wait is out
                 "t4": ({"type": "n1-standard-8", "gpu": {"type": "nvidia-tesla-t4", "count": 1}}, 200, 1500)}


def local_benchmark() -> Harness:
    """A matrix job's tick run as `spotcron up` runs it on one host: each VM waits for its turn
    (the runner's hardware.json says how long) before its container starts, and the record prices
    the VM's whole life, the wait included, as the functions price every run."""
    h = Harness(now=START, limits={"max_gpus": 64, "max_live_vms": 100, "max_vm_hours_per_day": 10_000})
    # Local mode's zone: the host's VMs live there, as `spotcron up` names it.
    h.settings = h.settings.model_copy(update={"zones": ("local-zone1-a",)})
    h.deps = replace(h.deps, settings=h.settings, run_cost=cost_function(None, h.settings.region))
    entrypoints.use(h.deps)
    spec = make_spec(name=LOCAL, schedule="0 3 * * 1", repeat=3, timeout="2h",
                     matrix=[{"name": name, "machine": machine} for name, (machine, _, _) in LOCAL_ENTRIES.items()])
    h.deploy(spec)
    h.start(spec)
    for record in sorted(h.records(LOCAL), key=lambda r: r.run_id):
        machine, work, wait = LOCAL_ENTRIES[record.variant]
        created = record.attempts[0].created_at
        h.clock.set(created + timedelta(seconds=wait + 15 * record.repeat))
        body = {"job": LOCAL, "run_id": record.run_id, "attempt": 1, "status": "exited", "exit_code": 0,
                "timed_out": False, "uploaded": True, "started_at": h.clock.now().isoformat(),
                "finished_at": (h.clock.now() + timedelta(seconds=work + record.repeat)).isoformat()}
        h.clock.advance(work + record.repeat + 5)
        h.blobs.write(layout.hardware(LOCAL, record.run_id, 1), json.dumps(
            {"local": True, "host": "build-runner-0042", "cpu_model": "AMD EPYC 9454 48-Core Processor", "cpus": 2,
             "memory_mib": 7900, "waited_s": wait}).encode())
        h.blobs.write(layout.results_prefix(LOCAL, record.run_id, 1) + METRICS_FILE,
                      b'{"work": {"value": 50000, "unit": "samples"}}')
        h.upload(LOCAL, record.run_id)
        h.callback(LOCAL, record.run_id, body=body)
    return h
