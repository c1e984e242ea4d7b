"""FakeCloud: every API deploy calls, served locally, behind Google's real client libraries."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from spotcron.gcp.admin.clients import Clients, Endpoints
from tests.fakes.deploy.common import PolicyStore
from tests.fakes.deploy.compute import FakeCompute
from tests.fakes.deploy.functions import FakeFunctions
from tests.fakes.deploy.http import Call, Faults, HttpServer, Router
from tests.fakes.deploy.iam_grpc import FakeIam
from tests.fakes.deploy.monitoring import FakeMonitoring
from tests.fakes.deploy.pubsub import FakePubsub
from tests.fakes.deploy.registry import FakeRegistry
from tests.fakes.deploy.resourcemanager import FakeResourceManager
from tests.fakes.deploy.scheduler import FakeScheduler
from tests.fakes.deploy.storage import FakeStorage


class FakeCloud:
    def __init__(self, project: str, latency_s: float = 0.0):
        self.project = project
        self.log: list[Call] = []
        self.faults = Faults()
        self._log_lock = threading.Lock()
        self.router = Router(latency_s, self.faults, self.log, self._log_lock)
        self.iam = FakeIam(project, self.router)
        accounts = self.iam.exists  # IAM refuses bindings for accounts of this project that do not exist
        self.project_policies = PolicyStore(accounts)
        self.resourcemanager = FakeResourceManager(project, self.project_policies)
        self.pubsub = FakePubsub(PolicyStore(accounts))
        self.storage = FakeStorage(project, PolicyStore(accounts))
        self.scheduler = FakeScheduler(self.pubsub.exists)
        self.functions = FakeFunctions(project, lambda b, o: (b, o) in self.storage.objects, accounts,
                                       self.pubsub.exists, PolicyStore(accounts))
        self.registry = FakeRegistry(project, PolicyStore(accounts))
        self.compute = FakeCompute(project)
        self.monitoring = FakeMonitoring(project)
        for api in (self.resourcemanager, self.pubsub, self.storage, self.scheduler, self.functions, self.registry,
                    self.compute, self.monitoring):
            api.routes(self.router)
        self.http = HttpServer(self.router)
        self.iam_target = ""

    def start(self) -> FakeCloud:
        self.http.start()
        self.iam_target = self.iam.start()
        return self

    def stop(self) -> None:
        self.http.stop()
        self.iam.stop()

    @property
    def endpoints(self) -> Endpoints:
        return Endpoints(rest=self.http.url, iam_grpc=self.iam_target)

    def clients(self, pool_size: int = 16) -> Clients:
        from google.auth.credentials import AnonymousCredentials

        return Clients(self.project, AnonymousCredentials(), self.endpoints, pool_size=pool_size, timeout=30)

    # --- fault injection ---------------------------------------------------------------------------

    def fail_after(self, calls: int) -> None:
        """From the next `calls` calls on, every call answers 503 until heal()."""
        with self.faults.lock:
            self.faults.fail_after = self.faults.served + calls

    def lose_answers(self, count: int) -> None:
        with self.faults.lock:
            self.faults.lose_answers = count

    def heal(self) -> None:
        with self.faults.lock:
            self.faults.fail_after = None
            self.faults.lose_answers = 0

    # --- call log ---------------------------------------------------------------------------------

    def calls(self) -> list[Call]:
        with self._log_lock:
            return list(self.log)

    def reset_log(self) -> None:
        with self._log_lock:
            self.log.clear()

    def changing_calls(self) -> list[Call]:
        """Calls that change something (reads, lists, polls and getIamPolicy left out)."""
        reads = ("List", "Get")
        return [c for c in self.calls() if c.method not in ("GET",)
                and not c.path.endswith(":getIamPolicy") and not c.path.rsplit("/", 1)[-1].startswith(reads)]

    def count(self, api: str | None = None, method: str | None = None, contains: str = "") -> int:
        return sum(1 for c in self.calls() if (api is None or c.api == api) and (method is None or c.method == method)
                   and contains in c.path)

    def summary(self) -> Counter[tuple[str, str]]:
        return Counter((c.api, c.method) for c in self.calls())

    def state(self) -> dict[str, Any]:
        """Everything deployed, for before/after comparisons."""
        return {
            "jobs": self.scheduler.entries(),
            "topics": sorted(self.pubsub.topics),
            "functions": sorted(self.functions.functions),
            "buckets": sorted(self.storage.buckets),
            "objects": sorted(self.storage.objects),
            "accounts": sorted(self.iam.accounts),
            "repositories": sorted(self.registry.repositories),
            "firewalls": sorted(self.compute.firewalls),
        }
