"""A real OpenAI-compatible chat endpoint on 127.0.0.1 (``http.server`` in a thread) for the backend
tests: each POST is answered by ``respond(headers, n)`` (``n`` counts the requests from 1) with a status
and a JSON body, or not at all when it returns ``None`` (a server that hangs or dies); :func:`chat_completion`
is a 200 answer's body."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def chat_completion(content: str) -> dict[str, Any]:
    """The body of a chat completion whose answer is ``content``."""
    return {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


class ChatServer:
    """Serves until :meth:`close`; ``url`` is its ``/v1`` base URL, ``requests`` the POSTs so far."""

    def __init__(self, respond: Callable[[Any, int], tuple[int, dict] | None]):
        self.requests = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                server.requests += 1
                answer = respond(self.headers, server.requests)
                if answer is None:
                    self.close_connection = True
                    return
                code, body = answer
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self._closed = False
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        if not self._closed:
            self._closed = True
            self.httpd.shutdown()
            self.httpd.server_close()
