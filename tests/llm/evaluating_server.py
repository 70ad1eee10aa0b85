"""A scripted OpenAI-protocol server that evaluates prompts the way llama.cpp's servers do (issue 35): one prompt
at a time in arrival order, for a time proportional to its length before the first streamed chunk, and to its
end even when the client has left meanwhile; the prefix it shares with the prompt evaluated before it is not
evaluated again (llama.cpp's prompt cache); answer chunks are streamed and stop as soon as the client has left.

    with EvaluatingServer(chars_per_s=2000) as server:
        server.default("extract", '{"facts": [], "entities": []}')
        ...                                   # engine steps or a whole session against server.base_url
        evaluation = server.evaluations[-1]   # one per request, in arrival order
        evaluation.done.wait(10)              # set when its evaluation ended (or was dropped unbegun)
        evaluation.outlived_client_s          # how long it went on after the client left (0.0: it did not)

The evaluation's time is the server's simulated work (a wait that ends early only when the server stops); every
test waits on `done`, never on the clock. A request whose client left while it queued is dropped unevaluated, as
llama-cpp-python's server drops it. The step and the scripted answers work as in `servers.py`.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from research_tool.engines.prompt_timing import shared_prefix

from .servers import RecordedRequest, ScriptedChatServer, _step_of


@dataclass
class Evaluation:
    request: RecordedRequest
    prompt: str  # all messages' text, in order
    chars: int = 0  # what was evaluated: the prompt after the prefix the previous evaluation left in the cache
    began: float | None = None
    ended: float | None = None
    client_left: float | None = None  # when the client closed the connection (None: it stayed to the end)
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def outlived_client_s(self) -> float:
        """Seconds the evaluation went on after the client had left."""
        if self.client_left is None or self.ended is None:
            return 0.0
        return max(0.0, self.ended - self.client_left)


def _client_gone(connection: socket.socket, timeout: float) -> bool:
    """Whether the client closed its side within `timeout` seconds (readable with nothing to read)."""
    readable, _, _ = select.select([connection], [], [], max(0.0, timeout))
    if not readable:
        return False
    try:
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class EvaluatingServer(ScriptedChatServer):
    """`/v1/chat/completions` (streamed) and `/v1/models`, evaluating each prompt at `chars_per_s` characters a
    second, one at a time; `token_s` between answer chunks."""

    def __init__(self, chars_per_s: float, token_s: float = 0.01) -> None:
        super().__init__()
        self.chars_per_s = chars_per_s
        self.token_s = token_s
        self.evaluations: list[Evaluation] = []
        self._turns = threading.Condition()  # one evaluation at a time, in arrival order
        self._tickets = 0
        self._serving = 0
        self._cached = ""  # the prompt evaluated last

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def evaluate(self, evaluation: Evaluation, ticket: int, connection: socket.socket) -> bool:
        """Evaluate the prompt after the prompts ahead of it, watching for the client leaving. False: dropped
        unbegun, its client gone while it queued."""
        with self._turns:
            self._turns.wait_for(lambda: self._serving == ticket or self._stopping.is_set())
        try:
            if _client_gone(connection, 0.0):
                evaluation.client_left = time.monotonic()
                return False
            evaluation.chars = len(evaluation.prompt) - shared_prefix(evaluation.prompt, self._cached)
            self._cached = evaluation.prompt
            evaluation.began = time.monotonic()
            finish = evaluation.began + evaluation.chars / self.chars_per_s
            while evaluation.client_left is None and time.monotonic() < finish:
                if _client_gone(connection, finish - time.monotonic()):
                    evaluation.client_left = time.monotonic()
            self._stopping.wait(max(0.0, finish - time.monotonic()))  # the evaluation goes on to its end
            evaluation.ended = time.monotonic()
            return True
        finally:
            with self._turns:
                self._serving += 1
                self._turns.notify_all()

    def _skip(self, ticket: int) -> None:
        """A request answered at once (an error) gives up its turn."""
        with self._turns:
            self._turns.wait_for(lambda: self._serving == ticket or self._stopping.is_set())
            self._serving += 1
            self._turns.notify_all()

    def _ticket(self) -> int:
        with self._turns:
            self._tickets += 1
            return self._tickets - 1

    def start(self) -> EvaluatingServer:
        owner = self
        self._stopping.clear()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                payload = json.dumps({"object": "list", "data": [{"id": owner.model_name, "object": "model"}]})
                self._reply(200, "application/json", payload.encode())

            def _reply(self, status: int, content_type: str, payload: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not self.path.split("?")[0].endswith("/chat/completions"):  # as an OpenAI-compatible server
                    self._reply(404, "application/json", b'{"error": {"message": "no such route"}}')
                    return
                body = json.loads(raw or b"{}")
                request = RecordedRequest(path=self.path, step=_step_of(body), body=body, headers=dict(self.headers))
                owner._record(request)
                ticket = owner._ticket()
                reply = owner._next_reply(request)
                prompt = "\n".join(str(m.get("content") or "") for m in body.get("messages", []))
                evaluation = Evaluation(request=request, prompt=prompt)
                owner.evaluations.append(evaluation)
                self.close_connection = True
                try:
                    if reply.status != 200:
                        owner._skip(ticket)
                        error = {"error": {"message": reply.content, "type": "server_error", "code": None}}
                        self._reply(reply.status, "application/json", json.dumps(error).encode())
                        return
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.flush()
                    if owner.evaluate(evaluation, ticket, self.connection):
                        self._stream(reply.content, body)
                except OSError:
                    if evaluation.client_left is None:
                        evaluation.client_left = time.monotonic()
                finally:
                    evaluation.done.set()

            def _stream(self, content: str, body: dict[str, Any]) -> None:
                base = {"id": "chatcmpl-eval", "object": "chat.completion.chunk", "created": 0, "model": "m"}
                deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
                deltas += [{"content": content[i : i + 8]} for i in range(0, len(content), 8)]
                for delta in deltas:
                    if owner._stopping.is_set():
                        return
                    event = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                    owner._stopping.wait(owner.token_s)  # the time one answer token takes
                last = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
                self.wfile.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())
                self.wfile.flush()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="EvaluatingServer", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._turns:
            self._turns.notify_all()
        super().stop()
        for evaluation in self.evaluations:
            evaluation.done.set()

    def __enter__(self) -> EvaluatingServer:
        return self.start()
