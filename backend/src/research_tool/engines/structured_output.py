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


def parse_structured(text: str, schema: type[M], *, instructions: str | None = None) -> M:
    """Validate the model's answer against `schema`; `EngineOutputError` says what is wrong. The answer's strings
    lose NUL and other control characters first (model output is untrusted text, core/untrusted_text.py). An
    answer that is schema-valid but holds placeholders, or echoes `instructions` (the prompt's own words), is
    refused too (`placeholder_problem`)."""
    payload = clean_value(extract_json_object(text))
    try:
        value = schema.model_validate(payload, strict=True)
    except ValidationError as exc:
        raise EngineOutputError(f"the JSON does not match {schema.__name__}: {describe_validation_error(exc)}") from exc
    problem = placeholder_problem(payload, schema, instructions)
    if problem:
        raise EngineOutputError(problem)
    return value


# Values a model copies from a schema or an example instead of answering (compared lower-cased, trimmed of
# quotes, brackets and dots): the JSON type names and the usual template fillers. Words that can be real answers
# in a corpus about code ("int", "object", "None", "text") are not in it.
PLACEHOLDERS = frozenset(
    {
        "string", "integer", "number", "boolean", "array", "n/a", "tbd", "todo", "xxx", "placeholder",
        "your answer", "your query", "your question", "answer here", "query here", "lorem ipsum",
    }
)  # fmt: skip
_FILLER_CHARS = " \t\n\"'`<>[]{}().:;,*_-"
_ELLIPSIS = re.compile(r"^(?:\.\s*){2,}$|^…+$")
_ECHO_MIN_WORDS = 4


def _schema_words(schema: type[BaseModel]) -> set[str]:
    """Every property name and title in the schema, lower-cased."""
    words: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    words.update(str(name).lower() for name in value)
                if key == "title" and isinstance(value, str):
                    words.add(value.lower())
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema.model_json_schema())
    return words


def _strings(value: object, where: str = "") -> list[tuple[str, str]]:
    """Every string in a JSON value with its path (`queries.0.query`)."""
    if isinstance(value, str):
        return [(where or "(top level)", value)]
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _strings(v, f"{where}.{k}" if where else str(k))]
    if isinstance(value, list):
        return [pair for i, v in enumerate(value) for pair in _strings(v, f"{where}.{i}" if where else str(i))]
    return []


def _folded(text: str) -> str:
    return " ".join(text.lower().split())


def placeholder_problem(payload: object, schema: type[BaseModel], instructions: str | None = None) -> str | None:
    """Why a schema-valid answer is still no answer, or None: a string that is a placeholder (`"string"`,
    `"..."`), its own field's name or one of the schema's compound field names (`"refined_query"`), or a run of
    at least four words of `instructions` (the prompt's instructions, not its data) echoed back."""
    names = {name for name in _schema_words(schema) if "_" in name}  # `refined_query`, not `name`
    echo_source = _folded(instructions or "")
    for where, text in _strings(payload):
        if not text.strip():
            continue
        bare = text.strip(_FILLER_CHARS).lower()
        own = text.strip().strip("\"'`<>").lower()
        key = next((part for part in reversed(where.split(".")) if not part.isdigit()), "")
        if not bare or bare in PLACEHOLDERS or _ELLIPSIS.match(text.strip()) or own in names or own == key.lower():
            return (
                f"{where} holds the placeholder {text[:_MAX_QUOTED_CHARS]!r}, not an answer; write the real value "
                "for every field (the schema's words are not values)"
            )
        folded = _folded(text)
        if echo_source and len(folded.split()) >= _ECHO_MIN_WORDS and folded in echo_source:
            return (
                f"{where} repeats the instructions ({text[:_MAX_QUOTED_CHARS]!r}); answer the question "
                "instead of copying the prompt"
            )
    return None


def compact_schema(schema: type[BaseModel]) -> str:
    """The JSON Schema of `schema` on one line, to restate it to a model that got it wrong."""
    return json.dumps(schema.model_json_schema(), separators=(",", ":"), ensure_ascii=False)
