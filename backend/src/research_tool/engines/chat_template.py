"""Does the model server format the conversation with the model's own chat template? (issue 43 item 9)

A base model (pretrained only, e.g. Gemma 3 270M) ships no chat template in its GGUF file. llama-cpp-python's
server then formats every conversation in its fallback form, llama-2's (`[INST] <<SYS>>...`), without a word:
the model reads the steps' instructions as plain text it was never tuned on, and its answers are noise the
grammar forces into JSON. The engine says so once: a log warning, and a note in each report made with that model
(`metadata.model_notes`).

How it is seen from the client: llama-cpp-python's server serves `/extras/tokenize` (nothing else does) but no
model metadata. A conversation of one system and one user message is rendered in the fallback form and
tokenized there, and the same conversation is sent as a chat completion of one token: when the server counts
exactly as many prompt tokens as the fallback rendering has, it used the fallback form. Checked once per server
per process, at preflight, for local servers (with the prompt-speed probe: `RESEARCH_LLM_SPEED_PROBE`); any
other server, or any failure, is no note.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from research_tool.core.logging import get_logger

log = get_logger(__name__)

CHECK_TIMEOUT = httpx.Timeout(10.0, connect=3.0)  # two small requests; a loaded machine evaluates ~40 tokens in 1-2 s
PROBE_SYSTEM = "Research Tool: chat format check."
PROBE_USER = "Answer with the single word ok."

TemplateCheck = Callable[[], Awaitable[str | None]]

_CHECKED: dict[str, str | None] = {}  # server key -> its note (None: none to make), once per process
_CHECKED_LOCK = threading.Lock()


def llama2_fallback_prompt(system: str, user: str) -> str:
    """A system and a user message as llama-cpp-python's fallback chat format (`format_llama2`) renders them."""
    return f"[INST] <<SYS>>\n{system}\n<</SYS>> {user} [/INST]"


def no_template_note(model: str) -> str:
    return (
        f"The model {model} has no chat template (a base model?): the llama.cpp server formats the conversation "
        "in its generic fallback form (llama-2's), so the model may not follow the steps' instructions; use an "
        "instruction-tuned model with a chat template."
    )


def server_root(base_url: str) -> str:
    """`http://host:port` of an OpenAI-compatible base URL (`http://host:port/v1`)."""
    return base_url.rstrip("/").removesuffix("/v1")


def llama_cpp_template_check(
    key: str, base_url: str, model: str, api_key: str | None, client: httpx.AsyncClient | None = None
) -> TemplateCheck:
    """The check for an OpenAI-compatible server at `base_url` (`key`: the server's key, as the prompt timing's)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def post(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> Any:
        response = await http.post(url, json=body, headers=headers, timeout=CHECK_TIMEOUT)
        return response.json() if response.status_code == 200 else None

    async def probe(http: httpx.AsyncClient) -> str | None:
        rendered = llama2_fallback_prompt(PROBE_SYSTEM, PROBE_USER)
        tokenized = await post(http, f"{server_root(base_url)}/extras/tokenize", {"input": rendered, "model": model})
        tokens = tokenized.get("tokens") if isinstance(tokenized, dict) else None
        if not isinstance(tokens, list) or not tokens:
            return None  # not llama-cpp-python's server: nothing to compare with
        body = {
            "model": model,
            "messages": [{"role": "system", "content": PROBE_SYSTEM}, {"role": "user", "content": PROBE_USER}],
            "max_tokens": 1,
            "temperature": 0,
        }
        answer = await post(http, f"{base_url.rstrip('/')}/chat/completions", body)
        usage = answer.get("usage") if isinstance(answer, dict) else None
        prompt_tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        log.debug("llm_chat_template_checked", server=key, fallback_tokens=len(tokens), prompt_tokens=prompt_tokens)
        return no_template_note(model) if prompt_tokens == len(tokens) else None

    async def check() -> str | None:
        with _CHECKED_LOCK:
            if key in _CHECKED:
                return _CHECKED[key]
        try:
            if client is not None:
                note = await probe(client)
            else:
                async with httpx.AsyncClient(trust_env=False) as own:
                    note = await probe(own)
        except (httpx.HTTPError, ValueError) as exc:
            log.debug("llm_chat_template_check_failed", server=key, error=repr(exc)[:200])
            return None  # asked again by the next session
        with _CHECKED_LOCK:
            first = key not in _CHECKED
            _CHECKED[key] = note
        if note is not None and first:
            log.warning("llm_no_chat_template", server=key, model=model, note=note)
        return note

    return check


def forget_template_checks() -> None:
    """Drop every remembered check (tests that restart a server on the same address)."""
    with _CHECKED_LOCK:
        _CHECKED.clear()
