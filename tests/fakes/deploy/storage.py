"""Fake Cloud Storage JSON API: buckets (with IAM) and the few object calls deploy makes.

gcp-storage-emulator serves objects but not bucket IAM policies or generation preconditions,
and deploy needs both, so this fake serves the handful of calls deploy makes instead.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

from tests.fakes.deploy.common import PolicyStore, json_copy, page
from tests.fakes.deploy.http import ApiError, Request, Router, caller

BUCKET = r"/storage/v1/b/(?P<bucket>[^/]+)"


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """JSON API patch semantics: nested objects merge, null deletes, lists replace."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = json_copy(value)


def _normalise(bucket: dict[str, Any]) -> None:
    """int64 fields come back as JSON strings, as the JSON API returns them."""
    policy = bucket.get("softDeletePolicy")
    if isinstance(policy, dict):
        policy.pop("effectiveTime", None)
        if policy.get("retentionDurationSeconds") is not None:
            policy["retentionDurationSeconds"] = str(policy["retentionDurationSeconds"])


def _multipart(request: Request) -> tuple[dict[str, Any], bytes]:
    content_type = request.headers.get("content-type", "")
    if "boundary=" not in content_type:
        raise ApiError(400, "expected a multipart/related upload")
    boundary = content_type.split("boundary=", 1)[1].strip().strip('"').encode()
    parts = [p for p in request.body.split(b"--" + boundary) if p.strip() not in (b"", b"--")]
    if len(parts) != 2:
        raise ApiError(400, f"expected metadata and media parts, got {len(parts)}")
    head, _, meta = parts[0].partition(b"\r\n\r\n")
    _, _, media = parts[1].partition(b"\r\n\r\n")
    return json.loads(meta.strip()), media.removesuffix(b"\r\n")


class FakeStorage:
    def __init__(self, project: str, policies: PolicyStore):
        self.project = project
        self.buckets: dict[str, dict[str, Any]] = {}
        self.objects: dict[tuple[str, str], tuple[bytes, int]] = {}
        self.foreign_buckets: set[str] = set()  # names taken by someone else's project
        self.policies = policies
        self._lock = threading.Lock()
        self._generation = 1000
        self.custom_metadata: dict[tuple[str, str], dict[str, str]] = {}
        self.google_objects: dict[tuple[str, str], bytes] = {}  # in buckets Google manages (google_copy)
        # Objects Cloud Storage will not delete or replace: (bucket, name) -> "Temporary", "Event-Based"
        # or "retention"; the refusal is a 403 with Google's message (see _kept).
        self.kept: dict[tuple[str, str], str] = {}

    def _may(self, request: Request, permission: str) -> None:
        """Objects are Google's to guard: the caller needs `permission` through the bucket's policy
        or the project's (https://cloud.google.com/storage/docs/access-control/iam-permissions)."""
        access = self.policies.access
        if access.project_policies is None:
            return
        bucket = request.match["bucket"]
        member = caller(request) or ""
        resource = self._resource(bucket)
        target = f"{resource}/objects/{request.match['object']}" if "object" in request.match.groupdict() else resource
        access.check(member, permission, target, [self.policies.policy(resource),
                                                  access.project_policies.policy(f"projects/{self.project}")])

    def routes(self, router: Router) -> None:
        api = "storage"
        router.add("GET", BUCKET, api, self.get_bucket)
        router.add("POST", r"/storage/v1/b", api, self.create_bucket)
        router.add("PATCH", BUCKET, api, self.patch_bucket)
        router.add("GET", f"{BUCKET}/iam", api, self.get_policy)
        router.add("PUT", f"{BUCKET}/iam", api, self.set_policy)
        router.add("GET", f"{BUCKET}/o", api, self.list_objects, checks_permission=True)
        router.add("POST", r"/upload/storage/v1/b/(?P<bucket>[^/]+)/o", api, self.upload, checks_permission=True)
        # Reads of one object: `spotcron pause --cloud` reads the deployed specs (GcsBlobs.read).
        router.add("GET", f"{BUCKET}/o/(?P<object>.+)", api, self.get_object, checks_permission=True)
        router.add("GET", r"/download/storage/v1/b/(?P<bucket>[^/]+)/o/(?P<object>.+)", api, self.download, checks_permission=True)
        router.add("DELETE", f"{BUCKET}/o/(?P<object>.+)", api, self.delete_object, checks_permission=True)
        router.add("DELETE", BUCKET, api, self.delete_bucket)

    def _resource(self, name: str) -> str:
        return f"projects/_/buckets/{name}"

    def _bucket(self, name: str) -> dict[str, Any]:
        if name in self.foreign_buckets:
            raise ApiError(403, f"caller does not have storage.buckets.get access to the Google Cloud "
                                f"Storage bucket {name}. Permission 'storage.buckets.get' denied.")
        if name not in self.buckets:
            raise ApiError(404, "The specified bucket does not exist.")
        return self.buckets[name]

    def get_bucket(self, request: Request) -> tuple[int, Any]:
        with self._lock:
            return 200, json_copy(self._bucket(request.match["bucket"]))

    def create_bucket(self, request: Request) -> tuple[int, Any]:
        body = request.json()
        name = body.get("name", "")
        if request.query.get("project") != self.project:
            raise ApiError(400, f"project={request.query.get('project')!r}, expected {self.project!r}")
        with self._lock:
            if name in self.buckets or name in self.foreign_buckets:
                raise ApiError(409, "Your previous request to create the named bucket succeeded and you "
                                    "already own it.", "CONFLICT")
            # Every bucket carries its project's number, read-only ("projectNumber",
            # https://cloud.google.com/storage/docs/json_api/v1/buckets); soft delete is on by
            # default for seven days (https://cloud.google.com/storage/docs/soft-delete).
            bucket = {"kind": "storage#bucket", "id": name, "name": name, "metageneration": "1",
                      "storageClass": "STANDARD", "timeCreated": "2026-01-01T00:00:00.000Z",
                      "projectNumber": str(self.policies.access.number),
                      "softDeletePolicy": {"retentionDurationSeconds": "604800"}}
            _merge(bucket, {k: v for k, v in body.items() if k != "projectNumber"})
            _normalise(bucket)
            bucket["location"] = str(body.get("location", "US")).upper()
            bucket.setdefault("iamConfiguration", {}).setdefault("publicAccessPrevention", "inherited")
            self.buckets[name] = bucket
        self.policies.create(self._resource(name), [
            {"role": "roles/storage.legacyBucketOwner", "members": [f"projectOwner:{self.project}"]}])
        return 200, json_copy(bucket)

    def patch_bucket(self, request: Request) -> tuple[int, Any]:
        with self._lock:
            bucket = self._bucket(request.match["bucket"])
            body = request.json()
            if "location" in body and str(body["location"]).upper() != bucket["location"]:
                raise ApiError(400, "A bucket's location cannot be changed.")
            # A locked retention policy can be neither removed nor shortened
            # (https://cloud.google.com/storage/docs/bucket-lock).
            locked = (bucket.get("retentionPolicy") or {}).get("isLocked")
            if locked and "retentionPolicy" in body and body["retentionPolicy"] != bucket["retentionPolicy"]:
                raise ApiError(403, "Cannot remove or reduce a locked retention policy.")
            _merge(bucket, {k: v for k, v in body.items() if k != "projectNumber"})
            _normalise(bucket)
            bucket["metageneration"] = str(int(bucket["metageneration"]) + 1)
            return 200, json_copy(bucket)

    def get_policy(self, request: Request) -> tuple[int, Any]:
        with self._lock:
            self._bucket(request.match["bucket"])
        policy = self.policies.get(self._resource(request.match["bucket"]))
        return 200, {"kind": "storage#policy", "resourceId": self._resource(request.match["bucket"]), **policy}

    def set_policy(self, request: Request) -> tuple[int, Any]:
        with self._lock:
            bucket = self._bucket(request.match["bucket"])
        body = request.json()
        if not bucket.get("iamConfiguration", {}).get("uniformBucketLevelAccess", {}).get("enabled"):
            raise ApiError(400, "this fake expects uniform bucket-level access before IAM changes")
        for binding in body.get("bindings", []):
            if set(binding.get("members", [])) & {"allUsers", "allAuthenticatedUsers"} and \
                    bucket["iamConfiguration"].get("publicAccessPrevention") == "enforced":
                raise ApiError(412, "Public access prevention is enforced on this bucket.")
        policy = self.policies.set(self._resource(request.match["bucket"]), body)
        return 200, {"kind": "storage#policy", "resourceId": self._resource(request.match["bucket"]), **policy}

    def list_objects(self, request: Request) -> tuple[int, Any]:
        self._may(request, "storage.objects.list")
        bucket, prefix = request.match["bucket"], request.query.get("prefix", "")
        with self._lock:
            self._bucket(bucket)
            items = [{"kind": "storage#object", "bucket": bucket, "name": name, "generation": str(gen),
                      "size": str(len(data)), **self._metadata(b, name)}
                     for (b, name), (data, gen) in sorted(self.objects.items()) if b == bucket and name.startswith(prefix)]
        return 200, {"kind": "storage#objects", **page(items, request.query, "items")}

    def upload(self, request: Request) -> tuple[int, Any]:
        bucket = request.match["bucket"]
        meta, data = _multipart(request)
        name = meta["name"]
        self._may(request, "storage.objects.create")
        with self._lock:
            self._bucket(bucket)
            existing = self.objects.get((bucket, name))
            # "To replace existing objects, both storage.objects.create and storage.objects.delete
            # permissions are required" (the page in _may).
            if existing is not None:
                self._lock.release()
                try:
                    self._may(request, "storage.objects.delete")
                finally:
                    self._lock.acquire()
            wanted = request.query.get("ifGenerationMatch")
            if wanted is not None and int(wanted) != (existing[1] if existing else 0):
                raise ApiError(412, "At least one of the pre-conditions you specified did not hold.",
                               "FAILED_PRECONDITION")
            self._kept((bucket, name))  # 412 before 403, as Cloud Storage checks them
            self._generation += 1
            self.objects[(bucket, name)] = (data, self._generation)
            self.custom_metadata[(bucket, name)] = dict(meta.get("metadata") or {})
            return 200, {"kind": "storage#object", "bucket": bucket, "name": name,
                         "generation": str(self._generation), "size": str(len(data))}

    def put(self, bucket: str, name: str, data: bytes) -> None:
        """An object written by a Google service on its own (a Cloud Build log), past the API's checks."""
        with self._lock:
            self._generation += 1
            self.objects[(bucket, name)] = (data, self._generation)

    def _object(self, request: Request) -> tuple[bytes, int]:
        key = (request.match["bucket"], request.match["object"])
        self._bucket(key[0])
        if key not in self.objects:
            raise ApiError(404, "No such object.")
        data, generation = self.objects[key]
        wanted = request.query.get("ifGenerationMatch")
        if wanted is not None and int(wanted) != generation:
            raise ApiError(412, "At least one of the pre-conditions you specified did not hold.")
        return data, generation

    def get_object(self, request: Request) -> tuple[int, Any]:
        self._may(request, "storage.objects.get")
        with self._lock:
            data, generation = self._object(request)
            return 200, {"kind": "storage#object", "bucket": request.match["bucket"], "name": request.match["object"],
                         "generation": str(generation), "size": str(len(data)),
                         "updated": "2026-01-01T00:00:00.000Z", "contentType": "application/json",
                         **self._metadata(request.match["bucket"], request.match["object"])}

    def download(self, request: Request) -> tuple[int, Any]:
        self._may(request, "storage.objects.get")
        with self._lock:
            data = self._object(request)[0]
        # A ranged GET (`Range: bytes=START-END`) answers those bytes only, as Cloud Storage does.
        wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", request.headers.get("range", ""))
        if wanted:
            start = int(wanted[1])
            end = int(wanted[2]) if wanted[2] else len(data) - 1
            return 206, data[start:end + 1]
        return 200, data

    def delete_bucket(self, request: Request) -> tuple[int, Any]:
        name = request.match["bucket"]
        with self._lock:
            self._bucket(name)
            if any(bucket == name for bucket, _ in self.objects):
                raise ApiError(409, "The bucket you tried to delete is not empty.")
            del self.buckets[name]
        return 204, None

    def google_copy(self, bucket: str, name: str, to_bucket: str, to_name: str) -> None:
        """Copy an object into a bucket Google manages in the project (created on first use, no
        binding for any of the project's accounts), as Cloud Functions does with a function's source."""
        with self._lock:
            data = self.objects.get((bucket, name))
            if data is not None:  # kept apart from the project's own buckets (state() compares those)
                self.google_objects[(to_bucket, to_name)] = data[0]
        self.policies.create(self._resource(to_bucket), [
            {"role": "roles/storage.legacyBucketOwner", "members": [f"projectOwner:{self.project}"]}])

    def _metadata(self, bucket: str, name: str) -> dict[str, Any]:
        custom = self.custom_metadata.get((bucket, name))
        return {"metadata": custom} if custom else {}

    def _kept(self, key: tuple[str, str]) -> None:
        why = self.kept.get(key)
        if why is None or key not in self.objects:
            return
        name = f"{key[0]}/{key[1]}"
        if why == "retention":
            raise ApiError(403, f"Object '{name}' is subject to bucket's retention policy or object retention and "
                                f"cannot be deleted or overwritten until 2027-01-01T00:00:00Z")
        raise ApiError(403, f"Object '{name}' is under active {why} hold and cannot be deleted, overwritten or "
                            f"archived until hold is removed.")

    def delete_object(self, request: Request) -> tuple[int, Any]:
        self._may(request, "storage.objects.delete")
        key = (request.match["bucket"], request.match["object"])
        with self._lock:
            self._kept(key)
            if self.objects.pop(key, None) is None:
                raise ApiError(404, "No such object.")
        return 204, None
