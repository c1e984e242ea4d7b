"""Fake IAM admin API over gRPC (its Python client has no REST transport): service accounts
and their IAM policies. It shares the HTTP fake's latency, faults and call log."""

from __future__ import annotations

import threading
import time
from concurrent import futures
from typing import Any

import grpc
from google.cloud.iam_admin_v1 import types
from google.iam.v1 import iam_policy_pb2, policy_pb2
from google.protobuf import empty_pb2, json_format

from tests.fakes.deploy.access import Access
from tests.fakes.deploy.common import PolicyStore
from tests.fakes.deploy.http import TOKEN_PREFIX, ApiError, Call, Router

SERVICE = "google.iam.admin.v1.IAM"
_CODES = {400: grpc.StatusCode.INVALID_ARGUMENT, 401: grpc.StatusCode.UNAUTHENTICATED,
          403: grpc.StatusCode.PERMISSION_DENIED,
          404: grpc.StatusCode.NOT_FOUND,
          409: grpc.StatusCode.ALREADY_EXISTS, 503: grpc.StatusCode.UNAVAILABLE}


class FakeIam:
    def __init__(self, project: str, router: Router, access: Access):
        self.project = project
        self.access = access
        self.accounts: dict[str, dict[str, Any]] = {}
        access.exists = self.exists
        self.policies = PolicyStore(access)
        self.visibility_lag = 0
        self._router = router  # for latency, faults and the call log
        self._lock = threading.Lock()
        self.server: grpc.Server | None = None
        self.port = 0

    def exists(self, email: str) -> bool:
        """Whether IAM policies may name `email`. `visibility_lag` makes the next N checks of an
        existing account fail, as a freshly created account does for a few seconds."""
        if not email.endswith(f"@{self.project}.iam.gserviceaccount.com"):
            return True  # accounts of other projects and Google's service agents: not ours to check
        with self._lock:
            if email in self.accounts and self.visibility_lag > 0:
                self.visibility_lag -= 1
                return False
            return email in self.accounts

    # --- plumbing ------------------------------------------------------------------------------

    def _wrap(self, method: str, fn: Any, request_type: Any, response_type: Any) -> Any:
        def handler(request: Any, context: grpc.ServicerContext) -> Any:
            router = self._router
            if router.latency_s:
                time.sleep(router.latency_s)
            error = router.faults.before()
            body = json_format.MessageToDict(request if hasattr(request, "DESCRIPTOR") else type(request).pb(request))
            status = 200
            try:
                if error:
                    raise error
                metadata = dict(context.invocation_metadata() or ())
                token = str(metadata.get("authorization", "")).removeprefix("Bearer ").strip()
                member = token.removeprefix(TOKEN_PREFIX) if token.startswith(TOKEN_PREFIX) else None
                self.access.admit("iam", member)
                response = fn(request)
                if router.faults.lose_answer() and method.startswith(("Create", "Set")):
                    raise ApiError(503, "The answer was lost (injected); the change was made.")
                return response
            except ApiError as exc:
                status = exc.code
                context.abort(_CODES.get(exc.code, grpc.StatusCode.UNKNOWN), exc.message)
            finally:
                with router.log_lock:
                    router.log.append(Call("iam", "GRPC", f"/{SERVICE}/{method}", {}, body, status))

        return grpc.unary_unary_rpc_method_handler(
            handler, request_deserializer=request_type.deserialize if hasattr(request_type, "deserialize")
            else request_type.FromString,
            response_serializer=response_type.serialize if hasattr(response_type, "serialize")
            else response_type.SerializeToString)

    def start(self) -> str:
        handlers = {
            "ListServiceAccounts": self._wrap("ListServiceAccounts", self.list, types.ListServiceAccountsRequest,
                                              types.ListServiceAccountsResponse),
            "CreateServiceAccount": self._wrap("CreateServiceAccount", self.create, types.CreateServiceAccountRequest,
                                               types.ServiceAccount),
            "DeleteServiceAccount": self._wrap("DeleteServiceAccount", self.delete,
                                               types.DeleteServiceAccountRequest, empty_pb2.Empty),
            "GetIamPolicy": self._wrap("GetIamPolicy", self.get_policy, iam_policy_pb2.GetIamPolicyRequest,
                                       policy_pb2.Policy),
            "SetIamPolicy": self._wrap("SetIamPolicy", self.set_policy, iam_policy_pb2.SetIamPolicyRequest,
                                       policy_pb2.Policy),
        }
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(grace=None)

    # --- the API -----------------------------------------------------------------------------

    def list(self, request: Any) -> Any:
        if request.name != f"projects/{self.project}":
            raise ApiError(404, f"project {request.name} not found")
        start = int(request.page_token or 0)
        size = request.page_size or 100
        with self._lock:
            accounts = [self.accounts[e] for e in sorted(self.accounts)]
        chunk = accounts[start:start + size]
        token = str(start + size) if start + size < len(accounts) else ""
        return types.ListServiceAccountsResponse(accounts=[types.ServiceAccount(**a) for a in chunk],
                                                 next_page_token=token)

    def create(self, request: Any) -> Any:
        account_id = request.account_id
        if not 6 <= len(account_id) <= 30:
            raise ApiError(400, f"account_id {account_id!r} must be 6-30 characters")
        email = f"{account_id}@{self.project}.iam.gserviceaccount.com"
        with self._lock:
            if email in self.accounts:
                raise ApiError(409, f"Service account {account_id} already exists within project "
                                    f"projects/{self.project}.")
            account = {"name": f"projects/{self.project}/serviceAccounts/{email}", "email": email,
                       "project_id": self.project, "display_name": request.service_account.display_name,
                       "unique_id": str(100000 + len(self.accounts))}
            self.accounts[email] = account
        self.access.account_created(email)
        self.policies.create(f"projects/{self.project}/serviceAccounts/{email}")
        return types.ServiceAccount(**account)

    def delete(self, request: Any) -> Any:
        email = request.name.rsplit("/", 1)[-1]
        with self._lock:
            if self.accounts.pop(email, None) is None:
                raise ApiError(404, f"Service account {email} does not exist.")
        self.access.account_deleted(email)
        return empty_pb2.Empty()

    def _visible(self, resource: str) -> None:
        # IAM reads are eventually consistent: a new account's policy reads 404 for a while.
        email = resource.rsplit("/", 1)[-1]
        if not self.access.account_visible(email):
            raise ApiError(404, f"Service account {email} does not exist.")

    def get_policy(self, request: Any) -> Any:
        self._visible(request.resource)
        policy = self.policies.get(request.resource)
        return json_format.ParseDict(policy, policy_pb2.Policy())

    def set_policy(self, request: Any) -> Any:
        self._visible(request.resource)
        policy = json_format.MessageToDict(request.policy)
        stored = self.policies.set(request.resource, policy)
        return json_format.ParseDict(stored, policy_pb2.Policy())
