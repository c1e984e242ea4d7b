"""Cloud Functions entry points: start_job (Pub/Sub), job_done and credentials (HTTP), sweep (Pub/Sub), and
dispatch (Pub/Sub, deployed only with `scheduling: shared`).

Thin on purpose: parse the request, call the library. Heavy Google clients are imported on
first use inside the adapters, so a cold start pays only for what it touches.
"""

from __future__ import annotations

import functions_framework

from spotcron.runtime import entrypoints
from spotcron.runtime.structured_log import configure_json_logging

configure_json_logging()


@functions_framework.cloud_event
def start_job(cloud_event):
    entrypoints.handle_start(cloud_event.data, _event_time(cloud_event))


@functions_framework.cloud_event
def sweep(cloud_event):
    entrypoints.handle_sweep()


@functions_framework.cloud_event
def dispatch(cloud_event):
    entrypoints.handle_dispatch(cloud_event.data)


@functions_framework.http
def credentials(request):
    if request.method != "POST":
        return {"error": "POST only"}, 405
    return entrypoints.handle_credentials(request.headers.get("Authorization"))


@functions_framework.http
def job_done(request):
    if request.method != "POST":
        return {"error": "POST only"}, 405
    # Not request.get_json: the json module recurses on nesting. The bounded parser never raises.
    body = entrypoints.callback_body(request.stream)
    return entrypoints.handle_job_done(request.headers.get("Authorization"), body)


def _event_time(cloud_event):
    from datetime import datetime

    raw = cloud_event.get("time") if hasattr(cloud_event, "get") else None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")) if raw else None
    except ValueError:
        return None
