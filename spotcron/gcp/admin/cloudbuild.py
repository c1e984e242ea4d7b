"""Cloud Build: build a job's image from its context in the stack's bucket and read the pushed digest.

What `gcloud builds submit --tag IMAGE` does, on the google-cloud-build client: the context (a
reproducible .tar.gz, core/images.py) is uploaded to the bucket, a Build with one
`docker build` step and `images: [IMAGE]` is created in the stack's region, its operation is
waited on, and the digest comes from the Build's `results.images`. Before building, the builds
of the same context are looked up by their Cloud Build tag: an unchanged context is not built
again.

"Depending on usage, some projects might be restricted to using Cloud Build only in" six regions
(https://cloud.google.com/build/docs/locations); elsewhere such a project's build is refused
"due to quota restrictions, cannot run builds in this region". The builder then builds in Cloud
Build's global location, saying so; the image still goes to the stack's regional repository.

A build that runs as deploy's job build account writes its log to the stack's bucket of build
logs (`logsBucket` gs://LOGS_BUCKET, `options.logging` GCS_ONLY; core/build_logs.py), as
`log-BUILD_ID.txt` ("Logs file names will be of the format ${logsBucket}/log-${build_id}.txt",
https://cloud.google.com/build/docs/api/reference/rest/v1/projects.builds). When a build fails,
its log's last lines are shown from there: a bounded read (the log is what the job's Dockerfile
printed), each character a terminal would act on escaped. Once the build has ended its log is
deleted, read or not: the bucket keeps no build output, which may hold what the build printed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from spotcron.core.build_logs import build_log_object, build_logs_bucket
from spotcron.core.errors import SpotcronError
from spotcron.core.images import LABEL, SOURCE_PREFIX, ImageBuild, build_request, build_tag, pushed_digest
from spotcron.engine.ports import Blobs
from spotcron.gcp.admin.settling import Settling
from spotcron.gcp.error_map import translated

VERSIONS_KEPT = 10  # the stack file's default image_versions_kept
BUILD_WAIT_S = 1800.0  # the build's own timeout (core/images.py) plus queueing
REGION_REFUSED = "cannot run builds in this region"  # Cloud Build's words for a restricted project
LOG_READ_BYTES = 256 * 1024  # of a failed build's log, from its start: it is job-author output
LOG_LINES = 30  # the last lines of what was read, shown with the failure
LOG_LINE_CHARS = 300


class BuildFailed(SpotcronError):
    """Cloud Build ran the build and it did not push the image."""


# A context uploaded this long ago serves no build any more: longer than a build waits in Cloud
# Build's queue and runs (core/images.BUILD_TIMEOUT_S), shorter than the results bucket's lifecycle
# rule on deploy/build- (a day, deploy/desired.py), so a later deploy removes it sooner.
STALE_CONTEXT_S = 2 * 3600


def make_client(credentials: Any = None, *, endpoint: str | None = None) -> Any:
    """A CloudBuildClient over REST; `endpoint` (http://HOST:PORT) points it at a local fake."""
    from google.cloud.devtools import cloudbuild_v1
    from google.cloud.devtools.cloudbuild_v1.services.cloud_build.transports.rest import (
        CloudBuildRestTransport,
    )

    if endpoint is None:
        return cloudbuild_v1.CloudBuildClient(credentials=credentials, transport="rest")
    scheme, _, host = endpoint.partition("://")
    transport = CloudBuildRestTransport(host=host, credentials=credentials, url_scheme=scheme)
    return cloudbuild_v1.CloudBuildClient(transport=transport)


class CloudBuilder:
    """Builds ImageBuilds in `project`/`region`, the sources going to `blobs` (the stack's bucket).

    `service_account`: the email the builds run as (deploy's job build account, which may write the
    jobs' repositories, read the bucket's deploy/build-* objects and administer the bucket of build
    logs, nothing else); None: Cloud Build's default account. `logs`: that bucket of build logs,
    which deploy (as the deploying user) reads a failed build's log from and deletes every log in;
    None: the one core/build_logs.py names after `blobs`' bucket.
    """

    def __init__(self, project: str, region: str, blobs: Blobs, *, client: Any = None, credentials: Any = None,
                 service_account: str | None = None, wait_s: float = BUILD_WAIT_S, settling: Settling | None = None,
                 logs: Blobs | None = None, keep: int = VERSIONS_KEPT):
        self.project = project
        self.keep = keep  # the stack's image_versions_kept: the versions of each image cleanup keeps at any age
        # A push refused as the build account right after deploy granted it the repository is a
        # grant still propagating: the build runs again (settling.py), for minutes.
        self.settling = settling or Settling()
        self.region = region
        self.location = region  # "global" once the region refused this project's builds
        self.say: Callable[[str], None] = lambda text: None
        self.blobs = blobs
        self._logs = logs
        self.service_account = service_account
        self._unread_log = ""  # a failed build's log that could not be read here: left for `gcloud builds log`
        self.wait_s = wait_s
        self._client = client
        self._credentials = credentials
        self.now: Callable[[], datetime] = lambda: datetime.now(UTC)

    @property
    def client(self) -> Any:
        if self._client is None:
            with translated("open Cloud Build"):
                self._client = make_client(self._credentials)
        return self._client

    @property
    def logs(self) -> Blobs:
        if self._logs is None:
            from spotcron.gcp.storage import GcsBlobs

            self._logs = GcsBlobs(build_logs_bucket(self.blobs.bucket), client=getattr(self.blobs, "_client", None))
        return self._logs

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.location}"

    def find(self, build: ImageBuild, image: str) -> str | None:
        """The digest of an earlier successful build of this exact context pushed as `image`, if any
        and if the repository's cleanup keeps it: in the stack's region, then in the global location
        (where a restricted project built)."""
        what = f"list the builds of {image}"
        for location in dict.fromkeys((self.location, self.region, "global")):
            with translated(what):
                pages = self.client.list_builds(request={
                    "parent": f"projects/{self.project}/locations/{location}",
                    "filter": f'tags="{build_tag(build)}" AND status="SUCCESS"'})
                for found in pages:
                    result = _as_json(found)
                    digest = pushed_digest(result, image)
                    if digest is not None:
                        return digest if self._kept(location, result, image, digest) else None
        return None

    def _kept(self, location: str, found: dict[str, Any], image: str, digest: str) -> bool:
        """Whether the repository's cleanup keeps the version `found` pushed: it deletes versions
        older than 30 days except the `keep` most recent of each image (deploy/desired.py). So an
        earlier build is reused only while fewer than `keep` newer versions of the same image came
        from spotcron's builds since; otherwise the folder is built again, and the fresh version is
        what the spec pins. Builds list newest first ("Builds will be sorted by create_time,
        descending", ListBuildsResponse), so the walk stops at `found`."""
        package = image.split("@", 1)[0].rsplit(":", 1)[0] + ":"
        newer: set[str] = set()
        with translated(f"list the builds newer than the one of {image}"):
            pages = self.client.list_builds(request={
                "parent": f"projects/{self.project}/locations/{location}",
                "filter": f'tags="{LABEL}" AND status="SUCCESS"'})
            for other in pages:
                result = _as_json(other)
                if result.get("id") == found.get("id"):
                    break
                newer |= {str(pushed.get("digest")) for pushed in (result.get("results") or {}).get("images") or ()
                          if str(pushed.get("name", "")).startswith(package) and pushed.get("digest") != digest}
                if len(newer) >= self.keep:
                    return False
        return True

    def build(self, build: ImageBuild, image: str) -> str:
        """Upload the context, build and push `image`; its digest (sha256:…)."""
        return self.settling.run(f"build {image}", lambda: self._build_once(build, image))

    def _build_once(self, build: ImageBuild, image: str) -> str:
        try:
            return self._build_in_location(build, image)
        except SpotcronError as exc:
            if self.location == "global" or REGION_REFUSED not in str(exc):
                raise
        self.say(f"Cloud Build refuses builds in {self.region} for project {self.project} (\"{REGION_REFUSED}\": "
                 "a quota restriction, https://cloud.google.com/build/docs/locations); building in its global "
                 "location instead")
        self.location = "global"
        return self._build_in_location(build, image)

    def _build_in_location(self, build: ImageBuild, image: str) -> str:
        from google.cloud.devtools import cloudbuild_v1

        self._delete_stale_contexts(build.source_object)
        generation = self.blobs.write(build.source_object, build.tarball, content_type="application/gzip")
        body = build_request(build, image, bucket=self.blobs.bucket, generation=generation,
                             service_account=self.service_account, project=self.project,
                             logs_bucket=self.logs.bucket if self.service_account is not None else None)
        operation = None
        try:
            with translated(f"build {image}"):
                operation = self.client.create_build(request={
                    "parent": self.parent,
                    "build": cloudbuild_v1.Build.from_json(json.dumps(body))})
                try:
                    done = operation.result(timeout=self.wait_s)
                except Exception as exc:
                    if _ended_with_error(operation):
                        raise BuildFailed(f"the build of {image} from {build.relative}/ failed{_failure(operation)}: "
                                          f"{operation.operation.error.message}"
                                          f"{self._log_tail(_build_id(operation))}") from exc
                    raise
        finally:
            # The context is the user's folder: it stays in the bucket only while a build may read it.
            if operation is None or _done(operation):
                self.blobs.delete(build.source_object)
                if operation is not None and self.service_account is not None and _build_id(operation) \
                        and _build_id(operation) != self._unread_log:
                    self._delete_log(_build_id(operation))
        result = _as_json(done)
        digest = pushed_digest(result, image)
        if digest is None:
            raise BuildFailed(f"the build of {image} ended {result.get('status', '?')} without pushing the image; "
                              f"see {result.get('logUrl') or 'gcloud builds list --region ' + self.location}")
        return digest

    def _delete_stale_contexts(self, own: str) -> None:
        """Delete the contexts an interrupted deploy left (its wait ran out, Ctrl-C, a lost
        connection): each is another folder, and every build's Dockerfile may read deploy/build-*.
        One young enough to serve a build still under way (another deploy's) stays."""
        now = self.now()
        for name in self.blobs.list(SOURCE_PREFIX):
            if name == own:
                continue
            found = self.blobs.read(name)
            if found is not None and found.updated is not None \
                    and (now - found.updated).total_seconds() > STALE_CONTEXT_S:
                self.blobs.delete(name)

    def _log_tail(self, build_id: str) -> str:
        """The end of a failed build's log, ready to print, or where to look when it cannot be read."""
        elsewhere = f"; its log: gcloud builds log {build_id or 'BUILD_ID'} --region {self.location}"
        if not build_id or self.service_account is None:
            return elsewhere
        self._unread_log = build_id  # kept for that command until it has been read here
        try:
            data = self.logs.read_range(build_log_object(build_id), 0, LOG_READ_BYTES)
        except SpotcronError:
            return elsewhere
        if not data:
            return elsewhere
        self._unread_log = ""
        data = data[:LOG_READ_BYTES]  # whatever the server sent
        lines = data.decode("utf-8", "replace").splitlines()[-LOG_LINES:]
        cut = " (its first 256 KiB)" if len(data) >= LOG_READ_BYTES else ""
        shown = "\n".join(f"    {_inert(line)[:LOG_LINE_CHARS]}" for line in lines)
        return f"; the end of its log{cut}:\n{shown}"

    def _delete_log(self, build_id: str) -> None:
        # One left behind is deleted by the logs bucket's lifecycle rule a day later (deploy/desired.py).
        with contextlib.suppress(SpotcronError):
            self.logs.delete(build_log_object(build_id))


def _inert(text: str) -> str:
    """Job-written text safe to print: every character a terminal would act on, as its escape."""
    def escaped(char: str) -> str:
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"

    return text if text.isprintable() else "".join(char if char.isprintable() else escaped(char) for char in text)


def _build_id(operation: Any) -> str:
    try:
        return str(operation.metadata.build.id or "")
    except Exception:
        return ""


def _as_json(build: Any) -> dict[str, Any]:
    from google.cloud.devtools import cloudbuild_v1

    return json.loads(cloudbuild_v1.Build.to_json(build, use_integers_for_enums=False))


def _failure(operation: Any) -> str:
    """How Cloud Build classified the failure (Build.failureInfo), e.g. " (PUSH_FAILED: …)"; "" if it did not.
    A PUSH_FAILED whose detail names artifactregistry.repositories.uploadArtifacts is a grant
    that has not propagated yet (settling.awaited)."""
    try:
        info = operation.metadata.build.failure_info
        kind = info.type_.name
    except Exception:
        return ""
    if not kind or kind == "FAILURE_TYPE_UNSPECIFIED":
        return ""
    return f" ({kind}: {info.detail})" if info.detail else f" ({kind})"


def _done(operation: Any) -> bool:
    try:
        return bool(operation.done())
    except Exception:
        return False


def _ended_with_error(operation: Any) -> bool:
    # The build ran and failed (a Dockerfile error, a push refused): no retry mends that, unlike a
    # failed poll, which `translated` reports as the API error it was.
    try:
        return bool(operation.done() and operation.operation.error.code)
    except Exception:
        return False
