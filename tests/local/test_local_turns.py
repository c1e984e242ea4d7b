"""The compared runs of a job (matrix entries, repeats) take turns on the local host, each with
the whole host: side by side, nine PyTorch runs on two cores got thread counts from how many runs
were alive at their start (2 for one repeat, 1 for its siblings) and that repeat ran 5.7x slower.
Other jobs' runs still start at once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from spotcron.core.descriptor import METADATA_KEY, RunDescriptor
from spotcron.engine.clock import SystemClock
from spotcron.engine.ports import InstanceRequest
from spotcron.local.compute import LocalCompute
from spotcron.local.containment import PROCESS_GROUP, Containment
from spotcron.local.turns import Turns, repeat_number
from spotcron.testing.waiting import wait_until

ZONE = "local-zone1-a"


class Metadata:
    def register(self, name, zone, metadata, **kwargs) -> None:
        pass

    def unregister(self, name) -> None:
        pass

    def url_for(self, name) -> str:
        return f"http://127.0.0.1:1/{name}"


@pytest.fixture
def host(tmp_path, monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    runner = tmp_path / "runner.sh"
    runner.write_text('env > "$SPOTCRON_WORKDIR/../$SPOTCRON_CONTAINER_NAME.env"; exec sleep 60\n')
    local = LocalCompute(Metadata(), "http://127.0.0.1:1/", tmp_path / "state", SystemClock(), base_env={},
                         cwd=tmp_path, runtime_for=lambda image: None, runner=runner, gpus=[], host="box",
                         containment=Containment(PROCESS_GROUP, (), "process group only"))
    yield local
    local.close()


def request(name: str, run_id: str, *, job: str = "bench", compared: bool = True) -> InstanceRequest:
    descriptor = RunDescriptor(job=job, run_id=run_id, attempt=1, image="example/job:1", bucket="b",
                               prefix=f"runs/{job}/{run_id}/", job_done_url="http://127.0.0.1:1/",
                               deadline=datetime.now(UTC) + timedelta(minutes=5), timeout_s=60, compared=compared)
    return InstanceRequest(name=name, zone=ZONE, machine_type="e2-standard-4", spot=True, max_run_duration_s=300,
                           disk_gb=10, labels={}, service_account="x", metadata={METADATA_KEY: descriptor.to_metadata()})


def started(local: LocalCompute, name: str) -> bool:
    return (local.vms_dir / f"{name}.env").is_file()


def env_of(local: LocalCompute, name: str) -> dict[str, str]:
    path = local.vms_dir / f"{name}.env"
    text = wait_until(lambda: path.read_text() if path.exists() and path.read_text().endswith("\n") else None,
                      f"the runner of {name} started")
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_compared_runs_take_turns_interleaved_and_each_gets_the_whole_host(host: LocalCompute):
    # Created as the engine creates a tick's runs: every repeat of the first entry, then the second's.
    names = {"a1": "t-a-r1", "a2": "t-a-r2", "b1": "t-b-r1", "b2": "t-b-r2"}
    for name, run_id in names.items():
        host.create_instance(request(name, run_id))
    order = []
    threads = {}
    for _ in names:
        holder = wait_until(lambda: host.turns.holder("bench") not in (None, *order) and host.turns.holder("bench"),
                            "the next run to hold the turn")
        threads[holder] = env_of(host, holder)["OMP_NUM_THREADS"]
        assert {n for n in names if started(host, n)} == {*order, holder}, "two compared runs at once"
        order.append(holder)
        host.delete_instance(ZONE, holder)
    assert order == ["a1", "b1", "a2", "b2"]  # r1 of every configuration before any r2
    assert float(env_of(host, "b2")["SPOTCRON_LOCAL_WAITED_S"]) > 0  # recorded, and left out of its cost
    assert set(threads.values()) == {"8"}  # the whole host, however many VMs were alive


def test_other_jobs_runs_start_at_once(host: LocalCompute):
    host.create_instance(request("a1", "t-a-r1"))
    host.create_instance(request("a2", "t-a-r2"))
    host.create_instance(request("bot", "t", job="bot", compared=False))
    env_of(host, "bot")
    env_of(host, "a1")
    assert host.turns.waiting("bench") == 1 and not started(host, "a2")


def test_a_run_deleted_while_it_waits_gives_up_its_place(host: LocalCompute):
    host.create_instance(request("a1", "t-a-r1"))
    host.create_instance(request("a2", "t-a-r2"))
    host.create_instance(request("a3", "t-a-r3"))
    env_of(host, "a1")
    assert host.delete_instance(ZONE, "a2")
    host.delete_instance(ZONE, "a1")
    env_of(host, "a3")
    assert not started(host, "a2")


def test_turn_order_and_repeat_numbers():
    assert repeat_number("20260101-0300-e2-std-4-r12") == 12 and repeat_number("20260101-0300") == 1
    turns = Turns()
    for name, run_id in (("x", "t-a-r2"), ("y", "t-b-r1")):
        turns.enqueue("job", name, run_id)
    assert turns.take("job", "y", lambda: False)
    assert turns.take("job", "x", lambda: True) is False  # gave up: left the line
    assert turns.waiting("job") == 0
