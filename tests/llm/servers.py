"""Scripted model servers for tests: real HTTP on 127.0.0.1 speaking OpenAI's and Ollama's chat protocols.

The real langchain clients (`ChatOpenAI` over the `openai` SDK, `ChatOllama` over the `ollama` client) talk to
these servers exactly as they would to the real ones; only the answers are scripted.

    with OpenAIServer() as server:                      # or: with OllamaServer(models=["llama3"]) as server
        server.script("plan", "not json", '{"queries": [{"query": "q", "intent": "i"}]}')
        server.default("extract", '{"facts": [], "entities": []}')
        settings = Settings(llm="openai:test-model", openai_base_url=server.base_url)
        ...                                             # run engine steps or a whole session
        assert len(server.requests_for("plan")) == 2    # recorded requests, in order

API
- `script(step, *answers)`: queue answers for a step, consumed one per request in order. An answer is a
  string (the message content), a `Reply` (content, token counts, HTTP status), or a function of the
  `RecordedRequest` returning either (answers built from the prompt: see `scripted_answers.py`).
- `default(step, answer)`: the answer for a step whose queue is empty (repeated as often as asked).
  `default("*", answer)` covers every step. A step with neither answers HTTP 500, so the engine degrades it.
  `scripted_answers.script_session(server)` sets valid defaults for every step (a whole session).
- `requests` / `requests_for(step)`: every chat request received (`RecordedRequest`: path, step, parsed
  JSON body, headers), in arrival order; `system_text` and `user_text` give the prompt sent.
- `base_url`: what to put in `OPENAI_BASE_URL` (ends in `/v1`) or `OLLAMA_BASE_URL`.
- `usage`: the (prompt, completion) token counts a plain-string answer reports (default 120, 30).

Misbehaving the way real deployments do (issue 14), per `Reply`:
- `Reply(content, trickle_s=2.0, trickle_bytes=1)`: the response is written `trickle_bytes` at a time, one piece
  every `trickle_s` seconds (a client's read timeout, which bounds the gap between bytes, never fires);
- `Reply(content, hang=True)` / `HANG`: headers never come; the handler waits until the server stops;
- `huge_answer(sentence, times)`, `Reply("not json")`, `Reply(..., status=500)`: a huge answer, invalid JSON,
  a server error.
- `OpenAIServer(refuse_formats=frozenset({"json_schema"}))`: answers HTTP 500 (`refusal_status`) to a request whose
  `response_format` has a refused type, as llama-cpp-python's server does to `json_schema` (issue 35);
- `RecordedRequest.disconnected`: set when the client closed the connection during a trickled answer.
- `start()` / `stop()`, or use the server as a context manager.
- `unused_port()`: a port on 127.0.0.1 with nothing listening (for the "server is down" tests).

The step of a request is read from the first line of its system message, `Research Tool step: <step>.`,
which every LLM engine prompt starts with.

Protocol shapes (what the clients parse):
- OpenAI `POST /v1/chat/completions` -> `{"id", "object": "chat.completion", "created", "model", "choices":
  [{"index": 0, "message": {"role": "assistant", "content"}, "logprobs": null, "finish_reason": "stop"}],
  "usage": {"prompt_tokens", "completion_tokens", "total_tokens"}}`; with `"stream": true`, Server-Sent Events
  of `chat.completion.chunk` objects ending in `data: [DONE]` (usage in a last chunk when
  `stream_options.include_usage`). `GET /v1/models` -> `{"object": "list", "data": [{"id", "object": "model",
  ...}]}`. Errors: `{"error": {"message", "type", "code"}}`.
- Ollama `POST /api/chat` (streams by default) -> NDJSON lines `{"model", "created_at", "message": {"role":
  "assistant", "content"}, "done": false}` and a final `{"done": true, "done_reason": "stop", "message":
  {"role": "assistant", "content": ""}, "total_duration", "load_duration", "prompt_eval_count",
  "prompt_eval_duration", "eval_count", "eval_duration"}`; with `"stream": false` one object with the whole
  content and the counts. `GET /api/tags` -> `{"models": [{"name", "model", "modified_at", "size", "digest",
  "details"}]}`. Errors: `{"error": "message"}`.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STEP_PATTERN = re.compile(r"Research Tool step: (\w+)\.")
ANY_STEP = "*"


@dataclass(frozen=True)
class Reply:
    """One scripted answer. A `status` other than 200 sends the protocol's error body instead."""

    content: str
    prompt_tokens: int = 120
    completion_tokens: int = 30
    status: int = 200
    usage: bool = True  # False: the server reports no token counts
    trickle_s: float = 0.0  # > 0: write the response `trickle_bytes` at a time, this many seconds apart
    trickle_bytes: int = 1
    hang: bool = False  # never answer (until the server stops)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass
class RecordedRequest:
    path: str
    step: str | None
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    reply: Reply | None = None  # the scripted reply it got (its pacing is read by the HTTP handler)
    received: float = field(default_factory=time.monotonic)  # when it arrived (time.monotonic)
    # set when the client closed the connection before a trickled answer was all written (a cancelled call)
    disconnected: threading.Event = field(default_factory=threading.Event)

    def _texts(self, role: str) -> list[str]:
        texts = []
        for message in self.body.get("messages", []):
            if message.get("role") != role:
                continue
            content = message.get("content")
            if isinstance(content, list):
                content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
            texts.append(str(content or ""))
        return texts

    @property
    def system_text(self) -> str:
        return "\n".join(self._texts("system"))

    @property
    def user_text(self) -> str:
        """All user messages joined (the prompt, then any retry instruction)."""
        return "\n".join(self._texts("user"))

    @property
    def user_messages(self) -> list[str]:
        return self._texts("user")


HANG = Reply(content="", hang=True)


def huge_answer(sentence: str, times: int) -> str:
    """A synthesis answer of one sentence said `times` times (200 KB at times=1851 for a 108-char sentence)."""
    answer = " ".join([sentence] * times)
    return json.dumps({"answer": answer, "findings": [], "gaps": []})


def unused_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


AnswerFunction = Callable[[RecordedRequest], "str | Reply"]


def _as_reply(answer: str | Reply, usage: tuple[int, int]) -> Reply:
    return (
        answer
        if isinstance(answer, Reply)
        else Reply(content=answer, prompt_tokens=usage[0], completion_tokens=usage[1])
    )


def _step_of(body: dict[str, Any]) -> str | None:
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        found = STEP_PATTERN.search(str(content or ""))
        if found:
            return found.group(1)
    return None


class ScriptedChatServer:
    """The scripting, recording and HTTP plumbing both protocol servers share."""

    model_name = "test-model"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, deque[Any]] = {}
        self._defaults: dict[str, Any] = {}
        self.requests: list[RecordedRequest] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()  # releases hanging and trickling handlers
        self.usage: tuple[int, int] = (120, 30)

    # --- scripting ---------------------------------------------------------------------------------------

    def script(self, step: str, *answers: str | Reply | AnswerFunction) -> None:
        """Queue answers (`str`, `Reply`, or a function of the `RecordedRequest` returning either)."""
        with self._lock:
            self._queues.setdefault(step, deque()).extend(answers)

    def default(self, step: str, answer: str | Reply | AnswerFunction) -> None:
        with self._lock:
            self._defaults[step] = answer

    def pending(self, step: str) -> int:
        """Scripted answers for `step` not yet consumed."""
        with self._lock:
            return len(self._queues.get(step, ()))

    def requests_for(self, step: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.step == step]

    def _next_reply(self, request: RecordedRequest) -> Reply:
        step = request.step or ""
        with self._lock:
            queue = self._queues.get(step)
            answer = queue.popleft() if queue else self._defaults.get(step) or self._defaults.get(ANY_STEP)
        if answer is None:
            reply = Reply(content=f"no scripted answer for step {request.step}", status=500)
        else:
            reply = _as_reply(answer(request) if callable(answer) else answer, self.usage)
        request.reply = reply
        return reply

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    # --- protocol hooks ------------------------------------------------------------------------------------

    def handle_get(self, path: str) -> tuple[int, str, bytes]:
        raise NotImplementedError

    def handle_post(self, path: str, request: RecordedRequest) -> tuple[int, str, bytes]:
        raise NotImplementedError

    # --- lifecycle -----------------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._httpd is not None, "start the server first"
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ScriptedChatServer:
        owner = self
        self._stopping.clear()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _send(
                self,
                status: int,
                content_type: str,
                payload: bytes,
                pace: Reply | None = None,
                request: RecordedRequest | None = None,
            ) -> None:
                if pace is not None and pace.hang:
                    owner._stopping.wait()
                    return
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if pace is None or pace.trickle_s <= 0:
                    self.wfile.write(payload)
                    return
                step = max(1, pace.trickle_bytes)
                try:
                    for start in range(0, len(payload), step):
                        self.wfile.write(payload[start : start + step])
                        self.wfile.flush()
                        if owner._stopping.wait(pace.trickle_s):
                            return
                except OSError:
                    if request is not None:
                        request.disconnected.set()
                    return  # the client gave up (the whole-call timeout cancelled it)

            def do_GET(self) -> None:
                self._send(*owner.handle_get(self.path.split("?")[0]))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, "application/json", b'{"error": "body is not JSON"}')
                    return
                path = self.path.split("?")[0]
                request = RecordedRequest(path=path, step=_step_of(body), body=body, headers=dict(self.headers.items()))
                owner._record(request)
                self._send(*owner.handle_post(path, request), pace=request.reply, request=request)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name=type(self).__name__, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ScriptedChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _json(status: int, payload: Any) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(payload).encode()


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [part for part in (text[:middle], text[middle:]) if part]


class OpenAIServer(ScriptedChatServer):
    """`/v1/chat/completions` and `/v1/models`, as OpenAI and every OpenAI-compatible server speak them.

    `refuse_formats`: the `response_format` types answered with `refusal_status` (llama-cpp-python's server
    answers HTTP 500 to `json_schema`; a plain server may refuse `json_object` too), as the real servers do,
    before any answer is consumed."""

    def __init__(self, refuse_formats: frozenset[str] = frozenset(), refusal_status: int = 500) -> None:
        super().__init__()
        self.refuse_formats = refuse_formats
        self.refusal_status = refusal_status

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def handle_get(self, path: str) -> tuple[int, str, bytes]:
        if path == "/v1/models":
            model = {"id": self.model_name, "object": "model", "created": 1700000000, "owned_by": "test"}
            return _json(200, {"object": "list", "data": [model]})
        return _json(404, {"error": {"message": f"no route {path}", "type": "invalid_request_error", "code": None}})

    def handle_post(self, path: str, request: RecordedRequest) -> tuple[int, str, bytes]:
        if path != "/v1/chat/completions":
            return _json(404, {"error": {"message": f"no route {path}", "type": "invalid_request_error", "code": None}})
        body = request.body
        shape = (body.get("response_format") or {}).get("type")
        if shape in self.refuse_formats:
            error = {"message": f"response_format {shape} is not supported", "type": "server_error", "code": None}
            return _json(self.refusal_status, {"error": error})
        reply = self._next_reply(request)
        if reply.status != 200:
            error = {"message": reply.content, "type": "server_error", "code": None}
            return _json(reply.status, {"error": error})
        model = body.get("model", self.model_name)
        created = int(time.time())
        usage = {
            "prompt_tokens": reply.prompt_tokens,
            "completion_tokens": reply.completion_tokens,
            "total_tokens": reply.total_tokens,
        }
        if body.get("stream"):
            return 200, "text/event-stream", self._sse(reply, model, created, usage, body)
        completion: dict[str, Any] = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": created,
            "model": model,
            "system_fingerprint": "fp_test",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
        }
        if reply.usage:
            completion["usage"] = usage
        return _json(200, completion)

    def _sse(self, reply: Reply, model: str, created: int, usage: dict[str, int], body: dict[str, Any]) -> bytes:
        base = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
        }
        events = [
            {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
        ]
        events += [
            {**base, "choices": [{"index": 0, "delta": {"content": part}, "finish_reason": None}]}
            for part in _halves(reply.content)
        ]
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if reply.usage and (body.get("stream_options") or {}).get("include_usage"):
            events.append({**base, "choices": [], "usage": usage})
        lines = [f"data: {json.dumps(event)}\n\n" for event in events] + ["data: [DONE]\n\n"]
        return "".join(lines).encode()


class OllamaServer(ScriptedChatServer):
    """`/api/chat` (NDJSON stream or one object), `/api/tags` and `/api/version`, as Ollama speaks them."""

    def __init__(self, models: list[str] | None = None) -> None:
        super().__init__()
        self.models = list(models if models is not None else [f"{self.model_name}:latest"])

    def handle_get(self, path: str) -> tuple[int, str, bytes]:
        if path == "/api/tags":
            models = [
                {
                    "name": name,
                    "model": name,
                    "modified_at": "2025-01-01T00:00:00Z",
                    "size": 1000,
                    "digest": "0" * 64,
                    "details": {
                        "format": "gguf",
                        "family": "test",
                        "parameter_size": "1B",
                        "quantization_level": "Q4_0",
                    },
                }
                for name in self.models
            ]
            return _json(200, {"models": models})
        if path == "/api/version":
            return _json(200, {"version": "0.6.0"})
        return _json(404, {"error": f"no route {path}"})

    def handle_post(self, path: str, request: RecordedRequest) -> tuple[int, str, bytes]:
        if path != "/api/chat":
            return _json(404, {"error": f"no route {path}"})
        body = request.body
        reply = self._next_reply(request)
        if reply.status != 200:
            return _json(reply.status, {"error": reply.content})
        model = body.get("model", self.model_name)
        created_at = "2025-01-01T00:00:00.000000Z"
        final: dict[str, Any] = {
            "model": model,
            "created_at": created_at,
            "message": {"role": "assistant", "content": ""},
            "done_reason": "stop",
            "done": True,
            "total_duration": 5_000_000,
            "load_duration": 1_000_000,
        }
        if reply.usage:
            final |= {
                "prompt_eval_count": reply.prompt_tokens,
                "prompt_eval_duration": 1_000_000,
                "eval_count": reply.completion_tokens,
                "eval_duration": 2_000_000,
            }
        if body.get("stream", True) is False:
            return _json(200, {**final, "message": {"role": "assistant", "content": reply.content}})
        chunks = [
            {"model": model, "created_at": created_at, "message": {"role": "assistant", "content": part}, "done": False}
            for part in _halves(reply.content)
        ]
        lines = "".join(json.dumps(chunk) + "\n" for chunk in [*chunks, final])
        return 200, "application/x-ndjson", lines.encode()
