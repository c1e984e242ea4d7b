"""A fake Cloud Build v1 REST API that the real google-cloud-build client talks to.

It answers what spotcron's builder calls: create a build (an Operation, done on its first poll),
get that operation, and list builds filtered by tag and status, newest first (by `createTime`, which
each build gets when it is created). Every create's body is checked
against the published schema (cloudbuild_schema.py) and parsed strictly with the client's own
Build message; a mismatch is a 400, as Google answers. A build "runs" by reading its source object
from `sources` (the stack's bucket in tests) and pushing each of its images with a digest derived
from the image's name and the source's bytes.

`restricted_to`: a project Cloud Build limits to a few regions ("Depending on usage, some projects
might be restricted to using Cloud Build only in the following regions",
https://cloud.google.com/build/docs/locations): a build created in any other region (the global
location aside) is refused 400 FAILED_PRECONDITION with Google's words, "failed precondition: due
to quota restrictions, cannot run builds in this region. Please contact support"
(google-github-actions/deploy-cloudrun#480).

Logs: a build that names its own `serviceAccount` must say where its logs go ("To specify your own
service account for builds, you must store your build logs either in Cloud Logging or in a
user-created Cloud Storage bucket. You cannot store your logs in the default logs bucket",
https://cloud.google.com/build/docs/securing-builds/configure-user-specified-service-accounts);
without `logsBucket` and without CLOUD_LOGGING_ONLY or NONE it is refused 400 with Google's words
("if 'build.service_account' is specified, the build must either (a) specify 'build.logs_bucket',
(b) use the REGIONAL_USER_OWNED_BUCKET build.options.default_logs_bucket_behavior option, or (c)
use either CLOUD_LOGGING_ONLY / NONE logging options: invalid argument", as reported in
cert-manager/cert-manager#8851 and GoogleCloudPlatform/terraform-google-dataplex-auto-data-quality#39).
A `logsBucket` (`gs://BUCKET` or `gs://BUCKET/PATH`, as gcloud's --gcs-log-dir sends it) is
checked when the build is created: Google's page asks, for a build that does not run as Cloud
Build's legacy account, "the Storage Admin role (roles/storage.admin)" on the user-created bucket
("Store build logs in a user-created bucket",
https://cloud.google.com/build/docs/securing-builds/store-view-build-logs). The fake asks at least
the bucket's storage.buckets.get and storage.objects.create on the log's object
(`may_write_log(account, bucket, object)`, FakeCloud.may_write_build_logs): an Object Creator
conditioned on an object prefix is refused. The refusal is 400 INVALID_ARGUMENT `invalid logs
bucket "gs://…": builder service account does not have access to logs bucket "BUCKET"`, the words
reported in GoogleCloudPlatform/cloud-builders#280.
A build that ran writes its log to `${logsBucket}/log-${build_id}.txt` ("Logs file names will be
of the format ${logsBucket}/log-${build_id}.txt", the Build resource's reference) through
`write_log(bucket, object, bytes)`: its steps' output (`log_text` of a failed build, or
`fail_log`, which tests set to what a hostile Dockerfile prints).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes import cloudbuild_schema

PARENT = r"/v1/(?P<parent>projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+))"
BUILD_TYPE = "type.googleapis.com/google.devtools.cloudbuild.v1.Build"
METADATA_TYPE = "type.googleapis.com/google.devtools.cloudbuild.v1.BuildOperationMetadata"
_FILTER = re.compile(r'^tags="(?P<tag>[^"]+)" AND status="(?P<status>[A-Z_]+)"$')


class _Refused(Exception):
    def __init__(self, code: int, message: str, status: str = ""):
        super().__init__(message)
        self.code, self.message = code, message
        self.status = status or ("INVALID_ARGUMENT" if code == 400 else "NOT_FOUND")


class FakeCloudBuild:
    """`sources(bucket, object)`: the bytes of an uploaded context, or None."""

    def __init__(self, project: str, sources: Callable[[str, str], bytes | None],
                 may_push: Callable[[str, str], bool] | None = None, *,
                 may_write_log: Callable[[str, str, str], bool] | None = None,
                 write_log: Callable[[str, str, bytes], None] | None = None):
        """`may_push(account, repository)`: whether the build's account may push there now (an
        IAM check with its grant's propagation); None: always. `may_write_log(account, bucket,
        object)`: whether it may create its log there (None: always); `write_log`: where the log
        goes (None: `self.logs`)."""
        self.project = project
        self.sources = sources
        self.may_push = may_push
        self.may_write_log = may_write_log
        self.write_log = write_log
        self.logs: dict[tuple[str, str], bytes] = {}
        self.fail_log = "Step #0: The command '/bin/sh -c false' returned a non-zero code: 1\n"
        self.builds: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []  # every create's body, as sent
        self.refused: list[str] = []  # every create refused, Google's message
        self.operations: dict[str, dict[str, Any]] = {}
        self.fail_next = False  # the next build ends FAILURE, as a Dockerfile with an error does
        self.restricted_to: frozenset[str] | None = None  # the only regions this project may build in
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    # --- the server -------------------------------------------------------------------------
    def start(self) -> str:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                try:
                    status, out = fake.handle(method, self.path, body)
                except _Refused as exc:
                    status, out = exc.code, {"error": {"code": exc.code, "message": exc.message,
                                                       "status": exc.status}}
                data = json.dumps(out).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer("GET")

            def do_POST(self) -> None:
                self._answer("POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # --- the API ----------------------------------------------------------------------------
    def handle(self, method: str, url: str, body: bytes) -> tuple[int, Any]:
        parts = urlsplit(url)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        if method == "POST" and (m := re.fullmatch(f"{PARENT}/builds", parts.path)):
            return self.create(m, json.loads(body or b"{}"))
        if method == "GET" and (m := re.fullmatch(f"{PARENT}/builds", parts.path)):
            return self.list(m, query)
        if method == "GET" and (m := re.fullmatch(r"/v1/(?P<name>projects/[^/]+/locations/[^/]+/operations/[^/]+)",
                                                  parts.path)):
            if m["name"] not in self.operations:
                raise _Refused(404, f"operation {m['name']} not found")
            return 200, self.operations[m["name"]]
        raise _Refused(404, f"no route for {method} {parts.path}")

    def _check_project(self, match: re.Match[str]) -> None:
        if match["project"] != self.project:
            raise _Refused(403, f"permission denied on {match['parent']}")

    def create(self, match: re.Match[str], body: dict[str, Any]) -> tuple[int, Any]:
        try:
            return self._create(match, body)
        except _Refused as exc:
            self.refused.append(exc.message)
            raise

    def _create(self, match: re.Match[str], body: dict[str, Any]) -> tuple[int, Any]:
        self._check_project(match)
        self.requests.append(body)
        location = match["location"]
        if self.restricted_to is not None and location != "global" and location not in self.restricted_to:
            raise _Refused(400, "failed precondition: due to quota restrictions, cannot run builds in this region. "
                                "Please contact support", "FAILED_PRECONDITION")
        problems = cloudbuild_schema.problems(body)
        problems += [f"build.{name}: required" for name in cloudbuild_schema.BUILD_REQUIRED if not body.get(name)]
        problems += [f"build.tags: {tag!r} does not match {cloudbuild_schema.TAG_PATTERN}"
                     for tag in body.get("tags", []) if not re.match(cloudbuild_schema.TAG_PATTERN, tag)]
        if problems:
            raise _Refused(400, "Invalid JSON payload received. " + "; ".join(problems))
        _strict_parse(body)
        account = str(body.get("serviceAccount", "")).rsplit("/", 1)[-1]
        logs = self._logs_location(body, account)
        storage = (body.get("source") or {}).get("storageSource") or {}
        source = self.sources(storage.get("bucket", ""), storage.get("object", ""))
        if source is None:
            raise _Refused(400, f"the source gs://{storage.get('bucket')}/{storage.get('object')} does not exist")
        number = next(self._ids)
        build = {**body, "id": f"build-{number}", "projectId": self.project,
                 "name": f"{match['parent']}/builds/build-{number}",
                 # Output only, "Time at which the request to create the build was received": one
                 # second apart here, so that the order of creation is the order of createTime.
                 "createTime": f"2026-01-01T{number // 3600 % 24:02d}:{number // 60 % 60:02d}:{number % 60:02d}Z"}
        operation = f"{match['parent']}/operations/op-{number}"
        with self._lock:
            failed, self.fail_next = self.fail_next, False
            repositories = {_repository(image, self.project) for image in body.get("images", [])}
            refused = next((r for r in sorted(repositories)
                            if self.may_push is not None and not self.may_push(account, r)), None)
            if refused and not failed:
                # As Cloud Build reports it: the build ran, the push was denied (Build.failureInfo).
                detail = (f"denied: Permission \"artifactregistry.repositories.uploadArtifacts\" denied on resource "
                          f"\"{refused}\" (or it may not exist)")
                build["status"] = "FAILURE"
                build["failureInfo"] = {"type": "PUSH_FAILED", "detail": detail}
                done = {"name": operation, "done": True, "metadata": {"@type": METADATA_TYPE, "build": build},
                        "error": {"code": 2, "message": f"Build failed; check build logs for build-{number}"}}
            elif failed:
                build["status"] = "FAILURE"
                done = {"name": operation, "done": True,
                        "metadata": {"@type": METADATA_TYPE, "build": build},
                        "error": {"code": 2, "message": f"Build failed; check build logs for build-{number}"}}
            else:
                build["status"] = "SUCCESS"
                build["results"] = {"images": [{"name": image, "digest": _digest(image, source)}
                                               for image in body.get("images", [])]}
                done = {"name": operation, "done": True, "metadata": {"@type": METADATA_TYPE, "build": build},
                        "response": {"@type": BUILD_TYPE, **build}}
            if logs is not None:
                # The step's output as the builder prints it; a failed build's ends with its error.
                text = f"starting build \"build-{number}\"\n" + (
                    self.fail_log if build["status"] == "FAILURE" and not refused else
                    f"ERROR: failed to push: {build.get('failureInfo', {}).get('detail', '')}\n" if refused
                    else "PUSH\nDONE\n")
                bucket, _, folder = logs.partition("/")
                name = f"{folder.rstrip('/')}/log-build-{number}.txt" if folder else f"log-build-{number}.txt"
                if self.write_log is not None:
                    self.write_log(bucket, name, text.encode())
                else:
                    self.logs[(bucket, name)] = text.encode()
            self.builds.append(build)
            self.operations[operation] = done
        return 200, {"name": operation, "done": False,
                     "metadata": {"@type": METADATA_TYPE, "build": {**body, "id": build["id"], "status": "QUEUED"}}}

    def _logs_location(self, body: dict[str, Any], account: str) -> str | None:
        """Where the build's log goes ("BUCKET/PATH"), None when not to a bucket; refuses what Google refuses."""
        logging = (body.get("options") or {}).get("logging", "LOGGING_UNSPECIFIED")
        mode = logging if isinstance(logging, str) else {v: k for k, v in cloudbuild_schema.SCHEMAS[
            "BuildOptions"]["logging"][1].items()}.get(logging, "LOGGING_UNSPECIFIED")
        location = str(body.get("logsBucket") or "")
        if account and not location and mode not in ("CLOUD_LOGGING_ONLY", "NONE"):
            raise _Refused(400, "if 'build.service_account' is specified, the build must either (a) specify "
                                "'build.logs_bucket', (b) use the REGIONAL_USER_OWNED_BUCKET "
                                "build.options.default_logs_bucket_behavior option, or (c) use either "
                                "CLOUD_LOGGING_ONLY / NONE logging options: invalid argument")
        if not location or mode in ("CLOUD_LOGGING_ONLY", "STACKDRIVER_ONLY", "NONE"):
            return None
        if not location.startswith("gs://"):
            raise _Refused(400, f"invalid logs bucket {location!r}")
        path = location.removeprefix("gs://")
        bucket, _, folder = path.partition("/")
        probe = f"{folder.rstrip('/')}/log-probe.txt" if folder else "log-probe.txt"
        if account and self.may_write_log is not None and not self.may_write_log(account, bucket, probe):
            raise _Refused(400, f"invalid logs bucket \"{location}\": builder service account does not have "
                                f"access to logs bucket \"{bucket}\"")
        return path

    def list(self, match: re.Match[str], query: dict[str, str]) -> tuple[int, Any]:
        self._check_project(match)
        wanted = _FILTER.match(query.get("filter", ""))
        if query.get("filter") and wanted is None:
            raise _Refused(400, f"the fake understands only tags=\"T\" AND status=\"S\" filters, not {query['filter']!r}")
        # "Builds will be sorted by create_time, descending" (ListBuildsResponse.builds,
        # https://cloud.google.com/python/docs/reference/cloudbuild/latest/google.cloud.devtools.cloudbuild_v1.types.ListBuildsResponse).
        found = [b for b in reversed(self.builds) if wanted is None
                 or (wanted["tag"] in b.get("tags", []) and b.get("status") == wanted["status"])]
        return 200, {"builds": found} if found else {}


def _strict_parse(body: dict[str, Any]) -> None:
    from google.cloud.devtools import cloudbuild_v1
    from google.protobuf import json_format

    try:
        json_format.ParseDict(body, cloudbuild_v1.Build.pb()())
    except json_format.ParseError as exc:
        raise _Refused(400, f"Invalid JSON payload received. {exc}") from None


def _repository(image: str, project: str) -> str:
    """`REGION-docker.pkg.dev/PROJECT/REPO/NAME:TAG` → `projects/PROJECT/locations/REGION/repositories/REPO`."""
    host, _, path = image.partition("/")
    region = host.removesuffix("-docker.pkg.dev")
    parts = path.split("/")
    return f"projects/{parts[0] if parts else project}/locations/{region}/repositories/{parts[1] if len(parts) > 1 else ''}"


def _digest(image: str, source: bytes) -> str:
    return "sha256:" + hashlib.sha256(image.encode() + b"\0" + source).hexdigest()
