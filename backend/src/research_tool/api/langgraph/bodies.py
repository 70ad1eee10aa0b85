"""The request bodies of LangGraph's server protocol, as the official SDKs send them (langgraph-sdk 0.4 and
@langchain/langgraph-sdk): every field they may send is named, so a typo is a 422; the fields that mean
nothing here (webhooks, tracing, checkpoints to fork from) are accepted and ignored.

`research_request` turns a run's input (the fields of POST /api/research/start, or chat `messages`), with
options from its `context` or `config.configurable`, into the ResearchRequest a session runs.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from research_tool.api.errors import ApiError
from research_tool.core.json_shape import json_depth
from research_tool.core.untrusted_text import refuse_unsafe
from research_tool.models.api import clarification_answers
from research_tool.models.request import ResearchRequest

GRAPH_ID = "research"
STREAM_MODES = ("values", "updates", "custom", "messages-tuple", "debug")
OUTPUT_KEYS = frozenset(
    {"answer", "short_answer", "answered", "citations", "findings", "stop_reason", "status", "refined_query", "report"}
)
REQUEST_FIELDS = frozenset(ResearchRequest.model_fields)
StreamModeName = Literal["values", "updates", "custom", "messages-tuple", "debug"]
MultitaskStrategy = Literal["reject", "enqueue", "interrupt", "rollback"]
# How deeply a body's free-form JSON (metadata, input, config...) may nest. pydantic-core refuses to
# serialize past 255 levels: metadata 255 deep was stored, then broke every /threads/search (issue 32).
MAX_JSON_DEPTH = 32


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _not_too_deep(cls, data: Any) -> Any:
        if json_depth(data, MAX_JSON_DEPTH + 1) > MAX_JSON_DEPTH + 1:  # + 1: the body's own object
            raise ValueError(f"the body nests deeper than {MAX_JSON_DEPTH} levels")
        return data


class ThreadCreate(Body):
    thread_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"
    graph_id: str | None = None
    supersteps: list[Any] | None = None
    ttl: Any = None


class ThreadPatch(Body):
    metadata: dict[str, Any] = Field(default_factory=dict)
    ttl: Any = None


class ThreadSearch(Body):
    metadata: dict[str, Any] | None = None
    values: dict[str, Any] | None = None
    ids: list[str] | None = None
    status: Literal["idle", "busy", "interrupted", "error"] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)
    sort_by: str | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[str] | None = None
    extract: dict[str, Any] | None = None


class HistoryRequest(Body):
    limit: int = Field(default=10, ge=1, le=1000)
    before: Any = None
    metadata: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None
    select: list[str] | None = None  # the JS SDK (1.15) may send it; the whole state is returned


class CheckpointRequest(Body):
    checkpoint: dict[str, Any] = Field(default_factory=dict)
    subgraphs: bool = False
    select: list[str] | None = None

    def checkpoint_id(self) -> str | None:
        """The named checkpoint's id; a 422 when it is not a short text without control characters (a NUL
        reached Postgres as a 500)."""
        value = self.checkpoint.get("checkpoint_id")
        if value is None or value == "":
            return None
        if not isinstance(value, str) or len(value) > 64:
            raise unprocessable("checkpoint.checkpoint_id must be a checkpoint id (text, at most 64 characters)")
        try:
            return refuse_unsafe(value)
        except ValueError as exc:
            raise unprocessable(f"invalid checkpoint.checkpoint_id: {exc}") from None


class AssistantSearch(Body):
    metadata: dict[str, Any] | None = None
    graph_id: str | None = None
    name: str | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    offset: int = Field(default=0, ge=0)
    sort_by: str | None = None
    sort_order: str | None = None
    select: list[str] | None = None


class RunCommand(Body):
    resume: Any = None
    update: Any = None
    goto: Any = None


class RunCreate(Body):
    assistant_id: str = GRAPH_ID
    input: dict[str, Any] | None = None
    command: RunCommand | None = None
    config: dict[str, Any] | None = None
    context: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    stream_mode: StreamModeName | list[StreamModeName] | None = None
    stream_subgraphs: bool = False
    stream_resumable: bool = False
    multitask_strategy: MultitaskStrategy = "reject"
    if_not_exists: Literal["create", "reject"] = "reject"
    on_disconnect: Literal["cancel", "continue"] = "continue"
    on_completion: Literal["delete", "keep"] | None = None
    interrupt_before: Any = None
    interrupt_after: Any = None
    feedback_keys: Any = None
    webhook: Any = None
    checkpoint: Any = None
    checkpoint_id: Any = None
    checkpoint_during: Any = None
    after_seconds: Any = None
    durability: Any = None
    strict_resume: Any = None
    langsmith_tracer: Any = None
    signal: Any = None

    def modes(self) -> list[str]:
        if self.stream_mode is None:
            return ["values"]
        return [self.stream_mode] if isinstance(self.stream_mode, str) else list(dict.fromkeys(self.stream_mode))


def unprocessable(message: str) -> ApiError:
    return ApiError(422, message)


def message_text(content: Any) -> str:
    """A chat message's text: a string, or the text blocks of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(block.get("text", "")) if isinstance(block, dict) else str(block)
            for block in content
            if isinstance(block, str) or (isinstance(block, dict) and block.get("type", "text") == "text")
        )
    return ""


def last_user_message(messages: Any) -> str | None:
    if not isinstance(messages, list):
        raise unprocessable("input.messages must be a list of messages")
    for message in reversed(messages):
        if isinstance(message, dict) and (message.get("role") in ("user", "human") or message.get("type") == "human"):
            text = message_text(message.get("content")).strip()
            if text:
                return text
    return None


def run_options(run: RunCreate) -> dict[str, Any]:
    """Research options given as the run's context or config.configurable (only the request's own fields:
    LangGraph clients put their own keys, thread_id and checkpoint_ns among them, into configurable)."""
    options: dict[str, Any] = {}
    configurable = (run.config or {}).get("configurable") or {}
    in_input = (run.input or {}).get("context") or {}
    for source in (configurable, run.context or {}, in_input):
        if isinstance(source, dict):
            options.update({k: v for k, v in source.items() if k in REQUEST_FIELDS and k != "query"})
    return options


def run_input(run: RunCreate) -> dict[str, Any]:
    """The run's input without the `context` a chat UI may put there (Agent Chat UI does; read as options)."""
    given = dict(run.input or {})
    given.pop("context", None)
    return given


def is_regenerate(run: RunCreate) -> bool:
    """A run with no input and no command: chat UIs' regenerate (re-run the thread's question)."""
    return run.command is None and not run_input(run)


END_NODE = "__end__"


def ends_the_wait(run: RunCreate) -> bool:
    """`command.goto: "__end__"` with nothing to resume: a chat UI's "Mark as Resolved" on an interrupt (the
    thread's waiting question is closed and research goes on with what it was asked)."""
    if run.command is None or run.command.resume is not None:
        return False
    goto = run.command.goto
    return goto == END_NODE or (isinstance(goto, list) and END_NODE in goto)


def chat_reply(run: RunCreate) -> str | None:
    """The last user message of a run whose input is chat `messages` only (no `query`): on a thread awaiting
    clarification it answers the questions, as LangGraph's server takes such a run as the resume."""
    given = run_input(run)
    if run.command is not None or "messages" not in given or given.get("query"):
        return None
    return last_user_message(given["messages"])


def research_request(
    run: RunCreate, earlier: ResearchRequest | None = None, defaults: dict[str, Any] | None = None
) -> ResearchRequest:
    """The ResearchRequest of a run that starts research; a 422 when it names no question. `earlier` is the
    thread's last request: a run with no input (regenerate) asks it again, with the run's options on top.
    `defaults`: options the assistant's config sets, under the run's own."""
    given = run_input(run)
    if not given and earlier is not None:
        return validated_request({**earlier.model_dump(mode="json", exclude_none=True), **run_options(run)})
    messages = given.pop("messages", None)
    unknown = sorted(k for k in given if k not in REQUEST_FIELDS and k not in OUTPUT_KEYS)
    if unknown:
        raise unprocessable(
            f"unknown input field(s): {', '.join(unknown)}; give the fields of POST /api/research/start "
            "or chat `messages`"
        )
    fields = {**(defaults or {}), **run_options(run), **{k: v for k, v in given.items() if k in REQUEST_FIELDS}}
    if "query" not in fields and messages is not None:
        query = last_user_message(messages)
        if query is not None:
            fields["query"] = query
    if not fields.get("query"):
        raise unprocessable("the run's input names no question: give `query` or a user message in `messages`")
    return validated_request(fields)


def validated_request(fields: dict[str, Any]) -> ResearchRequest:
    try:
        return ResearchRequest.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise unprocessable(f"invalid input {where}: {first.get('msg', 'invalid value')}") from None


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def decision_answers(decision: Any) -> list[str]:
    """The answers in one human-in-the-loop decision of a chat UI's form: `edit` carries them as the
    edited action's args (one per question), `reject` as its message; `approve` answers nothing."""
    if not isinstance(decision, dict):
        return []
    if decision.get("type") == "edit":
        action = decision.get("edited_action") or {}
        args = action.get("args") if isinstance(action, dict) else None
        values = args.values() if isinstance(args, dict) else []
        return [str(v) for v in values if isinstance(v, str | int | float) and str(v).strip()]
    if decision.get("type") == "reject":
        return _given_answers(decision.get("message"))
    return []


def resume_answers(resume: Any) -> list[str]:
    """The clarification answers of `command.resume` (or of a chat reply): a string, a list of strings,
    {"answers": [...]}, a chat UI form's {"decisions": [...]}, or a map from interrupt id to any of those (what
    Command(resume={id: value}) sends). Checked as `POST /clarify` checks them (`clarification_answers`: count,
    length, no NUL or control character): a 422 otherwise, on every backend."""
    try:
        return clarification_answers(_given_answers(resume))
    except ValueError as exc:
        raise unprocessable(f"invalid command.resume: {exc}") from None


def _given_answers(resume: Any) -> list[str]:
    """Every non-blank answer in `resume`, as given."""
    if isinstance(resume, str):
        return [resume] if resume.strip() else []
    if isinstance(resume, list):
        return [a for value in resume for a in _given_answers(value if isinstance(value, str) else str(value))]
    if isinstance(resume, dict):
        if "answers" in resume:
            return _given_answers(resume["answers"])
        if "decisions" in resume:
            return [a for decision in as_list(resume["decisions"]) for a in decision_answers(decision)]
        return [a for value in resume.values() for a in _given_answers(value)]
    return []
