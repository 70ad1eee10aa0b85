"""The span of one model call (issue 36), after the OpenTelemetry semantic conventions for generative AI:
`gen_ai.operation.name`, `gen_ai.system` (and its newer name `gen_ai.provider.name`), `gen_ai.request.model`,
`gen_ai.request.max_tokens`, `gen_ai.response.model`, `gen_ai.response.finish_reasons`,
`gen_ai.usage.input_tokens` / `output_tokens`; the messages (`gen_ai.input.messages`, `gen_ai.output.messages`)
only with RESEARCH_TRACE_CONTENT=1. With tracing off it is the plain call.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage

from research_tool.core import telemetry

OPERATION = "chat"
# Where each chat model client puts the reason the answer ended (OpenAI, Ollama, Anthropic).
FINISH_REASON_KEYS = ("finish_reason", "done_reason", "stop_reason")
ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


async def invoke_traced(
    chat: BaseChatModel,
    messages: list[BaseMessage],
    *,
    model_spec: str,
    step: str,
    max_tokens: int,
    call: Callable[[], Awaitable[AIMessage]] | None = None,
) -> AIMessage:
    """`chat.ainvoke(messages)` (or `call()`, the engine's streamed call), inside a `chat <model>` client span
    while tracing is on."""
    run = call or (lambda: chat.ainvoke(messages))
    if not telemetry.enabled():
        return await run()
    provider, _, model = model_spec.partition(":")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": OPERATION,
        "gen_ai.system": provider,
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model or model_spec,
        "gen_ai.request.max_tokens": max_tokens,
        "research.step": step,
    }
    if telemetry.content_enabled():
        attributes["gen_ai.input.messages"] = _messages_json(messages)
    with telemetry.span(f"{OPERATION} {model or model_spec}", attributes, kind="client") as span:
        reply = await run()
        span.set_many(reply_attributes(reply))
        if telemetry.content_enabled():
            span.set("gen_ai.output.messages", _messages_json([reply]))
    return reply


def reply_attributes(reply: AIMessage) -> dict[str, Any]:
    """What a reply tells about itself: the model that answered, why it stopped, the tokens (when reported)."""
    metadata: Mapping[str, Any] = reply.response_metadata or {}
    attributes: dict[str, Any] = {}
    model = metadata.get("model_name") or metadata.get("model")
    if model:
        attributes["gen_ai.response.model"] = str(model)
    reason = next((metadata[k] for k in FINISH_REASON_KEYS if metadata.get(k)), None)
    if reason:
        attributes["gen_ai.response.finish_reasons"] = [str(reason)]
    if reply.id:
        attributes["gen_ai.response.id"] = str(reply.id)
    usage: Mapping[str, Any] = reply.usage_metadata or {}
    for kind in ("input", "output"):
        if usage.get(f"{kind}_tokens") is not None:
            attributes[f"gen_ai.usage.{kind}_tokens"] = int(usage[f"{kind}_tokens"])
    return attributes


def _messages_json(messages: Sequence[BaseMessage]) -> str:
    return json.dumps(
        [{"role": ROLES.get(m.type, m.type), "parts": [{"type": "text", "content": m.text}]} for m in messages],
        ensure_ascii=False,
    )
