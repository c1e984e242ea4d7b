"""The billing model pinned against hand-computed cases, the monthly projection, and `spotcron cost`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from spotcron.cli import SpotcronGroup
from spotcron.cli.cost import cost as cost_command
from spotcron.core.runs import Attempt, Outcome, RunRecord
from spotcron.core.spec import JobSpec
from spotcron.cost.billing import Overheads, billed_vm_seconds, cost_function, run_cost
from spotcron.cost.prices import load_prices
from spotcron.cost.projection import (
    fire_minutes_per_month,
    project_job,
    project_specs,
    project_stack,
    runs_per_month,
    vm_seconds_from_history,
)

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
HOUR = 3600


@pytest.fixture(scope="module")
def table():
    return load_prices()


@pytest.fixture(scope="module")
def recipe():
    return load_prices("recipe-2018")


def attempt(number: int, seconds: float | None, *, machine: str = "n1-standard-1", spot: bool = True,
            gpu: str | None = None, disk_gb: int = 10, start: datetime = T0) -> Attempt:
    return Attempt(number=number, vm_name=f"sc-job-run-a{number}", machine_type=machine,
                   provisioning_model="SPOT" if spot else "STANDARD", gpu=gpu, disk_gb=disk_gb,
                   created_at=start, deleted_at=None if seconds is None else start + timedelta(seconds=seconds))


def record(*attempts: Attempt, state: str = "succeeded", job: str = "job", variant: str | None = None) -> RunRecord:
    return RunRecord(job=job, run_id="20261122-1000", variant=variant, state=state, created_at=T0, updated_at=T0,
                     attempts=attempts)


def functions_usd(table, calls: list[float]) -> float:
    f = table.functions
    return sum(0.40 / 1e6 + f.billed_seconds(s) * (0.333 * 0.000024 + 0.5 * 0.0000025) for s in calls)


# --- one run ---------------------------------------------------------------------------------


def test_billed_seconds_minimum_and_rounding():
    assert billed_vm_seconds(0) == 60
    assert billed_vm_seconds(20) == 60
    assert billed_vm_seconds(60) == 60
    assert billed_vm_seconds(61) == 61
    assert billed_vm_seconds(60.2) == 61


def test_a_20_second_run_bills_one_minute(table):
    cost = run_cost(record(attempt(1, 20)), table, "us-central1")
    assert cost.items["compute"] == pytest.approx(0.01306 * 60 / HOUR)
    # The disk has no minimum: 10 GB x $0.04 per 730-hour month, for 20 seconds.
    assert cost.items["disk"] == pytest.approx(10 * 0.04 * 20 / (730 * HOUR))
    assert cost.items["gpu"] == 0
    assert cost.items["functions"] == pytest.approx(functions_usd(table, [2.0, 2.0]))
    assert cost.total_usd == pytest.approx(sum(cost.items.values()))


def test_a_61_second_run_bills_61_seconds(table):
    cost = run_cost(record(attempt(1, 61)), table, "us-central1")
    assert cost.items["compute"] == pytest.approx(0.01306 * 61 / HOUR)


def test_on_demand_run(table):
    cost = run_cost(record(attempt(1, 600, machine="e2-standard-2", spot=False)), table, "us-central1")
    assert cost.items["compute"] == pytest.approx(0.06701 * 600 / HOUR)


def test_gpu_spot_run(table):
    half_hour = attempt(1, 1800, machine="n1-standard-4", gpu="nvidia-tesla-t4 x1", disk_gb=50)
    cost = run_cost(record(half_hour), table, "us-central1")
    assert cost.items["compute"] == pytest.approx(0.05224 / 2)
    assert cost.items["gpu"] == pytest.approx(0.14 / 2)
    assert cost.items["disk"] == pytest.approx(50 * 0.04 * 1800 / (730 * HOUR))
    two = run_cost(record(attempt(1, 1800, machine="n1-standard-8", gpu="nvidia-tesla-v100 x2", spot=False)),
                   table, "us-central1")
    assert two.items["gpu"] == pytest.approx(2 * 2.48 / 2)


def test_bundled_gpus_are_not_billed_twice(table):
    cost = run_cost(record(attempt(1, HOUR, machine="g2-standard-4", gpu="nvidia-l4 x1")), table, "us-central1")
    assert cost.items["compute"] == pytest.approx(0.70683 * 0.4, rel=1e-4)
    assert cost.items["gpu"] == 0


def test_two_attempts_each_bill_their_own_minimum(table):
    preempted = attempt(1, 30)
    retried = attempt(2, 300, start=T0 + timedelta(minutes=5))
    cost = run_cost(record(preempted, retried), table, "us-central1")
    assert cost.items["compute"] == pytest.approx(0.01306 * (60 + 300) / HOUR)
    assert cost.items["disk"] == pytest.approx(10 * 0.04 * 330 / (730 * HOUR))
    # One start_job, one job_done per attempt.
    assert cost.items["functions"] == pytest.approx(functions_usd(table, [2.0, 2.0, 2.0]))


def test_attempts_without_a_vm_cost_nothing_and_live_ones_count_until_now(table):
    never = Attempt(number=1, vm_name="sc-a1", machine_type="n1-standard-1", created_at=None)
    assert run_cost(record(never), table, "us-central1").items["compute"] == 0
    live = attempt(1, None)
    assert run_cost(record(live, state="running"), table, "us-central1").items["compute"] == 0
    later = run_cost(record(live, state="running"), table, "us-central1", now=T0 + timedelta(seconds=90))
    assert later.items["compute"] == pytest.approx(0.01306 * 90 / HOUR)


def test_a_configuration_the_host_could_not_run_costs_nothing(table):
    """A local GPU entry on a host without the GPU: its VM lived 2 s and ran nothing of it."""
    unrun = attempt(1, 2, machine="n1-standard-8", gpu="nvidia-tesla-t4 x1").model_copy(
        update={"outcome": Outcome.UNAVAILABLE})
    cost = run_cost(record(unrun, state="skipped"), table, "us-central1")
    assert cost.items["compute"] == cost.items["gpu"] == cost.items["disk"] == 0


def test_sweep_share_and_region(table):
    base = run_cost(record(attempt(1, 20)), table, "us-central1")
    shared = run_cost(record(attempt(1, 20)), table, "us-central1", sweep_invocations=2)
    assert shared.items["functions"] - base.items["functions"] == pytest.approx(functions_usd(table, [1.0, 1.0]))
    europe = run_cost(record(attempt(1, 20)), table, "europe-west1")
    assert europe.items["compute"] == pytest.approx(base.items["compute"] * 1.10)


def test_a_vm_outside_the_stacks_region_pays_its_data_transfer(table):
    """Each VM pulls its image and uploads its files; in another region than the stack's bucket and
    regional repository, both are billed (cost/transfer.py), and the run's cost says so."""
    image = "us-central1-docker.pkg.dev/p/spotcron/bot:1"
    preempted = attempt(1, 300).model_copy(update={"zone": "us-east1-b", "outcome": Outcome.PREEMPTED})
    retried = attempt(2, 600).model_copy(update={"zone": "us-east1-c"})
    away = record(preempted, retried).model_copy(update={"spec": {"image": image}})
    cost = run_cost(away, table, "us-central1", image_gb=0.5, results_gb=0.01)
    assert cost.items["transfer"] == pytest.approx(2 * (0.5 * 0.02 + 0.01 * 0.02))  # two fresh VMs, North America
    assert cost.total_usd == pytest.approx(sum(cost.items.values()))
    home = away.model_copy(update={"attempts": tuple(a.model_copy(update={"zone": "us-central1-a"})
                                                     for a in away.attempts)})
    assert "transfer" not in run_cost(home, table, "us-central1", image_gb=0.5, results_gb=0.01).items
    # The engine's cost function prices it with the stack's assumed sizes.
    total, items, _unpriced = cost_function(table, "us-central1", image_gb=0.5, results_gb=0.01)(away)
    assert items["transfer"] == pytest.approx(cost.items["transfer"]) and total == pytest.approx(cost.total_usd, rel=1e-6)


# --- runs per month --------------------------------------------------------------------------


@pytest.mark.parametrize(("schedule", "zone", "expected"), [
    ("0 */4 * * *", "Etc/UTC", 180),
    ("0 * * * *", "Etc/UTC", 720),
    ("0 * * * *", "Europe/Berlin", 720),
    ("*/5 * * * *", "Etc/UTC", 8640),
    ("30 2 * * *", "Etc/UTC", 30),
    ("0 9 1 * *", "Etc/UTC", 12 * 30 / 365),  # a monthly job: 12 a year, not 0 or 2 in some window
    ("0 9 * * 1-5", "Etc/UTC", 261 * 30 / 365),  # 261 weekdays in the year after 2026-11-22
])
def test_runs_per_month(schedule, zone, expected):
    assert runs_per_month(schedule, zone, T0) == pytest.approx(expected)


# --- the recipe's figures --------------------------------------------------------------------


def hello_bot(schedule: str = "0 */4 * * *") -> JobSpec:
    return JobSpec(name="hello-bot", schedule=schedule, image="spotcron/hello-bot",
                   machine={"type": "n1-standard-1", "spot": True})


def test_the_recipe_costs_76_cents_a_month_at_2018_prices(recipe):
    """Max Woolf, 2018: start at 0 */4, stop two minutes later, preemptible n1-standard-1."""
    spec = hello_bot()
    job = project_job(spec, runs_per_month=runs_per_month(spec.schedule, spec.time_zone, T0), runtime_s=120,
                      table=recipe, region="us-central1")
    assert job.runs_per_month == 180
    classic = job.classic_items
    assert classic["compute"] == pytest.approx(0.06)  # $0.01/h / 60 x 12 min a day x 30 days
    assert classic["disk"] == pytest.approx(0.40)  # 10 GB x $0.04, all month
    assert classic["scheduler"] == pytest.approx(0.20)  # two rules
    assert classic["functions"] == pytest.approx(0.10, abs=1e-4)  # 360 calls x 600 x $0.000000463
    assert round(job.classic_monthly_usd, 2) == 0.76


def test_the_recipes_hourly_figure_follows_too(recipe):
    # Hourly: 720 runs x 2 min = 24 h x $0.01 = $0.24; 1,440 calls x 60 s = $0.40; $0.40 disk; $0.20 rules.
    job = project_job(hello_bot("0 * * * *"), runs_per_month=720, runtime_s=120, table=recipe, region="us-central1")
    assert job.classic_items["compute"] == pytest.approx(0.24)
    assert job.classic_items["functions"] == pytest.approx(0.40, abs=1e-4)
    assert round(job.classic_monthly_usd, 2) == 1.24


def test_spotcron_design_beats_the_classic_one_on_the_same_prices(recipe):
    job = project_job(hello_bot(), runs_per_month=180, runtime_s=120, table=recipe, region="us-central1")
    items = job.items
    assert items["compute"] == pytest.approx(0.06)  # same VM time
    assert items["disk"] == pytest.approx(10 * 0.04 * 180 * 120 / (730 * HOUR))  # only while the VM exists
    assert items["scheduler"] == pytest.approx(0.10)  # one entry, no stop rule
    # One start_job (2 s) and one job_done (2 s) per run, at the 2018 per-100 ms price.
    assert items["functions"] == pytest.approx(180 * 2 * 20 * 0.000000463)
    assert items["storage"] > 0
    assert job.monthly_usd < job.classic_monthly_usd / 3


def test_matrix_jobs_count_a_vm_per_entry(table):
    spec = JobSpec(name="bench", schedule="0 3 * * 1", image="x", machine={"disk_gb": 30},
                   matrix=[{"name": "cpu", "machine": {"type": "n1-highcpu-16"}},
                           {"name": "t4", "machine": {"type": "n1-standard-8",
                                                      "gpu": {"type": "nvidia-tesla-t4", "count": 1}}}])
    job = project_job(spec, runs_per_month=4, runtime_s=HOUR, table=table, region="us-central1")
    assert job.items["compute"] == pytest.approx(4 * (0.15595 + 0.10448), rel=1e-4)
    assert job.items["gpu"] == pytest.approx(4 * 0.14)
    assert job.classic_items["disk"] == pytest.approx(2 * 30 * 0.04)
    assert [v.variant for v in job.variants] == ["cpu", "t4"]


def test_paused_jobs_run_nothing_but_keep_their_scheduler_entry(table):
    spec = hello_bot().model_copy(update={"paused": True})
    job = project_job(spec, runs_per_month=180, runtime_s=120, table=table, region="us-central1")
    assert job.items["compute"] == 0 and job.items["scheduler"] == 0.10


def test_history_replaces_the_runtime(table):
    records = [record(attempt(1, 100)), record(attempt(1, 30), attempt(2, 170)),
               record(attempt(1, None), state="running")]
    history = vm_seconds_from_history(records)
    assert history == {("job", None): (150.0, 2)}
    spec = JobSpec(name="job", schedule="0 * * * *", image="x", machine={"type": "n1-standard-1"})
    job = project_job(spec, runs_per_month=720, runtime_s=600, table=table, region="us-central1", history=history)
    assert job.variants[0].vm_seconds == 150 and job.variants[0].basis == "median of 2 recent runs"
    assert job.items["compute"] == pytest.approx(720 * 0.01306 * 150 / HOUR)


def test_runs_on_a_host_without_their_hardware_price_nothing():
    unavailable = attempt(1, 1).model_copy(update={"outcome": Outcome.UNAVAILABLE})
    records = [record(unavailable, state="skipped", variant="t4"), record(attempt(1, 90), variant="cpu")]
    assert vm_seconds_from_history(records) == {("job", "cpu"): (90.0, 1)}


def test_history_is_the_median_of_recent_runs():
    def at(hours: int, seconds: float) -> RunRecord:
        return record(attempt(1, seconds)).model_copy(update={"created_at": T0 + timedelta(hours=hours),
                                                              "run_id": f"r{hours:03d}"})

    # One 3-hour outlier does not move the median the way it moves a mean.
    assert vm_seconds_from_history([at(h, 60) for h in range(4)] + [at(4, 10_800)]) == {("job", None): (60.0, 5)}
    # Only the newest runs count: the job got faster 30 runs ago.
    old, new = [at(h, 600) for h in range(100)], [at(100 + h, 30) for h in range(30)]
    assert vm_seconds_from_history(old + new) == {("job", None): (30.0, 20)}


def test_stack_adds_the_sweep_and_applies_free_tiers(table):
    jobs = [project_job(hello_bot(), runs_per_month=180, runtime_s=120, table=table, region="us-central1")]
    stack = project_stack(jobs, table=table, sweep_interval_s=300)
    sweeps = 30 * 86400 / 300
    assert stack.shared_items["scheduler"] == 0.10
    assert stack.shared_items["functions"] == pytest.approx(sweeps * (0.40 / 1e6 + 1.0 * table.functions.per_second))
    assert stack.monthly_usd == pytest.approx(jobs[0].monthly_usd + sum(stack.shared_items.values()))
    # Two scheduler entries (job + sweep) fit in the 3 free ones; function calls fit in their free tier.
    assert stack.free_tier_usd == pytest.approx(0.20 + jobs[0].items["functions"] + stack.shared_items["functions"])
    assert stack.monthly_after_free_tier_usd == pytest.approx(
        stack.monthly_usd - stack.free_tier_usd)


def test_shared_scheduling_counts_the_dispatcher_and_drops_the_entries_per_job(table):
    jobs = [project_job(hello_bot().model_copy(update={"name": f"bot-{i}"}), runs_per_month=180, runtime_s=120,
                        table=table, region="us-central1") for i in range(10)]
    per_job = project_stack(jobs, table=table, sweep_interval_s=300)
    shared = project_stack(jobs, table=table, sweep_interval_s=300, scheduling="shared", fire_minutes=180)
    assert [j.items["scheduler"] for j in shared.jobs] == [0.0] * 10
    assert shared.overhead["sweep"]["scheduler"] == 0.0  # rides the dispatch entry
    assert per_job.overhead["sweep"]["scheduler"] == 0.10 and "dispatch" not in per_job.overhead
    dispatch = shared.overhead["dispatch"]
    minutes = 30 * 1440
    per_second = 0.333 * 0.000024 + 0.5 * 0.0000025
    assert dispatch["scheduler"] == 0.10
    # Every minute an invocation of 0.2 s; 0.005 s more for each of the 1,800 start messages.
    assert dispatch["functions"] == pytest.approx(minutes * 0.40 / 1e6 + (minutes * 0.2 + 1800 * 0.005) * per_second)
    # The cursor read and written in the 180 minutes in which the jobs fire; an hourly cold start
    # lists the deployed specs and reads them (10) and the cursor.
    cold = 24 * 30
    assert dispatch["storage"] == pytest.approx((180 + cold) * 0.05 / 10_000 + (180 + cold * 11) * 0.004 / 10_000)
    # The one entry is free; so are the functions' calls (2 M invocations, 180,000 vCPU-seconds a month).
    functions = sum(j.items["functions"] for j in jobs) + shared.overhead["sweep"]["functions"] + dispatch["functions"]
    assert shared.free_tier_usd == pytest.approx(0.10 + functions)
    assert per_job.free_tier_usd == pytest.approx(0.30 + functions - dispatch["functions"])
    assert shared.monthly_after_free_tier_usd < per_job.monthly_after_free_tier_usd - 0.70
    with pytest.raises(ValueError, match="scheduling 'cron': use one of per-job, shared"):
        project_stack(jobs, table=table, sweep_interval_s=300, scheduling="cron")


class _Counted:
    """The in-memory bucket, counting operations by Cloud Storage class (deletes are free)."""

    def __init__(self, blobs):
        self._blobs = blobs
        self.class_a = self.class_b = 0

    def read(self, name):
        self.class_b += 1
        return self._blobs.read(name)

    def read_range(self, name, start, size):  # a ranged GET is a read like any other
        self.class_b += 1
        return self._blobs.read_range(name, start, size)

    def write(self, name, data, **kwargs):
        self.class_a += 1
        return self._blobs.write(name, data, **kwargs)

    def list(self, prefix):
        self.class_a += 1
        return self._blobs.list(prefix)

    def list_some(self, prefix, limit, *, start=""):  # one bounded page is one listing
        self.class_a += 1
        return self._blobs.list_some(prefix, limit, start=start)

    def list_folders(self, prefix, limit, *, start=""):  # a delimiter listing is a listing too
        self.class_a += 1
        return self._blobs.list_folders(prefix, limit, start=start)

    def __getattr__(self, name):
        return getattr(self._blobs, name)


@pytest.mark.parametrize("scheduling", ["per-job", "shared"])
def test_the_model_counts_every_storage_operation_a_run_makes(scheduling):
    from spotcron.engine.deployed import SpecStore
    from spotcron.testing.harness import Harness, make_spec

    h = Harness(scheduling=scheduling)
    try:
        spec = make_spec()
        SpecStore(h.blobs).write(spec)  # deployed before the tick
        counted = _Counted(h.blobs)
        h.blobs = h.deps.blobs = counted  # the functions and the VM's uploads both go through it
        h.start(spec)
        h.clock.advance(120)
        h.finish_ok("bot", "20261122-1200")
        assert h.record("bot", "20261122-1200", count=False).state == "succeeded"
        reads_of_the_harness = 1  # h.start checks the deployed spec before publishing, as deploy would
        usage = Overheads()
        assert (counted.class_a, counted.class_b - reads_of_the_harness) == (usage.class_a_per_run,
                                                                             usage.class_b_per_run)
    finally:
        h.close()


def test_fire_minutes_count_each_minute_once_however_many_jobs_fire_in_it():
    every_4h = [hello_bot().model_copy(update={"name": f"b{i}"}) for i in range(3)]
    assert fire_minutes_per_month(every_4h, T0) == 180
    offset = hello_bot().model_copy(update={"name": "late", "schedule": "30 */4 * * *"})
    paused = hello_bot().model_copy(update={"name": "off", "schedule": "* * * * *", "paused": True})
    assert fire_minutes_per_month([*every_4h, offset, paused], T0) == 360
    every_minute = hello_bot().model_copy(update={"name": "m", "schedule": "* * * * *"})
    assert fire_minutes_per_month([every_minute, offset], T0) == 30 * 1440


def test_project_specs_uses_the_schedule_and_history(table):
    spec = hello_bot()
    stack = project_specs([spec], table=table, region="us-central1", now=T0, runtime_s=120,
                          usage=Overheads(start_seconds=1.0))
    assert stack.jobs[0].runs_per_month == 180
    assert stack.jobs[0].to_json()["vm_seconds_per_run"] == {"hello-bot": 120.0}


def test_repeats_are_priced_as_runs_and_named_once(table):
    from spotcron.present.projection import basis_line

    once = project_specs([hello_bot()], table=table, region="us-central1", now=T0, runtime_s=120)
    spec = hello_bot().model_copy(update={"repeat": 3})
    thrice = project_specs([spec], table=table, region="us-central1", now=T0, runtime_s=120)
    # Three VMs per tick cost three times one VM per tick, minus nothing: scheduler and storage aside.
    assert thrice.jobs[0].items["compute"] == pytest.approx(3 * once.jobs[0].items["compute"])
    assert basis_line(thrice, "the local bucket", "2m") == (
        "VM time per run: hello-bot 2m00s, assumed (--runtime 2m; no runs recorded).")


# --- the command -----------------------------------------------------------------------------


@pytest.fixture
def run(tmp_path, monkeypatch, example_jobs):
    monkeypatch.chdir(tmp_path)
    for name in ("SPOTCRON_JOBS", "SPOTCRON_STACK", "SPOTCRON_PRICES", "SPOTCRON_REGION"):
        monkeypatch.delenv(name, raising=False)
    group = SpotcronGroup("spotcron")
    group.add_command(cost_command)

    def invoke(*args: str, env: dict[str, str] | None = None, jobs: Path | None = None):
        return CliRunner().invoke(group, ["cost", "--jobs", str(jobs or example_jobs), *args], env=env)

    return invoke


def test_cost_json_reproduces_the_recipe_for_hello_bot(run):
    result = run("hello-bot", "--prices", "recipe-2018", "--runtime", "2m", "--json")
    assert result.exit_code == 0, result.output
    [job] = json.loads(result.output)
    assert job["job"] == "hello-bot"
    assert round(job["classic_monthly_usd"], 2) == 0.76
    classic = job["classic_items"]
    assert (round(classic["compute"], 2), round(classic["disk"], 2), round(classic["scheduler"], 2),
            round(classic["functions"], 2)) == (0.06, 0.40, 0.20, 0.10)
    assert set(job["items"]) == {"compute", "gpu", "disk", "scheduler", "functions", "storage"}
    assert job["monthly_usd"] == pytest.approx(sum(job["items"].values()), abs=1e-5)


def test_cost_table_for_every_job(run, tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "bot.yaml").write_text('schedule: "0 */4 * * *"\nimage: x\nmachine: {type: n1-standard-1}\n')
    (jobs / "bench.yaml").write_text(
        'schedule: "0 3 * * 1"\nimage: x\nmatrix:\n  - {name: cpu, machine: {type: n1-highcpu-16}}\n'
        '  - name: t4\n    machine: {type: n1-standard-8, gpu: {type: nvidia-tesla-t4}}\n')
    result = run(jobs=jobs)
    assert result.exit_code == 0, result.output
    for text in ("bot", "bench", "(sweep)", "stack", "classic", "prices gcp-2026-11 (2026-11-22), us-central1",
                 "compute includes GPUs", "After one billing account's free tiers"):
        assert text in result.output
    assert "(dispatch)" not in result.output
    said = " ".join(result.output.split())
    assert "with scheduling: per-job. With scheduling: shared it would be $" in said
    shared = run("--scheduling", "shared", jobs=jobs)
    assert shared.exit_code == 0, shared.output
    assert "(dispatch)" in shared.output
    assert "with scheduling: shared. With scheduling: per-job it would be $" in " ".join(shared.output.split())
    assert run("--scheduling", "hourly", jobs=jobs).exit_code == 2
    # The 2018 table has no price for n1-highcpu-16: that configuration shows `-` and a note says why.
    result = run("--runtime", "2m", env={"SPOTCRON_PRICES": "recipe-2018"}, jobs=jobs)
    assert result.exit_code == 0, result.output
    assert "bench/cpu: not priced, left out of the totals: price table recipe-2018 has no price for machine " \
           "type 'n1-highcpu-16'" in " ".join(result.output.split())
    result = run("--region", "europe-west1", "bot", "--json", jobs=jobs)
    assert json.loads(result.output)[0]["items"]["compute"] == pytest.approx(
        180 * 0.01306 * 1.10 * 300 / HOUR)


def test_a_matrix_jobs_row_says_its_ticks_and_the_vms_they_start(run, tmp_path):
    """Before: one `runs` column said 4.3 for a weekly job whose every tick starts 9 VMs."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "bench.yaml").write_text(
        'schedule: "0 3 * * 1"\nimage: x\nrepeat: 3\nmatrix:\n  - {name: a, machine: {type: n1-highcpu-16}}\n'
        '  - {name: b, machine: {type: e2-standard-4}}\n  - {name: c, machine: {type: e2-standard-2}}\n')
    result = run(jobs=jobs)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(line for line in lines if line.startswith("job"))
    assert header.split()[:4] == ["job", "ticks", "VMs", "VM/run"]
    row = next(line for line in lines if line.startswith("bench"))
    [job] = json.loads(run("--json", jobs=jobs).output)
    ticks = job["ticks_per_month"]
    assert job["vms_per_month"] == pytest.approx(9 * ticks, abs=1e-3) and job["runs_per_month"] == ticks
    assert row.split()[1:3] == [f"{ticks:.1f}", f"{9 * ticks:.1f}"]
    assert "VMs: the runs those ticks start, each on its own VM (bench 9 a tick)" in " ".join(result.output.split())


def test_cost_prices_the_stack_files_scheduling_mode_by_default(run, tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text("scheduling: shared\n")
    result = run("--stack", str(stack))
    assert result.exit_code == 0, result.output
    assert "(dispatch)" in result.output and "with scheduling: shared." in " ".join(result.output.split())


def test_cost_with_history_and_bad_input(run, tmp_path):
    folder = tmp_path / "bucket" / "runs" / "hello-bot" / "20261122-0800"
    folder.mkdir(parents=True)
    done = record(attempt(1, 95), job="hello-bot")
    (folder / "run.json").write_bytes(done.to_json())
    result = run("hello-bot", "--history", str(tmp_path / "bucket"), "--json")
    assert json.loads(result.output)[0]["vm_seconds_per_run"] == {"hello-bot": 95.0}
    result = run("hello-bot", "--history", str(tmp_path / "bucket"))
    assert "1m35s" in result.output
    assert f"VM time per run: hello-bot 1m35s, median of 1 recent run in {tmp_path / 'bucket'}" in \
        " ".join(result.output.split())

    result = run("nope")
    assert result.exit_code == 2 and "no job named 'nope'" in result.output
    result = run("--runtime", "soon")
    assert result.exit_code == 2 and "'soon' is not a duration" in result.output
    (folder / "run.json").write_text("{}")
    result = run("--history", str(tmp_path / "bucket"))
    assert result.exit_code == 2 and "run.json: not a run record" in result.output


def test_cost_reads_the_local_history_by_default_and_says_what_it_used(run, tmp_path):
    import contextlib

    from spotcron.cli._bucket import RunsContext
    from spotcron.core import layout
    from spotcron.testing.memory import MemoryBlobs

    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "bot.yaml").write_text('schedule: "0 * * * *"\nimage: x\nmachine: {type: n1-standard-1}\n')
    (jobs / "other.yaml").write_text('schedule: "0 * * * *"\nimage: x\nmachine: {type: n1-standard-1}\n')
    blobs = MemoryBlobs("spotcron-local")
    for hour, seconds in enumerate((31, 33, 35)):
        done = record(attempt(1, seconds), job="bot").model_copy(update={"run_id": f"2026112{hour}-1000"})
        blobs.write(layout.run_record("bot", done.run_id), done.to_json())
    (tmp_path / ".spotcron" / "bucket").mkdir(parents=True)
    group = SpotcronGroup("spotcron")
    group.add_command(cost_command)
    context = RunsContext(open_blobs=lambda bucket, state_dir: contextlib.nullcontext(blobs))
    result = CliRunner().invoke(group, ["cost", "--jobs", str(jobs)], obj=context, terminal_width=120)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "VM time per run: bot 33s, median of 3 recent runs in the local bucket (.spotcron/bucket);" in said
    assert "other 5m00s, assumed (--runtime 5m; no runs recorded)" in said
    data = json.loads(CliRunner().invoke(group, ["cost", "--jobs", str(jobs), "--json"], obj=context).output)
    assert data[0]["vm_seconds_per_run"] == {"bot": 33.0} and data[0]["vm_basis"] == {"bot": "median of 3 recent runs"}
    # Without a local bucket: every job says it was assumed.
    result = CliRunner().invoke(group, ["cost", "--jobs", str(jobs), "--state-dir", str(tmp_path / "none")])
    assert "bot 5m00s, assumed (--runtime 5m; no runs recorded)" in " ".join(result.output.split())


def test_an_explicit_runtime_wins_over_the_local_history(tmp_path, monkeypatch, example_jobs):
    """The README's recipe figure ($0.76) holds after `make run` has left local runs behind."""
    import contextlib

    from spotcron.cli._bucket import RunsContext
    from spotcron.core import layout
    from spotcron.testing.memory import MemoryBlobs

    monkeypatch.chdir(tmp_path)
    blobs = MemoryBlobs("spotcron-local")
    done = record(attempt(1, 9), job="hello-bot").model_copy(update={"run_id": "20261122-1000"})
    blobs.write(layout.run_record("hello-bot", done.run_id), done.to_json())
    (tmp_path / ".spotcron" / "bucket").mkdir(parents=True)
    group = SpotcronGroup("spotcron")
    group.add_command(cost_command)
    context = RunsContext(open_blobs=lambda bucket, state_dir: contextlib.nullcontext(blobs))

    def cost(*args: str):
        return CliRunner().invoke(group, ["cost", "hello-bot", "--jobs", str(example_jobs), "--prices", "recipe-2018",
                                          *args], obj=context, terminal_width=200)

    [job] = json.loads(cost("--runtime", "2m", "--json").output)
    assert round(job["classic_monthly_usd"], 2) == 0.76
    assert job["vm_seconds_per_run"] == {"hello-bot": 120.0}
    said = " ".join(cost("--runtime", "2m").output.split())
    assert "VM time per run: hello-bot 2m00s, as given (--runtime 2m)." in said
    both = cost("--runtime", "2m", "--history", str(tmp_path))
    assert both.exit_code == 2 and "--history and --runtime both give the VM time per run" in both.output
    # Without --runtime the recorded runs still give it.
    [job] = json.loads(cost("--json").output)
    assert job["vm_basis"] == {"hello-bot": "median of 1 recent run"}


def test_cost_says_where_the_pages_different_projection_is_explained(run):
    result = run("hello-bot", env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert ("The results page's \"projected for the month\" extrapolates recent runs instead; docs/cost.md, "
            "\"The results page's month and spotcron cost\", says why the two differ.") in " ".join(result.output.split())


def test_vm_time_per_run_is_labelled_per_configuration(run, tmp_path):
    history = tmp_path / "history"
    for variant, seconds in (("highcpu-16", 11), ("e2-std-4", 13), ("t4", 13)):
        folder = history / "runs" / "dl-benchmark" / f"20261122-1000-{variant}-r1"
        folder.mkdir(parents=True)
        done = record(attempt(1, seconds), job="dl-benchmark", variant=variant)
        (folder / "run.json").write_bytes(done.model_copy(update={"run_id": folder.name}).to_json())
    result = run("dl-benchmark", "hello-bot", "--history", str(history), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split() for line in result.output.splitlines() if line.strip()}
    # the job's row carries its money; a row per configuration says its own VM time per run
    assert rows["highcpu-16"][1] == "11s" and rows["e2-std-4"][1] == "13s" and rows["t4"][1] == "13s"
    assert rows["hello-bot"][3] == "5m00s"  # job, ticks, VMs, VM/run
    assert "11s,13s" not in result.output


def test_cost_counts_each_schedule_once_and_opens_the_bucket_once(tmp_path, monkeypatch, example_jobs):
    import contextlib

    from spotcron.cli._bucket import RunsContext
    from spotcron.cost import projection
    from spotcron.testing.memory import MemoryBlobs

    monkeypatch.chdir(tmp_path)
    (tmp_path / ".spotcron" / "bucket").mkdir(parents=True)
    blobs = MemoryBlobs("spotcron-local")
    opened, counted = [], []
    count_fires = projection._count_fires

    def counting(cron, tz, start, end, *args):
        counted.append(start)
        return count_fires(cron, tz, start, end, *args)

    monkeypatch.setattr(projection, "_count_fires", counting)

    def open_blobs(bucket, state_dir):
        opened.append(state_dir)
        return contextlib.nullcontext(blobs)

    group = SpotcronGroup("spotcron")
    group.add_command(cost_command)
    result = CliRunner().invoke(group, ["cost", "--jobs", str(example_jobs)], obj=RunsContext(open_blobs=open_blobs))
    assert result.exit_code == 0, result.output
    assert len(opened) == 1  # the run records and the Spot advice, in one opening
    # both scheduling modes are priced from one count of each job's fire times: four weeks, then
    # the rest of the year (neither example fires hourly)
    assert len(counted) == 2 * 2


def test_cost_projects_a_placed_job_with_and_without_placement(run, tmp_path):
    from datetime import UTC, datetime

    from spotcron.core.zone_advice import Advice, ZoneAdvice

    stack = tmp_path / "stack.yaml"
    stack.write_text("placement: {regions: [us-west4], image_gb: 0.0}\n")
    now = datetime.now(UTC)
    advice = Advice(fetched_at=now, machines={"e2-small": {
        "us-central1-a": ZoneAdvice(spot_hourly=0.0070, preemption_rate=0.0),
        "us-west4-a": ZoneAdvice(spot_hourly=0.0020, preemption_rate=0.0)}})
    path = tmp_path / "advice.json"
    path.write_bytes(advice.to_json())
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "bot.yaml").write_text('schedule: "0 */4 * * *"\nimage: x\nmachine: {type: e2-small}\n')
    result = run("--stack", str(stack), "--advice", str(path), "--runtime", "10m", jobs=jobs)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    # 180 runs of 10 minutes: $0.21 at us-central1-a's Spot price, $0.06 at us-west4-a's plus
    # 180 x 1 MB of results sent home across regions ($0.02/GB): $0.064.
    assert ("Placement under the Spot advice of" in said
            and "bot: $0.064/month placed (us-west4-a) vs $0.210 in us-central1-a" in said), said
    stale = run("--stack", str(stack), "--advice", str(tmp_path / "missing.json"), jobs=jobs)
    assert stale.exit_code == 2 and "missing.json" in stale.output
