"""Local mode, assembled: the whole pipeline on one machine with no cloud account.

Only the cloud edges are replaced: the bucket is the local storage server,
VMs are runner processes, the metadata server and token signer are local, messages travel on
an in-process bus (or the Pub/Sub emulator). start_job, job_done, credentials and sweep are the
same functions-framework apps built from functions/main.py that run on Google Cloud; only the
broker's minting is local (the storage server's grants instead of Google's STS).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from spotcron.core.runs import RunRecord
from spotcron.core.settings import Limits, Settings
from spotcron.core.spec import JobSpec
from spotcron.engine.deps import Deps
from spotcron.local.feed import EventFeed
from spotcron.runtime import assets, entrypoints

log = logging.getLogger("spotcron.local")

LOCAL_ZONES = ("local-zone1-a", "local-zone1-b")
LOCAL_MISSED = "spotcron up was not running (stopped, or the machine asleep)"


def local_settings(job_done_url: str, credentials_url: str = "", *, sweep_interval: int = 30,
                   grace: int = 60, limits: Limits | None = None) -> Settings:
    from spotcron.local.blobs import LOCAL_BUCKET

    # Costs are shown as if the runs had happened in us-central1.
    return Settings(project="spotcron-local", region="us-central1", zones=LOCAL_ZONES, bucket=LOCAL_BUCKET,
                    job_done_url=job_done_url, credentials_url=credentials_url, sweep_interval=sweep_interval,
                    grace=grace, limits=limits or Limits())


def local_run_cost(prices: Any, settings: Settings) -> Callable[[Any], tuple]:
    """The engine's cost function here: billing's, of the run without its wait for its turn on this
    host (or its GPUs), which the record keeps as `local_wait_s` (cost/local_wait.py)."""
    from spotcron.cost.billing import cost_function
    from spotcron.cost.local_wait import priced_without_wait

    return priced_without_wait(cost_function(prices, settings.region, image_gb=settings.placement.image_gb,
                                             results_gb=settings.placement.results_gb))


class LocalStack:
    def __init__(self, state_dir: Path, *, environ: Mapping[str, str], cwd: Path | None = None,
                 sweep_interval: int = 30, grace: int = 60, runtime_for: Callable[[str], str | None] | None = None,
                 prices: Any = None, limits: Limits | None = None, containment: Any = None,
                 notify: Callable[[str], None] | None = None, stack_notify: Any = None,
                 gpus: Sequence[str] | None = None):
        self.state_dir = Path(state_dir)
        self.environ = dict(environ)
        self.cwd = Path(cwd or Path.cwd())
        self.sweep_interval = sweep_interval
        self.grace = grace
        self.runtime_for = runtime_for
        self.prices = prices
        self.limits = limits  # the stack file's `limits:`, as the functions enforce them on Google Cloud
        self.containment = containment  # local/containment.py's; None: the strongest this machine gives
        self.notify = notify  # a line for the user (up prints it): why containers are not used, notifications sent
        self.stack_notify = stack_notify  # the stack file's notify: (core/notify_spec.Notify), every job's default
        self.gpus = gpus  # the host GPUs to hand out; None: nvidia-smi's (local/gpus.py)
        self._stack: list[Callable[[], None]] = []
        self._stop_reason = "the local stack was stopped"
        self.deps: Deps | None = None
        self.bus: Any = None
        self.scheduler: Any = None
        self.feed = EventFeed()  # run events, for `spotcron up`'s view
        self.leftovers_ended: list[str] = []  # VMs a stack that did not stop left running, ended at start

    # --- lifecycle -----------------------------------------------------------------------------
    def start(self) -> LocalStack:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        import functions_framework

        from spotcron.engine.clock import SystemClock
        from spotcron.gcp.id_tokens import GoogleIdentity
        from spotcron.local.blobs import LOCAL_BUCKET
        from spotcron.local.bucket import LocalBucket, LocalMinter
        from spotcron.local.bus import EmulatorBus, InProcessBus
        from spotcron.local.compute import LocalCompute
        from spotcron.local.containers import find_runtime
        from spotcron.local.metadata import LocalMetadataServer
        from spotcron.local.secret_manager import LocalSecrets, SecretAccessServer

        # The same main.py deploy ships: the wheel's copy or the checkout's (runtime/assets.py).
        source = str(assets.functions_dir() / "main.py")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._stack.append(_lock_state_dir(self.state_dir))
        self._stack.append(_log_to_file(self.state_dir / "spotcron.log"))
        clock = SystemClock()
        bucket = LocalBucket(self.state_dir / "bucket", LOCAL_BUCKET).start()
        self._stack.append(bucket.stop)
        # Unset only once job_done and the bus are stopped (closers run newest first): a message
        # or callback handled after it would build Google's backends from the environment.
        self._stack.append(lambda: entrypoints.use(None))
        job_done = _HttpServer(functions_framework.create_app(target="job_done", source=source),
                               "spotcron-job-done")
        self._stack.append(job_done.stop)
        # The credentials broker, as deployed: the runner trades its VM's identity token for a
        # storage token of its own attempt (engine/broker.py), minted by the bucket's grants.
        broker = _HttpServer(functions_framework.create_app(target="credentials", source=source),
                             "spotcron-credentials")
        self._stack.append(broker.stop)
        settings = local_settings(job_done.url, broker.url, sweep_interval=self.sweep_interval, grace=self.grace,
                                  limits=self.limits)
        # Its VMs' own access tokens reach no storage (the VM account holds no storage role); each
        # reads the secrets its descriptor names from the local Secret Manager.
        local_secrets = LocalSecrets(self.environ, self.state_dir)
        metadata = LocalMetadataServer(project=settings.project, service_account=settings.vm_service_account_email,
                                       access_tokens=local_secrets.token_for).start()
        self._stack.append(metadata.stop)
        local_secrets.vm_descriptor = _descriptor_by_token(metadata, local_secrets)
        secret_server = SecretAccessServer(local_secrets).start()
        self._stack.append(secret_server.stop)
        compute = LocalCompute(metadata, bucket.url, self.state_dir, clock, base_env=self.environ, cwd=self.cwd,
                               runtime_for=self.runtime_for or find_runtime, containment=self.containment,
                               notify=self.notify, secrets_url=secret_server.url, gpus=self.gpus)
        self._stack.append(compute.close)
        # Before any message is handled: the first sweep would take a crashed stack's VMs for
        # vanished ones and start their runs again while the old attempts still ran.
        self.leftovers_ended = compute.end_leftovers()
        # Runs still in flight end as `cancelled` once no message can start more (the bus closes
        # first) and before their VMs go: a stopped stack leaves no run `running` for ever.
        self._stack.append(self._cancel_live_runs)
        emulator = self.environ.get("PUBSUB_EMULATOR_HOST")
        self.bus = EmulatorBus(emulator) if emulator else InProcessBus(clock)
        self._stack.append(self.bus.close)
        self.deps = Deps(settings=settings, compute=compute, blobs=bucket.blobs(),
                         events=self.feed, identity=GoogleIdentity(certs_url=metadata.certs_url), clock=clock,
                         run_cost=local_run_cost(self.prices, settings),
                         minter=LocalMinter(bucket), host_problem=compute.host_problem)
        # The same run-end hooks as the functions; webhooks are really sent, and `up` prints each.
        from spotcron.runtime import webhooks
        from spotcron.runtime.run_end import install
        from spotcron.runtime.secret_values import local_lookup

        install(self.deps, post=webhooks.post, secrets=local_lookup(self.environ, self.state_dir),
                default=self.stack_notify, announce=self.notify, local=True)
        self.compute, self.metadata, self.bucket = compute, metadata, bucket
        entrypoints.use(self.deps, missed_reason=LOCAL_MISSED)
        start = functions_framework.create_app(target="start_job", source=source).test_client()
        sweep = functions_framework.create_app(target="sweep", source=source).test_client()
        self.bus.subscribe(settings.start_topic, _poster(start))
        self.bus.subscribe(settings.sweep_topic, _poster(sweep))
        log.info("local stack up: bucket %s, job_done %s, credentials %s", bucket.url, job_done.url, broker.url)

    def stop(self, reason: str = "the local stack was stopped") -> None:
        """Stop everything, newest first; safe to call twice and after a failed start.

        Every run still in flight ends `cancelled` with `reason`, its VM deleted.
        """
        self._stop_reason = reason
        if self.scheduler is not None:
            self.scheduler.stop()
            self.scheduler = None
        while self._stack:
            closer = self._stack.pop()
            try:
                closer()
            except Exception:  # noqa: BLE001 - keep stopping the rest
                log.exception("stopping %r failed", closer)

    def _cancel_live_runs(self) -> None:
        from spotcron.engine import transitions
        from spotcron.engine.found_vm import with_found_vm
        from spotcron.engine.writer import step

        deps = self.deps
        if deps is None:
            return
        for job, run_id in deps.store.live_runs():
            try:
                record = deps.store.read(job, run_id)
                if record is None or record.terminal:
                    continue
                record = with_found_vm(deps, record)  # a VM its dead start never recorded is counted
                attempt = record.current_attempt
                if attempt is not None and attempt.zone:
                    deps.compute.delete_instance(attempt.zone, attempt.vm_name)
                step(deps, job, run_id, transitions.Cancel(self._stop_reason))
                log.info("cancelled %s/%s: %s", job, run_id, self._stop_reason)
            except Exception:  # noqa: BLE001 - cancel the others; the sweep of the next start sees to this one
                log.exception("could not cancel %s/%s", job, run_id)

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what the CLI does with it ---------------------------------------------------------------
    @property
    def settings(self) -> Settings:
        assert self.deps is not None, "start() the stack first"
        return self.deps.settings

    def schedule(self, load: Callable[[], list[JobSpec]], watch: list[Path]) -> None:
        """Fire jobs at their cron times until stop()."""
        from spotcron.local.scheduler import LocalScheduler

        self.scheduler = LocalScheduler(self._deploying(load), self.bus.publish, self.deps.clock, start_topic=self.settings.start_topic,
                                        sweep_topic=self.settings.sweep_topic,
                                        sweep_interval_s=self.settings.sweep_interval, watch=watch).start()
        self.record_missed()

    def record_missed(self) -> list:
        """Record the ticks that fell while no stack was running (engine/missed.py); the sweep
        records those of a machine that slept with the stack up. `up` prints each."""
        from spotcron.engine.dispatch_specs import BucketSpecs
        from spotcron.engine.missed import record_missed

        specs = BucketSpecs(self.deps.blobs)
        found = record_missed(self.deps, specs.current(), specs.deployed_at(), reason=lambda tick: LOCAL_MISSED,
                              replaced=specs.replaced())
        for item in found:
            if self.notify is not None:
                self.notify(f"{item.job}: {item.ticks} tick(s) missed while spotcron up was not running "
                            f"(record {item.job}/{item.run_id})")
        return found

    def accept_handoffs(self) -> None:
        """Let `spotcron run` hand runs to this stack (see spotcron.local.handoff) until stop()."""
        from spotcron.local.handoff import HandoffServer

        def start(payload: dict) -> list[tuple[str, str]]:
            # {"spec": ..., "overrides": ...} from `run --env/--args`; else the spec payload itself.
            if "spec" in payload:
                from spotcron.core.overrides import Overrides

                overrides = Overrides.model_validate(payload["overrides"]) if payload.get("overrides") else None
                return self.run_now(JobSpec.from_payload(payload["spec"]), overrides)
            return self.run_now(JobSpec.from_payload(payload))

        server = HandoffServer(self.state_dir, start, self.deps.store.read).start()
        self._stack.append(server.stop)

    def _deploying(self, load: Callable[[], list[JobSpec]]) -> Callable[[], list[JobSpec]]:
        """`load`, plus what deploy does on Google Cloud: the loaded specs become the deployed ones."""
        from spotcron.engine.deployed import SpecStore

        def load_and_deploy() -> list[JobSpec]:
            specs = load()
            SpecStore(self.deps.blobs).deploy(specs)
            return specs

        return load_and_deploy

    def run_now(self, spec: JobSpec, overrides: Any = None) -> list[tuple[str, str]]:
        """Start a manual run of every matrix entry of `spec`; (job, run_id) of each.

        The CLI is the control plane here, as deploy is on Google Cloud: it deploys `spec`, then
        asks for a run of it by name and digest like any start message. `overrides`
        (core/overrides.Overrides) are written to the bucket and named by the message: the run
        gets them, the deployed spec and the schedule do not.
        """
        from spotcron.engine.deployed import SpecStore, start_message
        from spotcron.engine.run_overrides import start_message_with, write_overrides

        nonce = secrets.token_hex(2)
        SpecStore(self.deps.blobs).write(spec)
        payload = start_message(spec)
        if overrides is not None and not overrides.empty:
            payload = start_message_with(payload, write_overrides(self.deps.blobs, overrides.for_run(spec.name, nonce)))
        self.bus.publish(self.settings.start_topic, payload, {"trigger": "manual", "nonce": nonce})
        expected = len(spec.variants())
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            runs = [(spec.name, run_id) for run_id in self.deps.store.run_ids(spec.name)
                    if run_id.startswith("m") and run_id.split("-")[2] == nonce]
            if len(runs) >= expected:
                return runs
            time.sleep(0.2)
        raise TimeoutError(f"start_job did not create the runs of {spec.name} within 60 s; see "
                           f"{self.state_dir / 'spotcron.log'}")

    def sweep_now(self) -> None:
        self.bus.publish(self.settings.sweep_topic, b"{}", {})

    def wait(self, runs: list[tuple[str, str]], *, timeout: float,
             progress: Callable[[list[RunRecord]], None] | None = None, poll_s: float = 0.5) -> list[RunRecord]:
        """Until every run is terminal (or `timeout`), sweeping on the stack's interval meanwhile."""
        store = self.deps.store
        deadline = time.monotonic() + timeout
        next_sweep = time.monotonic() + self.settings.sweep_interval
        while True:
            records = [store.read(job, run_id) for job, run_id in runs]
            current = [r for r in records if r is not None]
            if progress is not None:
                progress(current)
            if len(current) == len(runs) and all(r.terminal for r in current):
                return current
            if time.monotonic() > deadline:
                return current
            if time.monotonic() >= next_sweep:
                self.sweep_now()
                next_sweep = time.monotonic() + self.settings.sweep_interval
            time.sleep(poll_s)


def _descriptor_by_token(metadata, local_secrets) -> Callable[[str], str | None]:
    import hmac

    def find(token: str) -> str | None:
        for vm in metadata.vms():
            if hmac.compare_digest(local_secrets.token_for(vm.metadata), token):
                return vm.metadata.get("spotcron-run")
        return None

    return find


def _poster(client) -> Callable[[str, dict[str, Any]], None]:
    """Deliver an envelope as a Pub/Sub CloudEvent, raising on 5xx so the bus redelivers."""
    import uuid
    from datetime import UTC, datetime

    def post(topic: str, data: dict[str, Any]) -> None:
        headers = {"ce-id": uuid.uuid4().hex, "ce-specversion": "1.0",
                   "ce-source": f"//pubsub.googleapis.com/projects/spotcron-local/topics/{topic}",
                   "ce-type": "google.cloud.pubsub.topic.v1.messagePublished",
                   "ce-time": datetime.now(UTC).isoformat().replace("+00:00", "Z")}
        response = client.post("/", json=data, headers=headers)
        if response.status_code >= 500:
            raise RuntimeError(f"{topic} handler answered {response.status_code}")

    return post


class _HttpServer:
    """A WSGI app on 127.0.0.1 in a thread (job_done and the broker must be reachable by the runner's curl)."""

    def __init__(self, app, name: str = "spotcron-http"):
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no request lines in the user's terminal
        self._server = make_server("127.0.0.1", 0, app, threaded=True)
        # Request threads are joined on stop: a job_done still ending its run (pruning, the page)
        # must finish while the bucket is up, and a daemon thread cut off inside native code at
        # interpreter exit aborts the process ("terminate called without an active exception").
        self._server.daemon_threads = False
        self.url = f"http://127.0.0.1:{self._server.server_port}/"
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def _lock_state_dir(state_dir: Path) -> Callable[[], None]:
    """One local stack per state dir: two emulators on the same files would overwrite each other."""
    import fcntl
    import os

    from spotcron.core.errors import SpotcronError

    handle = open(state_dir / "lock", "a+")  # noqa: SIM115 - held until the returned release runs
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "?"
        handle.close()
        raise SpotcronError(f"another local stack (pid {holder}) is using {state_dir}/: stop that "
                            "`spotcron up` or `spotcron run` first, or give this one its own --state-dir") from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()

    def release() -> None:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()

    return release


def _log_to_file(path: Path) -> Callable[[], None]:
    """Local mode keeps the functions' JSON logs in a file, out of the user's terminal.

    Returns what stops it: the handler is removed and its file closed when the stack stops.
    """
    from spotcron.runtime.structured_log import JsonFormatter

    root = logging.getLogger("spotcron")
    for handler in list(root.handlers):
        if isinstance(handler.formatter, JsonFormatter):
            root.removeHandler(handler)
            handler.close()
    handler = logging.FileHandler(path)
    handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False

    def stop() -> None:
        root.removeHandler(handler)
        handler.close()

    return stop
