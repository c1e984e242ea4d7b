"""FakeCloud: every API deploy calls, served locally, behind Google's real client libraries.

It is strict the way Google is (access.py): every REST call carries the identity that makes it
(`clients(member)` sends it as the bearer token; the deployer is the project's Owner), APIs
other than Google's defaults are off until enabled through Service Usage, IAM policies are
enforced where Google's own services act as an account (a function's build, Eventarc's agent),
and new accounts, grants and service agents take effect after delays on a virtual clock
(`cloud.clock`, which deploy's waiting policy sleeps on in tests).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

from google.auth.credentials import Credentials

from spotcron.gcp.admin.clients import Clients, Endpoints
from tests.fakes.cloudbuild import FakeCloudBuild
from tests.fakes.deploy.access import DEFAULT_APIS, OWNER, Access
from tests.fakes.deploy.common import PolicyStore
from tests.fakes.deploy.compute import FakeCompute
from tests.fakes.deploy.functions import FakeFunctions
from tests.fakes.deploy.http import TOKEN_PREFIX, Call, Faults, HttpServer, Router
from tests.fakes.deploy.iam_grpc import FakeIam
from tests.fakes.deploy.instances import FakeInstances
from tests.fakes.deploy.monitoring import FakeMonitoring
from tests.fakes.deploy.project_reads import FakeProjectReads
from tests.fakes.deploy.pubsub import FakePubsub
from tests.fakes.deploy.registry import FakeRegistry
from tests.fakes.deploy.resourcemanager import FakeResourceManager
from tests.fakes.deploy.scheduler import FakeScheduler
from tests.fakes.deploy.secretmanager import FakeSecretManagerAdmin
from tests.fakes.deploy.serviceusage import FakeServiceUsage
from tests.fakes.deploy.storage import FakeStorage


class FakeCredentials(Credentials):  # type: ignore[misc]
    """Sends `member` as the bearer token, so the fake knows who calls (never expires)."""

    def __init__(self, member: str):
        super().__init__()
        self.token = TOKEN_PREFIX + member

    def refresh(self, request: Any) -> None:
        pass

    @property
    def expired(self) -> bool:
        return False

    @property
    def valid(self) -> bool:
        return True


class FakeCloud:
    def __init__(self, project: str, latency_s: float = 0.0, *, account_delay_s: float = 30.0,
                 grant_delay_s: float = 120.0, agent_delay_s: float = 60.0, api_delay_s: float = 30.0,
                 network_delay_s: float = 60.0, apis: Iterable[str] | None = None):
        """An empty project: only Google's default APIs enabled (`apis` replaces that list), no
        service agent yet, the deployer (`OWNER`) its Owner. Delays in virtual seconds; by default
        what Google calls typical (a grant: about 2 minutes). Whatever talks to it must sleep on
        `clock` (deploy's `settling`), or it waits for real."""
        self.project = project
        self.log: list[Call] = []
        self.faults = Faults()
        self._log_lock = threading.Lock()
        self.access = Access(project, account_delay_s=account_delay_s, grant_delay_s=grant_delay_s,
                             agent_delay_s=agent_delay_s, api_delay_s=api_delay_s,
                             apis=DEFAULT_APIS if apis is None else apis)
        self.clock = self.access.clock
        self.router = Router(latency_s, self.faults, self.log, self._log_lock)
        self.router.gate = self.access
        self.iam = FakeIam(project, self.router, self.access)
        self.project_policies = PolicyStore(self.access)
        self.access.project_policies = self.project_policies
        self.resourcemanager = FakeResourceManager(project, self.project_policies, OWNER)
        self.pubsub = FakePubsub(PolicyStore(self.access))
        self.storage = FakeStorage(project, PolicyStore(self.access))
        self.scheduler = FakeScheduler(self.pubsub.exists)
        self.registry = FakeRegistry(project, PolicyStore(self.access))
        self.functions = FakeFunctions(project, lambda b, o: (b, o) in self.storage.objects, self.access.account_visible,
                                       self.pubsub.exists, PolicyStore(self.access), access=self.access,
                                       storage=self.storage, project_policies=self.project_policies,
                                       registry_policies=self.registry.policies)
        self.compute = FakeCompute(project, self.access, network_delay_s)
        # A run's VMs, created and deleted as the functions' account (instances.py).
        self.instances = FakeInstances(project, self.access, self.project_policies, self.iam.policies)
        self.serviceusage = FakeServiceUsage(self.access)
        # What `spotcron doctor` reads: the same enabled APIs and IAM policies deploy's fakes enforce.
        self.project_reads = FakeProjectReads(project, self.compute, self.access, self.project_policies)
        self.secrets = FakeSecretManagerAdmin(project, PolicyStore(self.access), self.access)
        self.monitoring = FakeMonitoring(project)
        # Service Usage answers first: its list of enabled services is the access model's.
        for api in (self.resourcemanager, self.pubsub, self.storage, self.scheduler, self.functions, self.registry,
                    self.compute, self.instances, self.serviceusage, self.secrets, self.monitoring,
                    self.project_reads):
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

    def clients(self, pool_size: int = 16, member: str = OWNER) -> Clients:
        """Clients that call as `member` (the project's Owner by default)."""
        return Clients(self.project, FakeCredentials(member), self.endpoints, pool_size=pool_size, timeout=30)

    def may_push(self, account: str, repository: str) -> bool:
        """Whether `account` may push to `repository` now, as Cloud Build's push is checked (for
        tests/fakes/cloudbuild.py): the repository's policy and the project's, propagated grants only."""
        return self.access.allowed(f"serviceAccount:{account}", "artifactregistry.repositories.uploadArtifacts",
                                   repository, [self.registry.policies.policy(repository),
                                                self.project_policies.policy(f"projects/{self.project}")])

    def may_create_object(self, account: str, bucket: str, name: str) -> bool:
        """Whether `account` may create `name` in `bucket` now: the bucket's policy and the
        project's, conditions included."""
        resource = f"projects/_/buckets/{bucket}"
        return self.access.allowed(f"serviceAccount:{account}", "storage.objects.create", f"{resource}/objects/{name}",
                                   [self.storage.policies.policy(resource),
                                    self.project_policies.policy(f"projects/{self.project}")])

    def cloud_build(self) -> FakeCloudBuild:
        """A Cloud Build fake over this cloud: it fetches sources from this storage and judges each
        push and log write by this IAM, as Google's does. Not started."""
        def source(bucket: str, name: str) -> bytes | None:
            found = self.storage.objects.get((bucket, name))
            return found[0] if found else None

        return FakeCloudBuild(self.project, source, may_push=self.may_push, may_write_log=self.may_write_build_logs,
                              write_log=self.storage.put)

    def may_write_build_logs(self, account: str, bucket: str, name: str) -> bool:
        """Whether a build running as `account` may keep its log in `bucket` (for
        tests/fakes/cloudbuild.py): what Storage Admin on the bucket holds, at least the bucket's
        own storage.buckets.get and creating `name` there. Google documents Storage Admin as what
        the build's account needs on a user-created logs bucket (store-view-build-logs); a grant
        conditioned on an object prefix holds no bucket permission (its condition names an
        object), so it is not enough. The bucket must exist."""
        resource = f"projects/_/buckets/{bucket}"
        policies = [self.storage.policies.policy(resource), self.project_policies.policy(f"projects/{self.project}")]
        return bucket in self.storage.buckets \
            and self.access.allowed(f"serviceAccount:{account}", "storage.buckets.get", resource, policies) \
            and self.may_create_object(account, bucket, name)

    def may_pull(self, account: str, image: str) -> bool:
        """Whether `account` may pull `image` (REGION-docker.pkg.dev/PROJECT/REPOSITORY/NAME...) now,
        as Artifact Registry checks a VM's pull: downloadArtifacts on the image's repository."""
        host, _, path = image.partition("/")
        project, _, rest = path.partition("/")
        repository = f"projects/{project}/locations/{host.removesuffix('-docker.pkg.dev')}/repositories/" \
                     f"{rest.split('/', 1)[0]}"
        return self.access.allowed(f"serviceAccount:{account}", "artifactregistry.repositories.downloadArtifacts",
                                   repository, [self.registry.policies.policy(repository),
                                                self.project_policies.policy(f"projects/{self.project}")])

    def enable_apis(self, services: Iterable[str] | None = None) -> None:
        """Every API deploy needs, enabled long ago (a project already in use)."""
        from spotcron.gcp.admin.calls import REQUIRED_APIS

        self.access.enable_all(REQUIRED_APIS if services is None else services)

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
        """Calls that change something (reads, lists, polls, getIamPolicy and testIamPermissions left out)."""
        reads = ("List", "Get")
        return [c for c in self.calls() if c.method not in ("GET",)
                and not c.path.endswith((":getIamPolicy", ":testIamPermissions"))
                and not c.path.rsplit("/", 1)[-1].startswith(reads)]

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
