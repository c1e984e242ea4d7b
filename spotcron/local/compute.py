"""Local "VMs": creating one starts the real vm_images/runner/runner.sh as a process.

Each VM gets its own process group (and, where the system allows, its own PID namespace: see
containment.py), a metadata endpoint on the local metadata server and a work directory under the
state dir holding its record (leftovers.py). Deleting it ends every process it contains;
`maxRunDuration` is enforced by a timer, as Compute Engine does; a preemption sets the metadata
flag the runner watches, then deletes the VM 30 seconds later, like Spot's DELETE termination
action. A stack that died without stopping leaves records that the next one ends VMs by.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from spotcron.core import catalog
from spotcron.core.descriptor import METADATA_KEY, RunDescriptor
from spotcron.core.errors import AlreadyExists, Transient
from spotcron.core.secret_refs import LOCAL_PREFIX
from spotcron.engine.ports import Instance, InstanceRequest, RequestLedger
from spotcron.local import leftovers
from spotcron.local.containers import Lookup, find_runtime
from spotcron.local.containment import Containment, detect
from spotcron.local.gpus import GpuPool, host_gpus
from spotcron.local.turns import Turns
from spotcron.runtime import assets

log = logging.getLogger("spotcron.local")

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")  # what a job's thread pools read
LOCAL_LOG_INTERVAL = "1"  # seconds between a local VM's shipments of new output
PREEMPTION_NOTICE_S = 30.0
# How long a deleted VM's processes may take to end after SIGKILL; only a process stuck in the
# kernel (a hung disk or network filesystem) takes longer, and waiting more would not end it.
GROUP_EXIT_S = 10.0


@dataclass
class _Vm:
    instance: Instance
    process: subprocess.Popen | None  # None while it waits for its host GPUs
    expiry: threading.Timer
    runtime: str | None  # the docker/podman binary running its container, if any
    workdir: Path
    gpus: tuple[str, ...] = ()  # the host GPUs it holds
    turn: str | None = None  # the job whose compared runs take turns on this host (turns.py)


class LocalCompute:
    """ports.Compute on processes. `base_env` is the environment the runners start from.

    `gpus`: the host GPUs to hand out (nvidia-smi's indices); left out, nvidia-smi is asked.
    A VM without a GPU sees none; one with `count` GPUs gets that many to itself (gpus.py).
    The compared runs of a job (matrix entries, repeats) take turns, each with the whole host (turns.py).
    """

    def __init__(self, metadata, storage_url: str, state_dir: Path, clock, *, base_env: Mapping[str, str],
                 cwd: Path, runtime_for=find_runtime, runner: Path | None = None,
                 preemption_notice_s: float = PREEMPTION_NOTICE_S, containment: Containment | None = None,
                 gpus: Sequence[str] | None = None, host: str | None = None,
                 notify: Callable[[str], None] | None = None, secrets_url: str = ""):
        self.metadata = metadata
        self.storage_url = storage_url
        self.vms_dir = Path(state_dir) / "vms"
        self.clock = clock
        self.base_env = dict(base_env)
        self.cwd = Path(cwd)
        self.runtime_for = runtime_for
        self.runner = runner or assets.runner_dir() / "runner.sh"
        self.preemption_notice_s = preemption_notice_s
        self.containment = containment or detect()
        self.gpus = GpuPool(host_gpus() if gpus is None else gpus)
        self.turns = Turns()
        self.host = host or socket.gethostname()
        self.notify = notify  # says to the user, once, why containers are not used (a stopped daemon)
        self.secrets_url = secrets_url  # the local Secret Manager (local/secret_manager.py)
        self._told: set[tuple[str, str]] = set()  # (stopped daemons, job) said
        self._vms: dict[tuple[str, str], _Vm] = {}
        self._runtimes: dict[str, Lookup] = {}
        self._ids = 5000
        self._requests = RequestLedger()
        self._lock = threading.RLock()
        self._reapers: list[threading.Thread] = []
        self._closed = False

    def host_problem(self, spec) -> str | None:
        """Why this host can never run `spec`'s VM (more GPUs than it has), or None. The engine asks
        before the run is admitted (Deps.host_problem): such a run ends `skipped` at once instead of
        holding a VM slot, a turn and the queue until its runner finds no GPU."""
        gpu = spec.machine.gpu
        known = catalog.machine_type(spec.machine.type)
        name, count = (gpu.type, gpu.count) if gpu else \
            (known.gpu_type or spec.machine.type, known.gpu_count) if known and known.bundled_gpu else ("", 0)
        shortage = self.gpus.shortage(count) if count else None
        return f"the configuration asks for {name} x{count}, and {shortage}; not run on the CPU" if shortage else None

    # --- the port ----------------------------------------------------------------------------
    def create_instance(self, request: InstanceRequest) -> Instance:
        key = (request.zone, request.name)
        with self._lock:
            if self._closed:
                # A callback or delivery still in flight while local mode stops would otherwise
                # start a runner that nothing ever deletes.
                raise Transient(f"local compute is shut down; {request.name} was not created")
            repeated = self._requests.repeat(request, self.clock.now())
            if isinstance(repeated, Exception):
                raise repeated
            if repeated is not None:
                return repeated  # Compute Engine ignores a repeated requestId: nothing is started
            if key in self._vms:
                raise AlreadyExists(f"instance {request.name} already exists in {request.zone}")
            self._ids += 1
            instance = Instance(
                name=request.name, zone=request.zone, status="RUNNING", labels=dict(request.labels),
                machine_type=request.machine_type, provisioning_model="SPOT" if request.spot else "STANDARD",
                created_at=self.clock.now(), metadata=dict(request.metadata), instance_id=str(self._ids),
            )
            self._requests.remember(request, instance.created_at, instance)
            self.metadata.register(request.name, request.zone, request.metadata, instance_id=instance.instance_id,
                                   created_at=instance.created_at, service_account=request.service_account)
            need = request.gpu.count if request.gpu is not None else 0
            descriptor = RunDescriptor.from_metadata(request.metadata[METADATA_KEY])
            turn = descriptor.job if descriptor.compared else None
            gpus = None if turn is not None else \
                self.gpus.try_take(need) if need and self.gpus.shortage(need) is None else ()
            expiry = threading.Timer(request.max_run_duration_s, self._expire, args=key)
            expiry.daemon = True
            if gpus is None:
                # Its turn or its GPUs are another VM's for now: the runner starts when they are free.
                self._vms[key] = _Vm(instance, None, expiry, None, self.vms_dir / request.name, turn=turn)
                if turn is not None:
                    self.turns.enqueue(turn, request.name, descriptor.run_id)
                threading.Thread(target=self._start_when_free, args=(key, request, need, turn),
                                 name=f"wait-{request.name}", daemon=True).start()
                expiry.start()
                log.info("local VM %s waits for %s", request.name,
                         f"its turn among {turn}'s compared runs" if turn else f"{need} host GPU(s)")
                return instance
            process, runtime, workdir = self._start_runner(request, gpus)
            expiry.start()
            self._vms[key] = _Vm(instance, process, expiry, runtime, workdir, gpus)
        log.info("started local VM %s (pid %s)", request.name, process.pid)
        return instance

    def _start_when_free(self, key: tuple[str, str], request: InstanceRequest, need: int,
                         turn: str | None = None) -> None:
        created = time.monotonic()

        def gone() -> bool:
            with self._lock:
                return self._closed or key not in self._vms

        if turn is not None and not self.turns.take(turn, request.name, gone):
            return
        gpus = self.gpus.take(need, gone) if need and self.gpus.shortage(need) is None else ()
        if gpus is None:
            self._leave_turn(turn, request.name)
            return
        with self._lock:
            vm = self._vms.get(key)
            if vm is None or self._closed:
                self.gpus.give_back(gpus)
                self._leave_turn(turn, request.name)
                return
            try:
                vm.process, vm.runtime, vm.workdir = self._start_runner(request, gpus,
                                                                        waited=time.monotonic() - created)
            except Exception:  # noqa: BLE001 - the VM stays unstarted; its deadline deletes it
                self.gpus.give_back(gpus)
                self._leave_turn(turn, request.name)
                log.exception("local VM %s could not start its runner", request.name)
                return
            vm.gpus = gpus
        log.info("started local VM %s on host GPU(s) %s (pid %s)", request.name, ",".join(gpus), vm.process.pid)

    def get_instance(self, zone: str, name: str) -> Instance | None:
        with self._lock:
            vm = self._vms.get((zone, name))
            return vm.instance if vm else None

    def list_managed(self) -> list[Instance]:
        with self._lock:
            return [vm.instance for vm in self._vms.values() if vm.instance.managed]

    def delete_instance(self, zone: str, name: str) -> bool:
        with self._lock:
            vm = self._vms.pop((zone, name), None)
        if vm is None:
            return False
        vm.expiry.cancel()
        if vm.process is None:  # still waiting for its turn or its GPUs: nothing started
            self._leave_turn(vm.turn, name)
            self.metadata.unregister(name)
            log.info("deleted local VM %s before it started", name)
            return True
        # Like Compute Engine's delete, this returns at once; the process is reaped in the
        # background, because the runner may be waiting on the very callback deleting it.
        _kill_group(vm.process)
        reaper = threading.Thread(target=self._reap, args=(vm, name), name=f"reap-{name}", daemon=True)
        reaper.start()
        with self._lock:
            self._reapers.append(reaper)
        self.metadata.unregister(name)
        log.info("deleted local VM %s", name)
        return True

    def _reap(self, vm: _Vm, name: str) -> None:
        vm.process.wait()
        # The runner's end is not the group's: its job got the same SIGKILL but may still be
        # exiting (uninterruptible IO on a loaded machine), and "deleted" means nothing runs.
        if not _wait_group_gone(vm.process.pid, GROUP_EXIT_S):
            log.warning("processes of local VM %s still alive %ss after SIGKILL", name, GROUP_EXIT_S)
        self._finish_deleting(name, vm.runtime, vm.workdir)
        self.gpus.give_back(vm.gpus)  # the next GPU configuration may start
        self._leave_turn(vm.turn, name)  # and the job's next compared run

    def _leave_turn(self, turn: str | None, name: str) -> None:
        if turn is not None:
            self.turns.leave(turn, name)

    def _finish_deleting(self, name: str, runtime: str | None, workdir: Path) -> None:
        if runtime is not None:
            # A container outlives a killed runner: docker's daemon or podman's conmon owns it.
            # Kill first: `rm --force` would wait out the container's stop timeout.
            for command in ([runtime, "kill", name], [runtime, "rm", "--force", name]):
                with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                    subprocess.run(command, capture_output=True, timeout=60)
        if runtime is not None or not self.containment.whole:
            # Outside a namespace of ours a process can leave the group (a daemon, podman's
            # conmon); its environment may still say whose it is.
            _kill_all(leftovers.marked_processes(workdir))
        # The work directory is the VM's boot disk, deleted with it: whatever the run kept is in
        # the bucket by now, and a second copy of every log and result would grow forever. Its
        # record goes with it, last: until then a crashed stack's successor still ends this VM.
        shutil.rmtree(workdir, ignore_errors=True)

    def end_leftovers(self) -> list[str]:
        """End every VM a previous stack on this state dir recorded and did not delete; their names.

        Call before the first sweep: the sweep would see their runs' VMs as vanished and start
        new attempts while the old ones still ran. A record's pid counts only while the process
        holding it started when the record says (a pid is reused once its process is gone).
        """
        ended = []
        for workdir, record in leftovers.read_all(self.vms_dir):
            with self._lock:
                if any(vm.workdir == workdir for vm in self._vms.values()):
                    continue  # one of ours
            pid = record.pid
            if pid is not None and record.started is not None and leftovers.process_started(pid) == record.started:
                # The group and its leader (unshare, whose --kill-child ends the namespace with it).
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                if not _wait_group_gone(pid, GROUP_EXIT_S):
                    log.warning("processes of the leftover local VM %s still alive %ss after SIGKILL",
                                record.name, GROUP_EXIT_S)
            _kill_all(leftovers.marked_processes(workdir))
            self._finish_deleting(record.name, record.runtime, workdir)
            log.warning("ended local VM %s, left running by a local stack that did not stop", record.name)
            ended.append(record.name)
        return ended

    # --- what Compute Engine does on its own ---------------------------------------------------
    def preempt(self, zone: str, name: str) -> None:
        """Spot preemption: the notice now, the VM gone after the notice period."""
        self.metadata.set_preempted(name)
        timer = threading.Timer(self.preemption_notice_s, self.delete_instance, args=(zone, name))
        timer.daemon = True
        timer.start()

    def crash(self, zone: str, name: str) -> None:
        """The VM dies at once without a word (host failure, kill -9): for tests of the sweep."""
        self.delete_instance(zone, name)

    def _expire(self, zone: str, name: str) -> None:
        log.warning("local VM %s reached its maxRunDuration; deleting it", name)
        self.delete_instance(zone, name)

    def close(self) -> None:
        """Delete every VM: nothing keeps running after local mode stops."""
        with self._lock:
            self._closed = True
            keys = list(self._vms)
        for zone, name in keys:
            self.delete_instance(zone, name)
        with self._lock:
            reapers, self._reapers = self._reapers, []
        for reaper in reapers:
            # The group's exit, then a container's kill and removal: each bounded on its own.
            reaper.join(timeout=GROUP_EXIT_S + 20)

    # --- helpers -------------------------------------------------------------------------------
    def lookup(self, image: str, job: str, fallback: bool = False) -> Lookup:
        """The runtime that runs `image`, looked up once per image. A stopped docker daemon is said
        to the user (`notify`) once per job that needs it: one without a local command (`fallback`)
        to run instead; a job with one runs it as it was written to, so the log file alone says it."""
        if image not in self._runtimes:
            found = self.runtime_for(image)
            # A plain binary (or None) from a caller's own lookup is fine too.
            lookup = found if isinstance(found, Lookup) else Lookup(found, f"no container runtime has {image}")
            if lookup.daemon_missing:
                log.warning("%s; jobs on %s with a local command run it instead", lookup.why_not, image)
            self._runtimes[image] = lookup
        lookup = self._runtimes[image]
        stopped = "; ".join(lookup.stopped)
        if lookup.binary is None and stopped and not fallback and self.notify is not None \
                and (stopped, job) not in self._told:
            self._told.add((stopped, job))
            self.notify(f"{stopped}: {job} has no local command to run instead of its image, so its runs fail "
                        "until a container runtime runs it")
        return lookup

    def runner_env(self, name: str, lookup: Lookup, workdir: Path, gpus: tuple[str, ...] = (),
                   sharing: int = 1) -> dict[str, str]:
        """The environment a local VM's runner starts with: the user's, where this VM's metadata,
        storage and work directory are, and what of this host the job may use. `sharing`: the local
        VMs alive with this one, which share the host's cores."""
        return {
            # Local VMs share one host's cores. Each job's thread pools (OpenMP: PyTorch, NumPy's
            # BLAS) default to every core, and six such jobs at once ran 26 times slower than one
            # after another; each gets its share unless the user's environment says otherwise.
            **{var: str(max(1, (os.cpu_count() or 1) // max(1, sharing)))
               for var in THREAD_VARS if var not in self.base_env},
            # Secret values reach a runner only through the local Secret Manager, never its environment.
            **{k: v for k, v in self.base_env.items() if not k.startswith(LOCAL_PREFIX)},
            # The job's local.command runs with this Python first on PATH, so `python3` has our deps.
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), self.base_env.get("PATH", os.defpath)]),
            "SPOTCRON_METADATA_URL": self.metadata.url_for(name),
            "SPOTCRON_STORAGE_URL": self.storage_url,
            "SPOTCRON_DOCKER": lookup.binary or "none",
            "SPOTCRON_WORKDIR": str(workdir),
            "SPOTCRON_CONTAINER_NAME": name,
            # Said in the run's logs when the job can't run: no runtime and no local command.
            "SPOTCRON_NO_RUNTIME": lookup.why_not,
            # No metadata server address to wall off here: the local one listens on loopback,
            # which a container on its own network doesn't reach.
            "SPOTCRON_IPTABLES": "none",
            # The work dir is the host's own directory: nothing to remount exec, as on a COS VM.
            "SPOTCRON_MOUNT": "none",
            # A VM ships new output every 5 s; here a request costs nothing, so `run --follow`
            # and `logs --follow` see each line within a second.
            "SPOTCRON_LOG_INTERVAL": self.base_env.get("SPOTCRON_LOG_INTERVAL", LOCAL_LOG_INTERVAL),
            # Kept in the job's environment too, so a process can be told to be this VM's.
            leftovers.MARKER: str(workdir),
            # What the job may use of this host: the runner records the host as the run's hardware
            # and shows the job exactly these GPUs (none for a configuration without one).
            "SPOTCRON_LOCAL_HOST": self.host,
            "SPOTCRON_LOCAL_GPUS": ",".join(gpus),
            # Secrets are read from the local Secret Manager and kept on tmpfs where there is one.
            "SPOTCRON_SECRETS_URL": self.secrets_url or "http://127.0.0.1:9/v1",
            "SPOTCRON_SECRETS_DIR": secrets_dir(name, workdir),
        }

    def _start_runner(self, request: InstanceRequest, gpus: tuple[str, ...],
                      waited: float = 0.0) -> tuple[subprocess.Popen, str | None, Path]:
        descriptor = RunDescriptor.from_metadata(request.metadata[METADATA_KEY])
        lookup = self.lookup(descriptor.image, descriptor.job, fallback=bool(descriptor.local_command))
        runtime = lookup.binary
        workdir = self.vms_dir / request.name
        # Recorded before it starts: a stack killed right after the start still leaves a record.
        record = leftovers.VmRecord(name=request.name, zone=request.zone, runtime=runtime)
        leftovers.write(workdir, record)
        # A compared run has the host to itself among its job's runs (turns.py): every repeat gets
        # the same thread count, the host's, whatever else was alive when it started.
        sharing = 1 if descriptor.compared else len(self._vms) + 1
        env = self.runner_env(request.name, lookup, workdir, gpus, sharing=sharing)
        env.pop("SPOTCRON_GPU_PROBLEM", None)  # only ever ours
        # How long the VM waited for its turn or its GPUs: the runner records it, and the report
        # leaves it out of the run's boot and cost (a cloud VM does not wait for another's run).
        env["SPOTCRON_LOCAL_WAITED_S"] = f"{waited:.3f}"
        if request.gpu is not None and (shortage := self.gpus.shortage(request.gpu.count)):
            env["SPOTCRON_GPU_PROBLEM"] = shortage
        command = self.containment.command(["bash", str(self.runner)], runtime=runtime)
        with open(workdir / "runner.log", "ab") as output:
            process = subprocess.Popen(command, env=env, cwd=self.cwd, stdout=output,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        started = leftovers.process_started(process.pid)
        leftovers.write(workdir, leftovers.VmRecord(request.name, request.zone, runtime, process.pid, started))
        return process, runtime, workdir


def secrets_dir(name: str, workdir: Path) -> str:
    """Where a local VM's runner keeps its secrets' files: tmpfs (/dev/shm) where the system has
    one, so a value never reaches a disk; else beside its work directory (deleted with the VM)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        return str(shm / f"spotcron-{os.getuid()}-{name}-{os.urandom(4).hex()}")
    return str(workdir / ".secrets")


def _kill_group(process: subprocess.Popen) -> None:
    """End the runner and everything it started (the container or local command), at once."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _wait_group_gone(pgid: int, timeout_s: float) -> bool:
    """Wait until no live process is in process group `pgid`; False if some still is after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while _group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def _group_alive(pgid: int) -> bool:
    """Whether a process other than a zombie is in group `pgid`.

    Zombies are dead already and whoever adopted them reaps them when it will, so they do not
    count; /proc tells them apart. Without /proc, any member counts.
    """
    if not os.path.isdir("/proc/self"):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # someone else's process in the group: still alive
        return True
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                stat = handle.read()
        except OSError:
            continue  # gone since the listing
        # "PID (COMM) STATE PPID PGRP ...": COMM may hold spaces and parentheses, so split after its last ")".
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
