"""Reading and writing one IAM policy through the client of the API that holds the resource.

Every policy crosses this module as the REST JSON of google.iam.v1.Policy ({"bindings": [{"role",
"members", "condition"?}], "etag", "version"}); the generated clients speak protobuf messages and
the storage client its own Policy class, converted here. The caller names the API by its
attribute on Clients and gives the resource's full path (a bucket: its name).
"""

from __future__ import annotations

from typing import Any

from spotcron.core.errors import SpotcronError
from spotcron.gcp.admin.calls import Caller
from spotcron.gcp.admin.clients import Clients

Policy = dict[str, Any]

# The APIs, by their attribute on Clients.
PROJECTS = "projects"
TOPICS = "publisher"
SERVICE_ACCOUNTS = "iam"
BUCKETS = "storage"
RUN_SERVICES = "run_iam"
REPOSITORIES = "registry"
SECRETS = "secret_manager"
_PROTOBUF = frozenset({PROJECTS, TOPICS, SERVICE_ACCOUNTS})  # the generated clients' IAM mixin
_REST = frozenset({RUN_SERVICES, REPOSITORIES, SECRETS})  # plain JSON over google-auth's session


def _pb_to_dict(message: Any) -> Policy:
    from google.protobuf import json_format

    return json_format.MessageToDict(message)


def _dict_to_pb(policy: Policy) -> Any:
    from google.iam.v1 import policy_pb2
    from google.protobuf import json_format

    return json_format.ParseDict(policy, policy_pb2.Policy(), ignore_unknown_fields=True)


def _options() -> Any:
    from google.iam.v1 import options_pb2

    return options_pb2.GetPolicyOptions(requested_policy_version=3)


def get_policy(clients: Clients, call: Caller, what: str, api: str, resource: str) -> Policy:
    """The current policy on `resource`; raises NotFound when the resource is missing."""
    from google.iam.v1 import iam_policy_pb2

    if api in _PROTOBUF:
        request = iam_policy_pb2.GetIamPolicyRequest(resource=resource, options=_options())
        return _pb_to_dict(call(what, getattr(clients, api).get_iam_policy, request=request, retry=None,
                                timeout=clients.timeout))
    if api == BUCKETS:
        bucket = clients.storage.bucket(resource)
        return dict(call(what, bucket.get_iam_policy, requested_policy_version=3, retry=None,
                         timeout=clients.timeout).to_api_repr())
    if api in _REST:
        return call(what, getattr(clients, api).get_iam_policy, resource)
    raise ValueError(f"unknown IAM API {api!r}")


def set_policy(clients: Clients, call: Caller, what: str, api: str, resource: str, policy: Policy) -> None:
    from google.iam.v1 import iam_policy_pb2

    # A stale etag answers 409/ABORTED: the caller re-reads and re-applies. A brand-new service
    # account may not be visible to IAM for some seconds ("does not exist"): also worth a retry.
    if api in _PROTOBUF:
        request = iam_policy_pb2.SetIamPolicyRequest(resource=resource, policy=_dict_to_pb(policy))
        call(what, getattr(clients, api).set_iam_policy, request=request, retry=None, timeout=clients.timeout,
             transient_if=_new_account_lag)
    elif api == BUCKETS:
        from google.api_core.iam import Policy as ApiPolicy

        bucket = clients.storage.bucket(resource)
        call(what, bucket.set_iam_policy, ApiPolicy.from_api_repr(policy), retry=None, timeout=clients.timeout,
             transient_if=_new_account_lag)
    elif api in _REST:
        call(what, getattr(clients, api).set_iam_policy, resource, policy, transient_if=_new_account_lag)
    else:
        raise ValueError(f"unknown IAM API {api!r}")


def _new_account_lag(error: SpotcronError) -> bool:
    # IAM answers "Service account X does not exist." for an account created seconds ago.
    text = str(error)
    return "does not exist" in text and "service account" in text.lower()
