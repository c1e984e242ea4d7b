"""Google's clients, created on first use and shared by every thread of one deploy.

Each client is imported only when deploy first needs it (the libraries take seconds to import
together). Every client speaks REST except IAM admin, whose Python library ships gRPC only.
Cloud Run's IAM (the invoker binding of a 2nd gen function) and Artifact Registry have no client
library among the project's dependencies, so `RunIam` and `Registry` call their few REST methods
through google-auth's session.

`Endpoints` points everything at local fakes: tests and the benchmark pass a plain-HTTP base
URL for the REST APIs and host:port for the IAM gRPC API, with AnonymousCredentials.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
RUN_API = "https://run.googleapis.com"
REGISTRY_API = "https://artifactregistry.googleapis.com"
COMPUTE_API = "https://compute.googleapis.com"
SERVICEUSAGE_API = "https://serviceusage.googleapis.com"
SECRETS_API = "https://secretmanager.googleapis.com"
MONITORING_API = "https://monitoring.googleapis.com"


@dataclass(frozen=True)
class Endpoints:
    rest: str | None = None  # e.g. http://127.0.0.1:8123 — every REST API at one base URL
    iam_grpc: str | None = None  # e.g. 127.0.0.1:8124 — plaintext gRPC


def _widen_pool(session: Any, size: int) -> None:
    """Let `size` threads share one session without urllib3 discarding connections (default 10)."""
    from requests.adapters import HTTPAdapter

    if session is None or not hasattr(session, "mount"):
        return
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=max(size, 10))
    session.mount("https://", adapter)
    session.mount("http://", adapter)


class RunIam:
    """getIamPolicy / setIamPolicy on Cloud Run services (run.googleapis.com/v2)."""

    def __init__(self, session: Any, base_url: str, timeout: float):
        self._session = session
        self._base = base_url.rstrip("/")
        self._timeout = timeout

    def _checked(self, response: Any) -> dict[str, Any]:
        if response.status_code >= 400:
            from google.api_core import exceptions

            raise exceptions.from_http_response(response)
        return response.json() if response.content else {}

    def _iam_url(self, resource: str, verb: str) -> str:
        return f"{self._base}/v2/{resource}:{verb}"

    def get_iam_policy(self, resource: str) -> dict[str, Any]:
        return self._checked(self._session.get(self._iam_url(resource, "getIamPolicy"),
                                               params={"options.requestedPolicyVersion": 3}, timeout=self._timeout))

    def set_iam_policy(self, resource: str, policy: dict[str, Any]) -> dict[str, Any]:
        return self._checked(self._session.post(self._iam_url(resource, "setIamPolicy"), json={"policy": policy},
                                                timeout=self._timeout))


class Registry(RunIam):
    """Artifact Registry v1: one repository (get, create, patch its labels) and its IAM policy."""

    def get_repository(self, name: str) -> dict[str, Any]:
        return self._checked(self._session.get(f"{self._base}/v1/{name}", timeout=self._timeout))

    def create_repository(self, parent: str, repository_id: str, repository: dict[str, Any]) -> dict[str, Any]:
        """Starts the create; answers the long-running Operation (poll it with get_operation)."""
        return self._checked(self._session.post(f"{self._base}/v1/{parent}/repositories",
                                                params={"repositoryId": repository_id}, json=repository,
                                                timeout=self._timeout))

    def patch_repository(self, name: str, repository: dict[str, Any], mask: str) -> dict[str, Any]:
        return self._checked(self._session.patch(f"{self._base}/v1/{name}", params={"updateMask": mask},
                                                 json=repository, timeout=self._timeout))

    def get_operation(self, name: str) -> dict[str, Any]:
        return self._checked(self._session.get(f"{self._base}/v1/{name}", timeout=self._timeout))

    def _iam_url(self, resource: str, verb: str) -> str:
        # The same shapes as Cloud Run's: GET :getIamPolicy?options.requestedPolicyVersion=3,
        # POST :setIamPolicy {"policy": ...}; only the API version differs.
        return f"{self._base}/v1/{resource}:{verb}"


class SecretManager(RunIam):
    """Secret Manager v1 (REST): a secret, its versions, its IAM policy; adding and destroying
    versions for `spotcron secrets`. Values cross only `add_version` (in) and never come back out."""

    def _iam_url(self, resource: str, verb: str) -> str:
        return f"{self._base}/v1/{resource}:{verb}"

    def get_secret(self, name: str) -> dict[str, Any]:
        return self._checked(self._session.get(f"{self._base}/v1/{name}", timeout=self._timeout))

    def create_secret(self, project: str, secret_id: str, labels: dict[str, str]) -> dict[str, Any]:
        return self._checked(self._session.post(f"{self._base}/v1/projects/{project}/secrets",
                                                params={"secretId": secret_id},
                                                json={"replication": {"automatic": {}}, "labels": labels},
                                                timeout=self._timeout))

    def list_versions(self, name: str) -> list[dict[str, Any]]:
        versions: list[dict[str, Any]] = []
        token = ""
        for _ in range(100):  # bounded: 100 pages of 250
            params = {"pageSize": 250, **({"pageToken": token} if token else {})}
            page = self._checked(self._session.get(f"{self._base}/v1/{name}/versions", params=params,
                                                   timeout=self._timeout))
            versions += page.get("versions", [])
            token = page.get("nextPageToken", "")
            if not token:
                break
        return versions

    def list_secrets(self, project: str) -> list[dict[str, Any]]:
        page = self._checked(self._session.get(f"{self._base}/v1/projects/{project}/secrets",
                                               params={"pageSize": 250}, timeout=self._timeout))
        return page.get("secrets", [])

    def add_version(self, name: str, data_b64: str, crc32c: int) -> dict[str, Any]:
        return self._checked(self._session.post(f"{self._base}/v1/{name}:addVersion",
                                                json={"payload": {"data": data_b64, "dataCrc32c": str(crc32c)}},
                                                timeout=self._timeout))

    def destroy_version(self, version: str) -> dict[str, Any]:
        return self._checked(self._session.post(f"{self._base}/v1/{version}:destroy", json={},
                                                timeout=self._timeout))


class Network(RunIam):
    """Compute Engine v1, the few network calls deploy makes: the deny-ingress firewall rule on the
    job VMs' tag, and Private Google Access on the region's subnet. (google-cloud-compute's
    import costs a second; these are five REST calls.)"""

    def _url(self, path: str) -> str:
        return f"{self._base}/compute/v1/{path}"

    def get(self, path: str) -> dict[str, Any]:
        return self._checked(self._session.get(self._url(path), timeout=self._timeout))

    def insert_firewall(self, project: str, firewall: dict[str, Any]) -> dict[str, Any]:
        """Starts the insert; answers the Operation (poll it with get)."""
        return self._checked(self._session.post(self._url(f"projects/{project}/global/firewalls"), json=firewall,
                                                timeout=self._timeout))

    def patch_firewall(self, project: str, name: str, firewall: dict[str, Any]) -> dict[str, Any]:
        return self._checked(self._session.patch(self._url(f"projects/{project}/global/firewalls/{name}"),
                                                 json=firewall, timeout=self._timeout))

    def delete_firewall(self, project: str, name: str) -> dict[str, Any]:
        return self._checked(self._session.delete(self._url(f"projects/{project}/global/firewalls/{name}"),
                                                  timeout=self._timeout))

    def set_private_google_access(self, subnetwork: str, enabled: bool) -> dict[str, Any]:
        return self._checked(self._session.post(self._url(f"{subnetwork}/setPrivateIpGoogleAccess"),
                                                json={"privateIpGoogleAccess": enabled}, timeout=self._timeout))


class ServiceUsage(RunIam):
    """Service Usage v1: the project's enabled APIs, and enabling one (a long-running operation).

    A listed service is named `projects/PROJECT_NUMBER/services/NAME`, which is also how deploy
    learns the project's number (https://cloud.google.com/service-usage/docs/reference/rest/v1/services).
    """

    def enabled(self, project: str) -> list[dict[str, Any]]:
        services: list[dict[str, Any]] = []
        token = ""
        while True:
            params = {"filter": "state:ENABLED", "pageSize": 200, **({"pageToken": token} if token else {})}
            page = self._checked(self._session.get(f"{self._base}/v1/projects/{project}/services", params=params,
                                                   timeout=self._timeout))
            services += page.get("services", [])
            token = page.get("nextPageToken", "")
            if not token:
                return services

    def enable(self, project: str, service: str) -> dict[str, Any]:
        return self._checked(self._session.post(f"{self._base}/v1/projects/{project}/services/{service}:enable",
                                                json={}, timeout=self._timeout))

    def get_operation(self, name: str) -> dict[str, Any]:
        return self._checked(self._session.get(f"{self._base}/v1/{name}", timeout=self._timeout))


def _bearer_token(credentials: Any) -> Any:
    """A gRPC interceptor adding `authorization: Bearer TOKEN` of `credentials` to every unary call
    (plaintext endpoints only: Google's own channel carries the token over TLS itself)."""
    import collections

    import grpc

    fields = ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression")
    details_type = collections.namedtuple("details_type", fields)

    class BearerToken(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
        def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
            token = getattr(credentials, "token", None)
            if not token:
                return continuation(details, request)
            metadata = [*(details.metadata or ()), ("authorization", f"Bearer {token}")]
            return continuation(details_type(details.method, details.timeout, metadata, details.credentials,
                                             getattr(details, "wait_for_ready", None),
                                             getattr(details, "compression", None)), request)

    return BearerToken()


class Monitoring(RunIam):
    """Cloud Monitoring v3: the project's alert policies (list, create, replace, delete)."""

    def list_alert_policies(self, project: str) -> list[dict[str, Any]]:
        policies: list[dict[str, Any]] = []
        token = None
        while True:
            params = {"pageToken": token} if token else {}
            page = self._checked(self._session.get(f"{self._base}/v3/projects/{project}/alertPolicies",
                                                   params=params, timeout=self._timeout))
            policies += page.get("alertPolicies") or []
            token = page.get("nextPageToken")
            if not token:
                return policies

    def create_alert_policy(self, project: str, policy: dict[str, Any]) -> dict[str, Any]:
        return self._checked(self._session.post(f"{self._base}/v3/projects/{project}/alertPolicies", json=policy,
                                                timeout=self._timeout))

    def replace_alert_policy(self, name: str, policy: dict[str, Any]) -> dict[str, Any]:
        """PATCH without an update mask: the policy is replaced by `policy` as a whole."""
        return self._checked(self._session.patch(f"{self._base}/v3/{name}", json={**policy, "name": name},
                                                 timeout=self._timeout))

    def delete_alert_policy(self, name: str) -> dict[str, Any]:
        return self._checked(self._session.delete(f"{self._base}/v3/{name}", timeout=self._timeout))


class Clients:
    """The clients one deploy uses; thread-safe, each built once on first use."""

    def __init__(self, project: str, credentials: Any, endpoints: Endpoints | None = None,
                 pool_size: int = 16, timeout: float = 60.0):
        self.project = project
        self.credentials = credentials
        self.endpoints = endpoints or Endpoints()
        self.pool_size = pool_size
        self.timeout = timeout
        self._lock = threading.Lock()
        self._made: dict[str, Any] = {}

    def _get(self, name: str, factory: Any) -> Any:
        with self._lock:
            if name not in self._made:
                self._made[name] = factory()
            return self._made[name]

    def _options(self) -> dict[str, Any]:
        return {"api_endpoint": self.endpoints.rest} if self.endpoints.rest else {}

    def _rest(self, cls: Any) -> Any:
        client = cls(transport="rest", credentials=self.credentials, client_options=self._options())
        _widen_pool(getattr(client.transport, "_session", None), self.pool_size)
        return client

    @property
    def storage(self) -> Any:
        def make() -> Any:
            from google.cloud import storage

            client = storage.Client(project=self.project, credentials=self.credentials,
                                    client_options=self._options() or None)
            _widen_pool(getattr(client, "_http", None), self.pool_size)
            return client

        return self._get("storage", make)

    @property
    def scheduler(self) -> Any:
        def make() -> Any:
            from google.cloud import scheduler_v1

            return self._rest(scheduler_v1.CloudSchedulerClient)

        return self._get("scheduler", make)

    @property
    def publisher(self) -> Any:
        def make() -> Any:
            # The generated admin client, not google.cloud.pubsub's batching wrapper: deploy only
            # manages topics, and the generated client offers the REST transport.
            from google import pubsub_v1

            return self._rest(pubsub_v1.PublisherClient)

        return self._get("publisher", make)

    @property
    def functions(self) -> Any:
        def make() -> Any:
            from google.cloud import functions_v2

            return self._rest(functions_v2.FunctionServiceClient)

        return self._get("functions", make)

    @property
    def projects(self) -> Any:
        def make() -> Any:
            from google.cloud import resourcemanager_v3

            return self._rest(resourcemanager_v3.ProjectsClient)

        return self._get("projects", make)

    @property
    def iam(self) -> Any:
        def make() -> Any:
            from google.cloud import iam_admin_v1

            if self.endpoints.iam_grpc:
                import grpc
                from google.cloud.iam_admin_v1.services.iam.transports import IAMGrpcTransport

                # A local fake has no TLS, so the credentials' token rides as plain metadata:
                # the fake knows who calls, as Google does.
                channel = grpc.intercept_channel(grpc.insecure_channel(self.endpoints.iam_grpc),
                                                 _bearer_token(self.credentials))
                return iam_admin_v1.IAMClient(transport=IAMGrpcTransport(channel=channel))
            return iam_admin_v1.IAMClient(credentials=self.credentials)

        return self._get("iam", make)

    @property
    def run_iam(self) -> RunIam:
        def make() -> RunIam:
            from google.auth.transport.requests import AuthorizedSession

            session = AuthorizedSession(self.credentials)
            _widen_pool(session, self.pool_size)
            return RunIam(session, self.endpoints.rest or RUN_API, self.timeout)

        return self._get("run_iam", make)

    @property
    def registry(self) -> Registry:
        def make() -> Registry:
            from google.auth.transport.requests import AuthorizedSession

            session = AuthorizedSession(self.credentials)
            _widen_pool(session, self.pool_size)
            return Registry(session, self.endpoints.rest or REGISTRY_API, self.timeout)

        return self._get("registry", make)

    @property
    def serviceusage(self) -> ServiceUsage:
        def make() -> ServiceUsage:
            from google.auth.transport.requests import AuthorizedSession

            session = AuthorizedSession(self.credentials)
            _widen_pool(session, self.pool_size)
            return ServiceUsage(session, self.endpoints.rest or SERVICEUSAGE_API, self.timeout)

        return self._get("serviceusage", make)

    @property
    def secret_manager(self) -> SecretManager:
        def make() -> SecretManager:
            from google.auth.transport.requests import AuthorizedSession

            session = AuthorizedSession(self.credentials)
            _widen_pool(session, self.pool_size)
            return SecretManager(session, self.endpoints.rest or SECRETS_API, self.timeout)

        return self._get("secret_manager", make)

    @property
    def monitoring(self) -> Monitoring:
        def make() -> Monitoring:
            from google.auth.transport.requests import AuthorizedSession

            session = AuthorizedSession(self.credentials)
            _widen_pool(session, self.pool_size)
            return Monitoring(session, self.endpoints.rest or MONITORING_API, self.timeout)

        return self._get("monitoring", make)

    @property
    def network(self) -> Network:
        def make() -> Network:
            from google.auth.transport.requests import AuthorizedSession

            session = AuthorizedSession(self.credentials)
            _widen_pool(session, self.pool_size)
            return Network(session, self.endpoints.rest or COMPUTE_API, self.timeout)

        return self._get("network", make)
