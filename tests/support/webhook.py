"""A real HTTP receiver for Alertmanager's webhook notifications, one list per path.

Alertmanager POSTs a JSON document ``{receiver, status, alerts: [{status, labels,
annotations, startsAt, ...}], ...}`` per notification; each path (``/team-a``) stands for
one receiver, so a test can tell which receiver a notification was routed to.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class WebhookReceiver:
    """Listens on 127.0.0.1 (a free port); :meth:`url` gives one address per receiver path."""

    def __init__(self) -> None:
        self.notifications: dict[str, list[dict]] = {}
        lock = threading.Lock()
        received = self.notifications

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    received.setdefault(self.path, []).append(body)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        """The webhook URL of one receiver path, e.g. ``url("/team-a")``."""
        return f"{self.base}{path}"

    def alerts(self, path: str, status: str = "firing") -> list[dict]:
        """Every alert with ``status`` that arrived at ``path``, in arrival order."""
        return [a for note in list(self.notifications.get(path, [])) for a in note["alerts"] if a["status"] == status]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
