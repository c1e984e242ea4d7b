"""Fake Cloud Functions v2 (REST) with long-running operations, plus Cloud Run's service IAM.

Like the real service it checks what a build and a deploy need (the source object, the
service accounts, the trigger's topic), answers with an operation that is done on the first
poll, adds LOG_EXECUTION_ID to every function's variables (Google does), and gives each
function a Cloud Run service of the same name whose IAM policy starts empty.

With an `Access` (FakeCloud always passes one) it builds the way 2nd gen does:
- the uploaded source is copied into Google's own bucket `gcf-v2-sources-NUMBER-REGION`
  (https://cloud.google.com/functions/docs/building), and the build fetches it from there as the
  build service account: without `storage.objects.get` on that object (granted and propagated)
  the function ends FAILED with Cloud Build's "Access to bucket … denied. You must grant Storage
  Object Viewer permission to …" (the message of terraform-provider-google#20571). Google's page
  on the build service account asks for Storage Object Admin there, "for retrieving the function
  source from the Cloud Storage bucket, and to store build images in Artifact Registry"
  (https://cloud.google.com/run/docs/configuring/services/build-service-account) and documents no
  read-only role as enough: so the fake build also needs `storage.objects.create` in that bucket,
  and without it fails with Cloud Functions' "Could not build the function due to a missing
  permission on the build service account …" (terraform-genai-knowledge-base#245);
- the image is pushed to `buildConfig.dockerRepository` as the build account, which needs
  `artifactregistry.repositories.uploadArtifacts` there;
- a Pub/Sub trigger uses Eventarc's service agent, created on the project's first trigger; until
  it has its role the create is refused with 400 FAILED_PRECONDITION "Permission denied while using
  the Eventarc Service Agent …" (terraform-provider-google#25294, #14584).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from google.cloud import functions_v2

from tests.fakes.deploy.common import (
    LongRunningOperations,
    PolicyStore,
    canonical,
    json_copy,
    page,
    policy_from_body,
)
from tests.fakes.deploy.http import ApiError, Request, Router

if TYPE_CHECKING:
    from tests.fakes.deploy.access import Access
    from tests.fakes.deploy.storage import FakeStorage

PARENT = r"/v2/(?P<parent>projects/[^/]+/locations/[^/]+)"
FUNCTION_TYPE = "type.googleapis.com/google.cloud.functions.v2.Function"
EMPTY_TYPE = "type.googleapis.com/google.protobuf.Empty"


def _camel(path: str) -> str:
    return ".".join(p.split("_")[0] + "".join(w.title() for w in p.split("_")[1:]) for p in path.split("."))


def _set_path(target: dict[str, Any], source: dict[str, Any], path: str) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        target = target.setdefault(part, {})
        source = source.get(part, {})
    if leaf in source:
        target[leaf] = json_copy(source[leaf])
    else:
        target.pop(leaf, None)


class FakeFunctions(LongRunningOperations):
    def __init__(self, project: str, object_exists: Callable[[str, str], bool],
                 account_exists: Callable[[str], bool], topic_exists: Callable[[str], bool],
                 run_policies: PolicyStore, *, access: Access | None = None, storage: FakeStorage | None = None,
                 project_policies: PolicyStore | None = None, registry_policies: PolicyStore | None = None):
        self.project = project
        self.access = access
        self.storage = storage
        self.project_policies = project_policies
        self.registry_policies = registry_policies
        self.builds: list[tuple[str, str | None]] = []  # (function, the build's error or None), in order
        self.functions: dict[str, dict[str, Any]] = {}
        self.operations: dict[str, dict[str, Any]] = {}
        self.run_policies = run_policies
        self.fail_builds = False  # every create/update operation ends in a build error
        self._object_exists = object_exists
        self._account_exists = account_exists
        self._topic_exists = topic_exists
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    def routes(self, router: Router) -> None:
        api = "functions"
        router.add("GET", f"{PARENT}/functions", api, self.list)
        router.add("POST", f"{PARENT}/functions", api, self.create)
        router.add("PATCH", f"{PARENT}/functions/(?P<fn>[^/:]+)", api, self.patch)
        router.add("DELETE", f"{PARENT}/functions/(?P<fn>[^/:]+)", api, self.delete)
        router.add("GET", f"{PARENT}/operations/(?P<op>[^/:]+)", api, self.get_operation)
        service = f"{PARENT}/services/(?P<service>[^/:]+)"
        router.add("GET", f"{service}:getIamPolicy", "run", self.get_policy)
        router.add("POST", f"{service}:setIamPolicy", "run", self.set_policy)

    def _check(self, fn: dict[str, Any]) -> None:
        build, service = fn.get("buildConfig", {}), fn.get("serviceConfig", {})
        if build.get("runtime") != "python312" or not build.get("entryPoint"):
            raise ApiError(400, "buildConfig.runtime and buildConfig.entryPoint are required")
        storage = build.get("source", {}).get("storageSource", {})
        if not self._object_exists(storage.get("bucket", ""), storage.get("object", "")):
            raise ApiError(400, f"Cannot access source object gs://{storage.get('bucket')}/{storage.get('object')}")
        account = build.get("serviceAccount", "")
        if account and not self._account_exists(account.rsplit("/", 1)[-1]):
            raise ApiError(400, f"Build service account {account} does not exist")
        if not self._account_exists(service.get("serviceAccountEmail", "")):
            raise ApiError(400, f"Service account {service.get('serviceAccountEmail')} does not exist")
        trigger = fn.get("eventTrigger")
        if trigger and not self._topic_exists(trigger.get("pubsubTopic", "")):
            raise ApiError(400, f"Topic {trigger.get('pubsubTopic')} does not exist")

    def _operation(self, parent: str, response: dict[str, Any], error: str | None = None) -> dict[str, Any]:
        name = f"{parent}/operations/op-{next(self._ids)}"
        final: dict[str, Any] = {"name": name, "done": True}
        if error:
            final["error"] = {"code": 3, "message": error}
        else:
            final["response"] = response
        with self._lock:
            self.operations[name] = final
        return {"name": name, "done": False}

    def _deployed(self, fn: dict[str, Any], name: str) -> dict[str, Any]:
        function_id = name.rsplit("/", 1)[-1]
        parent = name.rsplit("/functions/", 1)[0]
        region = parent.rsplit("/", 1)[-1]
        fn["name"] = name
        fn["state"] = "ACTIVE"
        fn["environment"] = "GEN_2"
        fn["url"] = f"https://{region}-{self.project}.cloudfunctions.net/{function_id}"
        service = fn.setdefault("serviceConfig", {})
        service["service"] = f"{parent}/services/{function_id}"
        service["uri"] = f"https://{function_id}-abc123-uc.a.run.app"
        service.setdefault("environmentVariables", {})["LOG_EXECUTION_ID"] = "true"
        if fn.get("eventTrigger"):
            fn["eventTrigger"]["trigger"] = f"{parent}/triggers/{function_id}-000"
        return fn

    # --- what the build and Eventarc check --------------------------------------------------------

    def _policies(self, *stores: tuple[PolicyStore | None, str]) -> list[tuple[str, dict[str, Any]]]:
        return [store.policy(resource) for store, resource in stores if store is not None]

    def _build(self, fn: dict[str, Any], name: str) -> str | None:
        """Cloud Build's run for `fn`: its error message, or None when it built and pushed."""
        access, storage = self.access, self.storage
        if access is None or storage is None:
            return None
        function_id = name.rsplit("/", 1)[-1]
        region = name.split("/locations/", 1)[1].split("/", 1)[0]
        build = fn.get("buildConfig", {})
        source = build.get("source", {}).get("storageSource", {})
        bucket, obj = f"gcf-v2-sources-{access.number}-{region}", f"{function_id}/function-source.zip"
        # Cloud Functions' own service agent copies the upload (Google grants it its role).
        storage.google_copy(source.get("bucket", ""), source.get("object", ""), bucket, obj)
        account = build.get("serviceAccount", "").rsplit("/", 1)[-1] or f"{access.number}-compute@developer.gserviceaccount.com"
        member = f"serviceAccount:{account}"
        project = (self.project_policies, f"projects/{self.project}")
        error = None
        copy_policies = self._policies((storage.policies, f"projects/_/buckets/{bucket}"), project)
        if not access.allowed(member, "storage.objects.get", f"projects/_/buckets/{bucket}/objects/{obj}",
                              copy_policies):
            error = (f"Build failed with status: FAILURE and message: failed to Fetch: failed to download archive "
                     f"gs://{bucket}/{obj}: Access to bucket {bucket} denied. You must grant Storage Object Viewer "
                     f"permission to {account}. If you are using VPC Service Controls, you must also grant it access "
                     f"to your service perimeter.")
        elif not access.allowed(member, "storage.objects.create", f"projects/_/buckets/{bucket}/objects/{obj}",
                                copy_policies):
            error = ("Build failed with status: FAILURE. Could not build the function due to a missing permission on "
                     "the build service account. If you didn't revoke that permission explicitly, this could be caused "
                     "by a change in the organization policies.")
        else:
            repository = build.get("dockerRepository", "")
            if not access.allowed(member, "artifactregistry.repositories.uploadArtifacts", repository,
                                  self._policies((self.registry_policies, repository), project)):
                error = (f"Build failed with status: FAILURE and message: denied: Permission "
                         f"\"artifactregistry.repositories.uploadArtifacts\" denied on resource \"{repository}\" "
                         f"(or it may not exist).")
        with self._lock:
            self.builds.append((function_id, error))
        return error

    def _eventarc(self, parent: str, function_id: str) -> None:
        """The trigger's validation: Eventarc's service agent must exist and hold its role."""
        access = self.access
        if access is None or self.project_policies is None:
            return
        first = f"service-{access.number}@gcp-sa-eventarc.iam.gserviceaccount.com" not in access.agents
        agent = access.agent("gcp-sa-eventarc")
        project = f"projects/{self.project}"
        if first:  # Google grants the agent its role when it creates it
            self.project_policies.grant(project, "roles/eventarc.serviceAgent", f"serviceAccount:{agent}")
        if not access.agent_ready(agent) or not access.allowed(
                f"serviceAccount:{agent}", "eventarc.triggers.use", project, [self.project_policies.policy(project)]):
            raise ApiError(400, f"Validation failed for trigger {parent}/triggers/{function_id}-{next(self._ids)}: "
                                f"Invalid resource state for \"\": Permission denied while using the Eventarc Service "
                                f"Agent. If you recently started to use Eventarc, it may take a few minutes before all "
                                f"necessary permissions are propagated to the Service Agent. Otherwise, verify that it "
                                f"has Eventarc Service Agent role.", "FAILED_PRECONDITION")

    def list(self, request: Request) -> tuple[int, Any]:
        parent = request.match["parent"]
        with self._lock:
            items = [json_copy(f) for name, f in sorted(self.functions.items()) if name.startswith(parent + "/")]
        return 200, page(items, request.query, "functions")

    def create(self, request: Request) -> tuple[int, Any]:
        parent, function_id = request.match["parent"], request.query.get("functionId", "")
        fn = canonical(functions_v2.Function.pb(), request.json())
        name = f"{parent}/functions/{function_id}"
        if fn.get("name") not in (None, name):
            raise ApiError(400, f"function.name {fn.get('name')!r} does not match functionId {function_id!r}")
        self._check(fn)
        with self._lock:
            if name in self.functions:
                raise ApiError(409, f"Function {function_id} in region {parent} already exists")
        if fn.get("eventTrigger"):
            self._eventarc(parent, function_id)
        error = "Build failed: injected build error" if self.fail_builds else self._build(fn, name)
        with self._lock:
            deployed = self._deployed(fn, name)
            if error:
                deployed["state"] = "FAILED"
            self.functions[name] = deployed
        self.run_policies.create(deployed["serviceConfig"]["service"])
        return 200, self._operation(parent, {"@type": FUNCTION_TYPE, **json_copy(deployed)}, error)

    def patch(self, request: Request) -> tuple[int, Any]:
        parent = request.match["parent"]
        name = f"{parent}/functions/{request.match['fn']}"
        body = canonical(functions_v2.Function.pb(), request.json())
        mask = [_camel(p) for p in request.query.get("updateMask", "").split(",") if p]
        if not mask:
            raise ApiError(400, "this fake expects an update mask (deploy always sends one)")
        with self._lock:
            if name not in self.functions:
                raise ApiError(404, f"Function {name} does not exist")
            fn = json_copy(self.functions[name])
        for path in mask:
            _set_path(fn, body, path)
        self._check(fn)
        if fn.get("eventTrigger") and "eventTrigger" in mask:
            self._eventarc(parent, request.match["fn"])
        error = "Build failed: injected build error" if self.fail_builds else self._build(fn, name)
        with self._lock:
            fn = self._deployed(fn, name)
            fn["state"] = "FAILED" if error else "ACTIVE"
            self.functions[name] = fn
        return 200, self._operation(parent, {"@type": FUNCTION_TYPE, **json_copy(fn)}, error)

    def delete(self, request: Request) -> tuple[int, Any]:
        parent = request.match["parent"]
        name = f"{parent}/functions/{request.match['fn']}"
        with self._lock:
            fn = self.functions.pop(name, None)
        if fn is None:
            raise ApiError(404, f"Function {name} does not exist")
        self.run_policies.drop(fn["serviceConfig"]["service"])
        return 200, self._operation(parent, {"@type": EMPTY_TYPE})

    def get_policy(self, request: Request) -> tuple[int, Any]:
        return 200, self.run_policies.get(f"{request.match['parent']}/services/{request.match['service']}")

    def set_policy(self, request: Request) -> tuple[int, Any]:
        resource = f"{request.match['parent']}/services/{request.match['service']}"
        return 200, self.run_policies.set(resource, policy_from_body(resource, request.json()))
