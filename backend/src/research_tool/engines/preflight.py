"""Is the model server there? Checks the CLI and API run once at start, bounded to a few seconds.

A server that is not listening fails at connect time (refused: at once; unroutable: after the connect
timeout), so `ollama:<model>` with no Ollama running is a clear `EngineUnavailableError`, never a hang.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx

from research_tool.core.errors import EngineUnavailableError
from research_tool.core.logging import get_logger

log = get_logger(__name__)

PREFLIGHT_TIMEOUT = httpx.Timeout(5.0, connect=3.0)

Preflight = Callable[[], Awaitable[None]]


async def _get(client: httpx.AsyncClient | None, url: str, headers: dict[str, str]) -> httpx.Response:
    if client is not None:
        return await client.get(url, headers=headers, timeout=PREFLIGHT_TIMEOUT)
    # No shared client given (a one-off check from a script): a short-lived one, closed right away.
    async with httpx.AsyncClient(timeout=PREFLIGHT_TIMEOUT, trust_env=False) as own:
        return await own.get(url, headers=headers)


def _unreachable(what: str, url: str, exc: Exception, hint: str) -> EngineUnavailableError:
    reason = "connection refused" if isinstance(exc, httpx.ConnectError) else type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        reason = "no answer within a few seconds"
    return EngineUnavailableError(f"cannot reach {what} at {url} ({reason}). {hint}")


def _model_names(payload: object) -> set[str]:
    names: set[str] = set()
    models = payload.get("models", []) if isinstance(payload, dict) else []
    for item in models if isinstance(models, list) else []:
        if isinstance(item, dict):
            for key in ("name", "model"):
                value = item.get(key)
                if isinstance(value, str):
                    names.add(value)
                    if value.endswith(":latest"):
                        names.add(value.removesuffix(":latest"))
    return names


def ollama_preflight(base_url: str, model: str, client: httpx.AsyncClient | None = None) -> Preflight:
    """GET /api/tags: the server answers and has the model pulled."""
    url = f"{base_url.rstrip('/')}/api/tags"

    async def check() -> None:
        try:
            response = await _get(client, url, {})
        except httpx.HTTPError as exc:
            raise _unreachable(
                "Ollama",
                base_url,
                exc,
                "Start it with `ollama serve`, set OLLAMA_BASE_URL, or use RESEARCH_LLM=offline.",
            ) from exc
        if response.status_code != 200:
            raise EngineUnavailableError(
                f"Ollama at {base_url} answered HTTP {response.status_code} to /api/tags; is it an Ollama server?"
            )
        try:
            names = _model_names(response.json())
        except ValueError as exc:
            raise EngineUnavailableError(f"Ollama at {base_url} sent a body that is not JSON from /api/tags") from exc
        if model not in names:
            raise EngineUnavailableError(
                f"Ollama at {base_url} does not have the model '{model}'; run `ollama pull {model}` "
                f"(available: {', '.join(sorted(names)) or 'none'})."
            )
        log.info("llm_preflight_ok", provider="ollama", base_url=base_url, model=model)

    return check


def openai_preflight(base_url: str, api_key: str | None, client: httpx.AsyncClient | None = None) -> Preflight:
    """GET /models: anything that answers HTTP is listening; 401/403 means the key is wrong."""
    url = f"{base_url.rstrip('/')}/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    async def check() -> None:
        try:
            response = await _get(client, url, headers)
        except httpx.HTTPError as exc:
            raise _unreachable(
                "the OpenAI-compatible server",
                base_url,
                exc,
                "Start it, fix OPENAI_BASE_URL, or use RESEARCH_LLM=offline.",
            ) from exc
        if response.status_code in (401, 403):
            raise EngineUnavailableError(
                f"the server at {base_url} refused the API key (HTTP {response.status_code}); check OPENAI_API_KEY."
            )
        log.info("llm_preflight_ok", provider="openai", base_url=base_url, status=response.status_code)

    return check
