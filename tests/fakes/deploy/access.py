"""Who may do what in the fake project, and when: IAM as Google enforces it, on a virtual clock.

Every fake API of FakeCloud shares one `Access`:
- a virtual clock (`VirtualClock`): deploy's waiting policy sleeps on it in tests, so minutes of
  propagation pass in microseconds;
- the project's number and its enabled APIs: a call to an API that is not enabled (or enabled less
  than `api_delay_s` ago) is refused with Google's 403 SERVICE_DISABLED shape;
- service accounts, visible to IAM `account_delay_s` after their creation (before that a policy
  naming one is refused with "does not exist", and the account's own policy reads 404);
- every IAM binding written through any PolicyStore, effective `grant_delay_s` after it was
  written; `allowed(member, permission, resource, policies)` evaluates the bindings of the given
  policies (a resource's own and its parents'), conditions included;
- Google's service agents, which appear on first use (`agent(...)`) and hold their role
  `agent_delay_s` later.

The delays model Google's documented eventual consistency (docs/deploy.md cites each page);
with all delays 0 the fakes still check identities, permissions and enabled APIs.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from tests.fakes.deploy.http import ApiError

if TYPE_CHECKING:
    from tests.fakes.deploy.common import PolicyStore

OWNER = "user:owner@example.com"

# The permissions of the roles the fakes check (a subset of each role: what spotcron's path uses).
ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    "roles/storage.objectViewer": frozenset({"storage.objects.get", "storage.objects.list"}),
    "roles/storage.objectCreator": frozenset({"storage.objects.create"}),
    "roles/storage.objectUser": frozenset({"storage.objects.get", "storage.objects.list", "storage.objects.create",
                                           "storage.objects.delete", "storage.objects.update"}),
    "roles/storage.objectAdmin": frozenset({"storage.objects.get", "storage.objects.list", "storage.objects.create",
                                            "storage.objects.delete", "storage.objects.update"}),
    "roles/storage.legacyBucketWriter": frozenset({"storage.buckets.get", "storage.objects.list",
                                                   "storage.objects.create", "storage.objects.delete"}),
    # Storage Admin: everything on buckets and objects, their IAM policies included.
    "roles/storage.admin": frozenset({"storage.buckets.get", "storage.buckets.update", "storage.buckets.delete",
                                      "storage.buckets.getIamPolicy", "storage.buckets.setIamPolicy",
                                      "storage.objects.get", "storage.objects.list", "storage.objects.create",
                                      "storage.objects.delete", "storage.objects.update"}),
    "roles/artifactregistry.reader": frozenset({"artifactregistry.repositories.downloadArtifacts"}),
    "roles/artifactregistry.writer": frozenset({"artifactregistry.repositories.downloadArtifacts",
                                                "artifactregistry.repositories.uploadArtifacts"}),
    "roles/run.builder": frozenset({"artifactregistry.repositories.downloadArtifacts",
                                    "artifactregistry.repositories.uploadArtifacts", "logging.logEntries.create",
                                    "storage.objects.get"}),
    "roles/logging.logWriter": frozenset({"logging.logEntries.create"}),
    "roles/run.invoker": frozenset({"run.routes.invoke"}),
    "roles/iam.serviceAccountUser": frozenset({"iam.serviceAccounts.actAs"}),
    "roles/pubsub.publisher": frozenset({"pubsub.topics.publish"}),
    "roles/compute.instanceAdmin.v1": frozenset({"compute.instances.create", "compute.instances.delete",
                                                 "compute.instances.get", "compute.instances.list",
                                                 "compute.instances.setMetadata", "compute.instances.setLabels",
                                                 "compute.instances.setTags", "compute.instances.setServiceAccount",
                                                 "compute.disks.create", "compute.subnetworks.use",
                                                 "compute.instances.updateShieldedVmConfig"}),
    "roles/compute.viewer": frozenset({"compute.advice.capacity", "compute.advice.capacityHistory"}),
    "roles/eventarc.serviceAgent": frozenset({"eventarc.triggers.use"}),
}
OWNER_ROLE, EDITOR_ROLE = "roles/owner", "roles/editor"
EVERYTHING = frozenset({OWNER_ROLE, EDITOR_ROLE})  # basic roles: every permission here, but see _basic_holds
# The permissions that write IAM policies, which the Editor basic role lacks: Owner is "All Editor
# permissions and permissions for … Manage roles and permissions for a project and all resources
# within the project" (https://cloud.google.com/iam/docs/roles-overview#basic).
SET_IAM_POLICY = ".setIamPolicy"
# Each REST API's policy write, as the permission it checks (the resource's own setIamPolicy).
SET_IAM_PERMISSIONS = {"resourcemanager": "resourcemanager.projects.setIamPolicy",
                       "storage": "storage.buckets.setIamPolicy", "pubsub": "pubsub.topics.setIamPolicy",
                       "artifactregistry": "artifactregistry.repositories.setIamPolicy",
                       "run": "run.services.setIamPolicy"}


def _basic_holds(role: str, permission: str) -> bool:
    return role == OWNER_ROLE or (role == EDITOR_ROLE and not permission.endswith(SET_IAM_POLICY))

# Enabled on every new project (https://cloud.google.com/service-usage/docs/enabled-service#default).
DEFAULT_APIS = frozenset({"logging.googleapis.com", "storage.googleapis.com", "storage-api.googleapis.com",
                          "storage-component.googleapis.com", "serviceusage.googleapis.com",
                          "servicemanagement.googleapis.com", "bigquery.googleapis.com",
                          "monitoring.googleapis.com", "cloudtrace.googleapis.com", "datastore.googleapis.com",
                          "sql-component.googleapis.com", "cloudapis.googleapis.com"})
TITLES = {"compute.googleapis.com": "Compute Engine API", "pubsub.googleapis.com": "Cloud Pub/Sub API",
          "cloudfunctions.googleapis.com": "Cloud Functions API", "run.googleapis.com": "Cloud Run Admin API",
          "cloudbuild.googleapis.com": "Cloud Build API", "eventarc.googleapis.com": "Eventarc API",
          "iam.googleapis.com": "Identity and Access Management (IAM) API",
          "artifactregistry.googleapis.com": "Artifact Registry API",
          "cloudscheduler.googleapis.com": "Cloud Scheduler API",
          "cloudresourcemanager.googleapis.com": "Cloud Resource Manager API",
          "sts.googleapis.com": "Security Token Service API"}

_CLAUSE = re.compile(r'^\s*resource\.name\s*(?:\.startsWith\(\s*"(?P<prefix>[^"]*)"\s*\)|==\s*"(?P<exact>[^"]*)")\s*$')


class VirtualClock:
    """Seconds since the fake project was created; only sleeping moves it (thread-safe)."""

    def __init__(self) -> None:
        self._now = 0.0
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        with self._lock:
            self._now += max(0.0, seconds)

    advance = sleep


def condition_holds(expression: str, resource: str) -> bool:
    """A CEL condition of the forms deploy writes (`resource.name.startsWith("…")`, `resource.name
    == "…"`, joined by ||) for `resource`; anything else is false, so an unknown condition grants
    nothing (IAM would evaluate it; the fake refuses to guess)."""
    for clause in expression.split("||"):
        match = _CLAUSE.match(clause.strip())
        if match is None:
            return False
        if match["prefix"] is not None and resource.startswith(match["prefix"]):
            return True
        if match["exact"] is not None and resource == match["exact"]:
            return True
    return False


class Access:
    def __init__(self, project: str, number: str = "123456789012", *, account_delay_s: float = 0.0,
                 grant_delay_s: float = 0.0, agent_delay_s: float = 0.0, api_delay_s: float = 0.0,
                 apis: Iterable[str] = DEFAULT_APIS, clock: VirtualClock | None = None):
        self.project = project
        self.number = number
        self.clock = clock or VirtualClock()
        self.account_delay_s = account_delay_s
        self.grant_delay_s = grant_delay_s
        self.agent_delay_s = agent_delay_s
        self.api_delay_s = api_delay_s
        self._lock = threading.Lock()
        self._apis: dict[str, float] = {api: -1e9 for api in apis}  # service -> when it was enabled
        self._accounts: dict[str, float] = {}  # email -> created at
        self._grants: dict[tuple[str, str, str, str], float] = {}  # (resource, role, member, condition) -> at
        self.agents: dict[str, float] = {}  # service agent email -> first used at
        self.refusals: list[str] = []  # every refused call, for assertions
        self.exists: Callable[[str], bool] | None = None  # the IAM fake's own view (its visibility_lag)
        self.project_policies: PolicyStore | None = None  # set by FakeCloud: who may call at all
        # Custom roles (projects/P/roles/NAME -> the permissions it holds), as IAM's roles.create makes them.
        self.custom_roles: dict[str, frozenset[str]] = {}

    # --- APIs ------------------------------------------------------------------------------------

    def enable(self, service: str) -> None:
        with self._lock:
            self._apis.setdefault(service, self.clock.now())

    def enable_all(self, services: Iterable[str]) -> None:
        """Enabled long ago (a test that starts from a project already in use)."""
        with self._lock:
            for service in services:
                self._apis[service] = -1e9

    def disable(self, service: str) -> None:
        """The project's owner turned `service` off (gcloud services disable)."""
        with self._lock:
            self._apis.pop(service, None)

    def enabled(self) -> list[str]:
        with self._lock:
            return sorted(self._apis)

    def enabled_at(self, service: str) -> float | None:
        """When `service` was enabled (virtual seconds), None if it is not."""
        with self._lock:
            return self._apis.get(service)

    def require_api(self, service: str) -> None:
        with self._lock:
            since = self._apis.get(service)
        if since is None or self.clock.now() < since + self.api_delay_s:
            title = TITLES.get(service, service)
            message = (f"{title} has not been used in project {self.number} before or it is disabled. Enable it by "
                       f"visiting https://console.developers.google.com/apis/api/{service}/overview?project="
                       f"{self.number} then retry. If you enabled this API recently, wait a few minutes for the "
                       f"action to propagate to our systems and retry.")
            self._refuse(message)
            raise ApiError(403, message, "PERMISSION_DENIED", details=[{
                "@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
                "domain": "googleapis.com", "metadata": {"service": service, "consumer": f"projects/{self.number}",
                                                         "serviceTitle": title}}])

    # --- accounts and service agents ---------------------------------------------------------------

    def account_created(self, email: str) -> None:
        with self._lock:
            self._accounts.setdefault(email, self.clock.now())

    def account_deleted(self, email: str) -> None:
        with self._lock:
            self._accounts.pop(email, None)

    def account_visible(self, email: str) -> bool:
        """Whether IAM sees `email`: accounts of other projects and Google's agents always do."""
        if not email.endswith(f"@{self.project}.iam.gserviceaccount.com"):
            return True
        if self.exists is not None and not self.exists(email):
            return False
        with self._lock:
            created = self._accounts.get(email)
        return created is None or self.clock.now() >= created + self.account_delay_s

    def agent(self, service: str) -> str:
        """Google's service agent of `service` (e.g. "gcp-sa-eventarc"), created on first use."""
        email = f"service-{self.number}@{service}.iam.gserviceaccount.com"
        with self._lock:
            self.agents.setdefault(email, self.clock.now())
        return email

    def agent_ready(self, email: str) -> bool:
        with self._lock:
            first = self.agents.get(email)
        return first is not None and self.clock.now() >= first + self.agent_delay_s

    # --- grants ------------------------------------------------------------------------------------

    def record(self, resource: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        """A policy write: bindings new in `new` start their propagation now; removed ones end now."""
        now = self.clock.now()
        keep = set(_keys(resource, new))
        with self._lock:
            for key in list(self._grants):
                if key[0] == resource and key not in keep:
                    del self._grants[key]
            for key in keep:
                self._grants.setdefault(key, now if old is not None else -1e9)

    def effective(self, resource: str, policy: dict[str, Any]) -> list[tuple[str, str, str]]:
        """(role, member, condition expression) of `policy`'s bindings that have propagated."""
        now = self.clock.now()
        with self._lock:
            return [(role, member, condition) for (_, role, member, condition) in _keys(resource, policy)
                    if self._grants.get((resource, role, member, condition), -1e9) + self.grant_delay_s <= now]

    def allowed(self, member: str, permission: str, resource: str,
                policies: Iterable[tuple[str, dict[str, Any]]]) -> bool:
        """Whether `member` holds `permission` on `resource` through any of `policies` ((name, policy):
        the resource's own and its ancestors'), counting only propagated bindings."""
        for name, policy in policies:
            for role, who, condition in self.effective(name, policy):
                if who != member:
                    continue
                if condition and not condition_holds(condition, resource):
                    continue
                if (role in EVERYTHING and _basic_holds(role, permission)) or \
                        permission in ROLE_PERMISSIONS.get(role, self.custom_roles.get(role, ())):
                    return True
        return False

    def may_set_policy(self, api: str, member: str | None) -> None:
        """A policy write through `api`'s REST setIamPolicy: the caller needs that API's
        setIamPolicy permission (granted on the project, as the deployer's roles are)."""
        permission = SET_IAM_PERMISSIONS.get(api)
        if permission and member and self.project_policies is not None:
            project = f"projects/{self.project}"
            self.check(member, permission, project, [self.project_policies.policy(project)])

    def member_of(self, member: str, policy: tuple[str, dict[str, Any]]) -> bool:
        """Whether `member` holds any propagated role in `policy` (the project's)."""
        name, body = policy
        return any(who == member for _, who, _ in self.effective(name, body))

    def check(self, member: str, permission: str, resource: str,
              policies: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """403 unless `allowed`: Google's message names the permission and the resource."""
        if not self.allowed(member, permission, resource, policies):
            message = f"Permission '{permission}' denied on resource '{resource}' for {member} (or it may not exist)."
            self._refuse(message)
            raise ApiError(403, message)

    def admit(self, api: str, member: str | None, *, project_role: bool = True) -> None:
        """The router's gate: an identity, the API enabled, some role on the project; each fake API
        checks the finer permissions it models itself (Access.check)."""
        from tests.fakes.deploy.http import SERVICES

        if member is None:
            raise ApiError(401, "Request is missing required authentication credential.", "UNAUTHENTICATED")
        if api in SERVICES:
            self.require_api(SERVICES[api])
        if project_role and self.project_policies is not None and not member.startswith("serviceAccount:service-") and \
                not self.member_of(member, self.project_policies.policy(f"projects/{self.project}")):
            message = f"The caller {member} does not have permission on project {self.project}."
            self._refuse(message)
            raise ApiError(403, message)

    def _refuse(self, message: str) -> None:
        with self._lock:
            self.refusals.append(message)


def _keys(resource: str, policy: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(resource, b.get("role", ""), m, (b.get("condition") or {}).get("expression", ""))
            for b in policy.get("bindings", []) for m in b.get("members", [])]
