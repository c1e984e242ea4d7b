"""Fake Cloud Scheduler v1 (REST): jobs list/create/patch/delete/pause/resume, and run.

`jobs:run` dispatches the entry now, "even if the job is already running" (Google's reference for
projects.locations.jobs.run): the fake records the Pub/Sub message the entry would publish
(`fired`) and answers the job.
"""

from __future__ import annotations

import base64
import threading
from typing import Any

from google.cloud import scheduler_v1

from tests.fakes.deploy.common import canonical, json_copy, page
from tests.fakes.deploy.http import ApiError, Request, Router

PARENT = r"/v1/(?P<parent>projects/[^/]+/locations/[^/]+)"
_OUTPUT_ONLY = ("state", "userUpdateTime", "status", "scheduleTime", "lastAttemptTime")


def _camel(path: str) -> str:
    head, *rest = path.split("_")
    return head + "".join(part.title() for part in rest)


class FakeScheduler:
    def __init__(self, topic_exists: Any):
        self.jobs: dict[str, dict[str, Any]] = {}
        # Called with each entry's name as it is created: tests look at the rest of the stack then.
        self.on_create: list[Any] = []
        self._lock = threading.Lock()
        self._topic_exists = topic_exists
        self.fired: list[tuple[str, str, bytes]] = []  # (entry name, topic, data) per jobs:run

    def routes(self, router: Router) -> None:
        api = "scheduler"
        router.add("GET", f"{PARENT}/jobs", api, self.list)
        router.add("POST", f"{PARENT}/jobs", api, self.create)
        router.add("GET", f"{PARENT}/jobs/(?P<job>[^/:]+)", api, self.get)  # deploy never gets; the bench's baseline does
        router.add("PATCH", f"{PARENT}/jobs/(?P<job>[^/:]+)", api, self.patch)
        router.add("DELETE", f"{PARENT}/jobs/(?P<job>[^/:]+)", api, self.delete)
        router.add("POST", f"{PARENT}/jobs/(?P<job>[^/:]+):pause", api, lambda r: self.set_state(r, "PAUSED"))
        router.add("POST", f"{PARENT}/jobs/(?P<job>[^/:]+):resume", api, lambda r: self.set_state(r, "ENABLED"))
        router.add("POST", f"{PARENT}/jobs/(?P<job>[^/:]+):run", api, self.run)

    def _validate(self, job: dict[str, Any]) -> None:
        if not job.get("schedule"):
            raise ApiError(400, "Schedule is required.")
        if not job.get("timeZone"):
            raise ApiError(400, "Time zone is required.")
        target = job.get("pubsubTarget")
        if not target or not target.get("topicName"):
            raise ApiError(400, "A target is required.")
        if not self._topic_exists(target["topicName"]):
            raise ApiError(404, f"Topic {target['topicName']} not found.")
        if not target.get("data") and not target.get("attributes"):
            raise ApiError(400, "Pubsub message must contain either non-empty data, or at least one attribute.")

    def list(self, request: Request) -> tuple[int, Any]:
        parent = request.match["parent"]
        with self._lock:
            items = [json_copy(j) for name, j in sorted(self.jobs.items()) if name.startswith(parent + "/jobs/")]
        return 200, page(items, request.query, "jobs", max_size=500)

    def create(self, request: Request) -> tuple[int, Any]:
        job = canonical(scheduler_v1.Job.pb(), request.json())
        for key in _OUTPUT_ONLY:
            job.pop(key, None)  # output-only: a paused job is created ENABLED and paused afterwards
        name = job.get("name", "")
        if not name.startswith(request.match["parent"] + "/jobs/"):
            raise ApiError(400, f"Job name {name!r} is not under {request.match['parent']}.")
        self._validate(job)
        with self._lock:
            if name in self.jobs:
                raise ApiError(409, f"Job {name} already exists.")
            job["state"] = "ENABLED"
            self.jobs[name] = job
        for observe in self.on_create:
            observe(name)
        with self._lock:
            return 200, json_copy(job)

    def get(self, request: Request) -> tuple[int, Any]:
        name = f"{request.match['parent']}/jobs/{request.match['job']}"
        with self._lock:
            if name not in self.jobs:
                raise ApiError(404, f"Job {name} not found.")
            return 200, json_copy(self.jobs[name])

    def patch(self, request: Request) -> tuple[int, Any]:
        name = f"{request.match['parent']}/jobs/{request.match['job']}"
        body = canonical(scheduler_v1.Job.pb(), request.json())
        mask = [_camel(p) for p in request.query.get("updateMask", "").split(",") if p]
        if not mask:
            raise ApiError(400, "update_mask is required by this fake (deploy always sends one).")
        with self._lock:
            if name not in self.jobs:
                raise ApiError(404, f"Job {name} not found.")
            job = json_copy(self.jobs[name])
            for path in mask:
                if path in _OUTPUT_ONLY:
                    raise ApiError(400, f"{path} is output only.")
                if path in body:
                    job[path] = body[path]
                else:
                    job.pop(path, None)
            self._validate(job)
            self.jobs[name] = job
            return 200, json_copy(job)

    def delete(self, request: Request) -> tuple[int, Any]:
        name = f"{request.match['parent']}/jobs/{request.match['job']}"
        with self._lock:
            if self.jobs.pop(name, None) is None:
                raise ApiError(404, f"Job {name} not found.")
        return 200, {}

    def set_state(self, request: Request, state: str) -> tuple[int, Any]:
        name = f"{request.match['parent']}/jobs/{request.match['job']}"
        with self._lock:
            if name not in self.jobs:
                raise ApiError(404, f"Job {name} not found.")
            self.jobs[name]["state"] = state
            return 200, json_copy(self.jobs[name])

    def run(self, request: Request) -> tuple[int, Any]:
        name = f"{request.match['parent']}/jobs/{request.match['job']}"
        with self._lock:
            if name not in self.jobs:
                raise ApiError(404, f"Job {name} not found.")
            job = self.jobs[name]
            target = job["pubsubTarget"]
            self.fired.append((name, target["topicName"], base64.b64decode(target.get("data", ""))))
            return 200, json_copy(job)

    # --- for assertions -----------------------------------------------------------------------

    def data(self, entry: str) -> bytes:
        job = next(j for name, j in self.jobs.items() if name.endswith("/jobs/" + entry))
        return base64.b64decode(job["pubsubTarget"]["data"])

    def entries(self) -> dict[str, dict[str, Any]]:
        return {name.rsplit("/", 1)[-1]: json_copy(job) for name, job in self.jobs.items()}
