"""`spotcron run` while `spotcron up` runs: the run is handed to the running stack.

One local stack owns a state dir (its lock), so a second one cannot start beside `up`. Instead
`up` listens on 127.0.0.1 for run requests and writes where, with a random token, to
STATE_DIR/handoff.json (readable by its owner only). `spotcron run` posts the job's payload
there, gets the run ids back, and follows the runs to their end by asking the same `up` for
their records (a second reader of the local bucket's files could see them half-written).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from spotcron.core.errors import SpotcronError

log = logging.getLogger("spotcron.local")

HANDOFF_FILE = "handoff.json"
MAX_BODY = 1 << 20

# payload (the spec as start messages carry it) → the (job, run_id) started
Start = Callable[[dict[str, Any]], list[tuple[str, str]]]
Read = Callable[[str, str], Any]  # (job, run_id) → RunRecord or None


class HandoffServer:
    def __init__(self, state_dir: Path, start: Start, read: Read):
        self.path = Path(state_dir) / HANDOFF_FILE
        self.token = secrets.token_hex(16)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                if self.path not in ("/run", "/records"):
                    return self._answer(404, {"error": "not found"})
                if not secrets.compare_digest(self.headers.get("Authorization", ""), f"Bearer {server.token}"):
                    return self._answer(403, {"error": "wrong token"})
                length = int(self.headers.get("Content-Length") or 0)
                if length > MAX_BODY:
                    return self._answer(413, {"error": "too large"})
                try:
                    payload = json.loads(self.rfile.read(length))
                    if self.path == "/records":
                        found = [read(str(job), str(run_id)) for job, run_id in payload["runs"]]
                        return self._answer(200, {"records": [r.model_dump(mode="json") if r else None
                                                              for r in found]})
                    runs = start(payload)
                except SpotcronError as exc:
                    return self._answer(400, {"error": str(exc)})
                except Exception as exc:  # noqa: BLE001 - tell the caller, keep serving
                    log.exception("handing off a run failed")
                    return self._answer(500, {"error": f"{type(exc).__name__}: {exc}"})
                self._answer(200, {"runs": [list(r) for r in runs]})

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - no request lines on screen
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="spotcron-handoff", daemon=True)

    def start(self) -> HandoffServer:
        self._thread.start()
        descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            json.dump({"url": self.url, "token": self.token, "pid": os.getpid()}, handle)
        return self

    def stop(self) -> None:
        try:
            if json.loads(self.path.read_text()).get("token") == self.token:
                self.path.unlink()
        except (OSError, ValueError):
            pass
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


def _where(state_dir: Path) -> dict[str, Any] | None:
    try:
        where = json.loads((Path(state_dir) / HANDOFF_FILE).read_text())
        return where if isinstance(where.get("url"), str) and isinstance(where.get("token"), str) else None
    except (OSError, ValueError, AttributeError):
        return None


def _post(where: dict[str, Any], path: str, body: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """The answer of the `up` at `where`; None when nothing listens there (an `up` that died)."""
    import requests

    try:
        answer = requests.post(where["url"] + path, json=body, timeout=timeout,
                               headers={"Authorization": f"Bearer {where['token']}"})
    except requests.ConnectionError:
        return None
    data = answer.json() if answer.headers.get("Content-Type", "").startswith("application/json") else {}
    if answer.status_code != 200:
        raise SpotcronError(f"the running `spotcron up` (pid {where.get('pid', '?')}) refused the run: "
                            f"{data.get('error') or answer.status_code}")
    return data


def hand_off(state_dir: Path, payload: dict[str, Any], timeout: float = 90.0) -> list[tuple[str, str]] | None:
    """Start the runs on the `up` that owns `state_dir`; None when no `up` takes requests there."""
    where = _where(state_dir)
    answer = _post(where, "/run", payload, timeout) if where else None
    return None if answer is None else [(job, run_id) for job, run_id in answer["runs"]]


def read_records(state_dir: Path, runs: list[tuple[str, str]], timeout: float = 30.0) -> list[Any]:
    """The records of `runs`, as the `up` that owns `state_dir` reads them (None for one not found)."""
    from spotcron.core.runs import RunRecord

    where = _where(state_dir)
    answer = _post(where, "/records", {"runs": [list(r) for r in runs]}, timeout) if where else None
    if answer is None:
        raise SpotcronError(f"the `spotcron up` using {state_dir}/ stopped while its runs went on; "
                            "`spotcron runs` shows where they ended")
    return [RunRecord.model_validate(r) if r else None for r in answer["records"]]
