"""A webhook receiver for trying notifications on one machine (`spotcron notify listen`).

It answers every POST with 200 and hands each body to `show`: a notification's text when the body
is one of ours (generic JSON `text`, Slack `text`, Discord `content`, the last two as their chat
shows them), else the raw body, cut to 4 KiB. It listens on the loopback interface only, so nothing but this machine can post to it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY = 64 << 10
ID_HEADER = "X-Spotcron-Notification-Id"


def readable(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body[:4096].decode("utf-8", "replace")
    if isinstance(data, dict):
        # A chat's body is escaped for it (engine/notify_markup.py): shown as that chat shows it.
        from spotcron.engine.notify_markup import discord_shown, slack_shown

        if isinstance(data.get("content"), str):
            return discord_shown(data["content"])
        if isinstance(data.get("text"), str):
            return data["text"] if "id" in data else slack_shown(data["text"])
    return json.dumps(data, indent=2)[:4096]


class Receiver:
    def __init__(self, show: Callable[[str, str, str], None], port: int = 0, host: str = "127.0.0.1"):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
                body = self.rfile.read(length)
                self.send_response(200)
                self.end_headers()
                receiver.count += 1
                show(self.path, self.headers.get(ID_HEADER) or "", readable(body))

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
                pass

        self.count = 0
        self.server = ThreadingHTTPServer((host, port), Handler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/"

    def start(self) -> Receiver:
        self._thread = threading.Thread(target=self.server.serve_forever, name="spotcron-receiver", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.server.serve_forever()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
