"""Turn a model's answer into a validated Pydantic object, or say precisely why it cannot.

Models wrap JSON in many ways: a reasoning preamble in `<think>…</think>`, a ```json fence, a sentence of
prose before the object. All of those are tolerated. What is never tolerated is a JSON object that does not
match the schema: the schema classes forbid unknown keys (`extra="forbid"`), and validation is strict
(Pydantic strict mode): `"yes"` is not a bool, `"0.9"` is not a float, `["2"]` is not `[2]`, and `{}` is
not an answer where fields are required. A failure is a typed `EngineOutputError` whose message is short
enough to quote back to the model in the retry.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from research_tool.core.errors import EngineOutputError
from research_tool.core.untrusted_text import clean_value

M = TypeVar("M", bound=BaseModel)

_THINK_BLOCK = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.IGNORECASE | re.DOTALL)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_MAX_QUOTED_CHARS = 200
_MAX_LISTED_ERRORS = 6


def strip_reasoning(text: str) -> str:
    """Remove `<think>…</think>` blocks; a lone closing tag drops everything before it, a lone opening tag
    everything after it (a reasoning block cut off by the token limit holds no answer)."""
    cleaned = _THINK_BLOCK.sub("", text)
    closing = list(_THINK_CLOSE.finditer(cleaned))
    if closing:
        cleaned = cleaned[closing[-1].end() :]
    opening = _THINK_OPEN.search(cleaned)
    if opening:
        cleaned = cleaned[: opening.start()]
    return cleaned.strip()


def _first_json_object(text: str) -> dict[str, Any] | None:
    """The first `{…}` in the text that decodes to a JSON object (prose before or after it is ignored)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def extract_json_object(text: str) -> dict[str, Any]:
    """The JSON object a model answered with; fenced blocks are preferred over bare text."""
    cleaned = strip_reasoning(text)
    candidates = [m.group(1) for m in _FENCE.finditer(cleaned)] + [cleaned]
    for candidate in candidates:
        found = _first_json_object(candidate)
        if found is not None:
            return found
    preview = cleaned[:_MAX_QUOTED_CHARS] or "(empty answer)"
    raise EngineOutputError(f"the answer holds no JSON object; it starts with: {preview!r}")


def describe_validation_error(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:_MAX_LISTED_ERRORS]:
        where = ".".join(str(p) for p in item["loc"]) or "(top level)"
        parts.append(f"{where}: {item['msg']}")
    more = len(error.errors()) - _MAX_LISTED_ERRORS
    if more > 0:
        parts.append(f"and {more} more")
    return "; ".join(parts)


def parse_structured(text: str, schema: type[M]) -> M:
    """Validate the model's answer against `schema`; `EngineOutputError` says what is wrong. The answer's strings
    lose NUL and other control characters first (model output is untrusted text, core/untrusted_text.py)."""
    payload = clean_value(extract_json_object(text))
    try:
        return schema.model_validate(payload, strict=True)
    except ValidationError as exc:
        raise EngineOutputError(f"the JSON does not match {schema.__name__}: {describe_validation_error(exc)}") from exc


def compact_schema(schema: type[BaseModel]) -> str:
    """The JSON Schema of `schema` on one line, to restate it to a model that got it wrong."""
    return json.dumps(schema.model_json_schema(), separators=(",", ":"), ensure_ascii=False)
