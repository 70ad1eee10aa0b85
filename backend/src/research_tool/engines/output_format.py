"""How a chat server is asked for a JSON answer: the strongest form it supports, detected once per server (issue 35).

The forms, strongest first (`RESEARCH_LLM_STRUCTURED_OUTPUT` picks one; `auto`, the default, detects):
- `json_schema`: OpenAI's `response_format: {"type": "json_schema", "json_schema": {name, schema, strict}}`
  (OpenAI, vLLM, llama.cpp's C++ server);
- `json_object`: `response_format: {"type": "json_object", "schema": {...}}`, the form llama-cpp-python's server
  turns into a grammar (it answers HTTP 500 to `json_schema`);
- `ollama`: Ollama's `format` set to the JSON Schema;
- `prompt`: no constraint, the schema is described in the prompt and the answer parsed and repaired (as before).

`auto` starts an OpenAI-compatible server at `json_schema` and an Ollama server at `ollama`. A server that refuses
a form (an HTTP 400, 404, 415, 422, 500 or 501 to the first request that carried it) is asked again at once in
the next form, and the form that worked is remembered for that server (base URL and model) for the life of the
process. A form that has worked once is never given up on a later error: that error is the server's, not the
form's. Anthropic is asked in prose (`prompt`).

A grammar makes the answer parse, not make sense: a small model fills it with the schema's own words
(`{"refined_query": "string"}`). `structured_output.placeholder_problem` refuses those.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from research_tool.core.logging import get_logger
from research_tool.engines.chat_template import forget_template_checks
from research_tool.engines.prompt_timing import PromptTiming, forget_timings

log = get_logger(__name__)

OutputForm = Literal["json_schema", "json_object", "ollama", "prompt"]
FORMS: tuple[OutputForm, ...] = ("json_schema", "json_object", "ollama", "prompt")
FORM_SETTINGS = ("auto", *FORMS)
OPENAI_FORMS: tuple[OutputForm, ...] = ("json_schema", "json_object", "prompt")
OLLAMA_FORMS: tuple[OutputForm, ...] = ("ollama", "prompt")
REFUSAL_STATUSES = frozenset({400, 404, 415, 422, 500, 501})


def response_format(form: OutputForm, schema: type[BaseModel]) -> dict[str, Any] | None:
    """The OpenAI-protocol `response_format` for a form (None for `prompt` and `ollama`)."""
    body = schema.model_json_schema()
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": body, "strict": False}}
    if form == "json_object":
        return {"type": "json_object", "schema": body}
    return None


def status_of(error: BaseException) -> int | None:
    """The HTTP status of a client error (openai's `APIStatusError`, ollama's `ResponseError`), if it has one."""
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        return status
    response = getattr(error, "response", None)
    status = getattr(response, "status_code", None)
    return status if isinstance(status, int) else None


@dataclass
class ServerFormat:
    """One server's structured-output form: the candidates left (strongest first) and whether the current one
    has been answered with HTTP 200 at least once (then it is kept)."""

    key: str
    candidates: list[OutputForm]
    confirmed: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def form(self) -> OutputForm:
        return self.candidates[0]

    def confirm(self) -> None:
        if not self.confirmed:
            self.confirmed = True
            log.info("llm_output_form", server=self.key, form=self.form)

    def refused(self, form: OutputForm, error: BaseException) -> bool:
        """The server answered `error` to a request in `form`: when that reads as a refusal of the form (an
        unconfirmed, non-`prompt` form and a refusal status), move to the next form and say True (ask again)."""
        status = status_of(error)
        with self._lock:
            if form != self.form:
                return True  # another call already moved on: ask again in the current form
            if self.confirmed or form == "prompt" or status not in REFUSAL_STATUSES or len(self.candidates) < 2:
                return False
            self.candidates.pop(0)
        log.warning("llm_output_form_refused", server=self.key, refused=form, status=status, next=self.form)
        return True


_REMEMBERED: dict[str, ServerFormat] = {}
_REMEMBERED_LOCK = threading.Lock()


def server_format(key: str, setting: str, default: tuple[OutputForm, ...]) -> ServerFormat:
    """The form state of the server `key` (provider, base URL and model): one per process, so a form detected
    by one session is used by the next. `setting` is `auto` (detect, starting from `default`) or a fixed form."""
    if setting != "auto":
        return ServerFormat(key=key, candidates=[setting], confirmed=True)  # type: ignore[list-item]
    with _REMEMBERED_LOCK:
        found = _REMEMBERED.get(key)
        if found is None:
            found = _REMEMBERED[key] = ServerFormat(key=key, candidates=list(default))
        return found


def forget_servers() -> None:
    """Drop every remembered form, prompt timing and chat-template check (tests that restart a server on the same
    address)."""
    with _REMEMBERED_LOCK:
        _REMEMBERED.clear()
    forget_timings()
    forget_template_checks()


@dataclass(frozen=True)
class ChatRequests:
    """What the engine adds to every chat call to one server: the output cap in the field the server reads
    (`extra_body`, OpenAI protocol only) and the structured-output form (`server`); and how fast the server
    evaluates prompts (`timing`, `prompt_timing`)."""

    provider: Literal["openai", "ollama", "anthropic"]
    server: ServerFormat
    extra_body: dict[str, Any] = field(default_factory=dict)
    timing: PromptTiming = field(default_factory=PromptTiming)

    def kwargs(self, form: OutputForm, schema: type[BaseModel], *, max_tokens: int | None = None) -> dict[str, Any]:
        """Keyword arguments for the chat model's `astream` for one call in `form`; `max_tokens`: a smaller
        answer cap than the client's own for this call (OpenAI protocol: both fields the servers read)."""
        if self.provider == "openai":
            body = dict(self.extra_body)
            shape = response_format(form, schema)
            if shape is not None:
                body["response_format"] = shape
            if max_tokens is not None and "max_tokens" in body:
                body["max_tokens"] = max_tokens
            capped: dict[str, Any] = {"max_tokens": max_tokens} if max_tokens is not None else {}
            return ({"extra_body": body} if body else {}) | capped
        if self.provider == "ollama" and form == "ollama":
            return {"format": schema.model_json_schema()}
        return {}


def prompt_only(key: str = "prompt") -> ChatRequests:
    """No constraint and nothing added: the engine's behaviour before issue 35 (tests, Anthropic)."""
    return ChatRequests(provider="anthropic", server=ServerFormat(key=key, candidates=["prompt"], confirmed=True))
