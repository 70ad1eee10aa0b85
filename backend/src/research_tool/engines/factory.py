"""`RESEARCH_LLM` -> the engine a session uses, with the privacy mode enforced (DESIGN §3, issue 5 items 1, 7).

`offline` (default) | `ollama:<model>` (`OLLAMA_BASE_URL`) | `openai:<model>` (`OPENAI_API_KEY`,
`OPENAI_BASE_URL` for any OpenAI-compatible server) | `anthropic:<model>` (`ANTHROPIC_API_KEY`).

Privacy: `local_only` and `hybrid` accept only `offline`, or an Ollama / OpenAI-compatible base URL whose host
is a loopback or private address (a host name is resolved once, here: call `create_engine` from a thread if a
slow resolver matters). Anything else is `BadInputError` with the reason, before any model is contacted.

Creating an engine contacts nothing; `await engine.check()` (LLM engines only) is the preflight the CLI and
API run at start.

Limits every provider gets (issue 14): `max_tokens` (`num_predict` for Ollama) of `MAX_ANSWER_TOKENS`, the
HTTP client's read timeout, and `RESEARCH_LLM_TIMEOUT_S` for the whole call (the engine cancels a call that
takes longer, the client's own retry included; see `engines/llm.py`).

Issue 35: langchain-openai sends the cap as `max_completion_tokens`, which OpenAI reads and llama.cpp's, vLLM's
and older servers ignore; a server other than OpenAI's own also gets `max_tokens` (both fields). Calls are
streamed (a cancelled call closes its connection and the server stops), with usage asked for in the stream.
The structured-output form (`RESEARCH_LLM_STRUCTURED_OUTPUT`, `engines/output_format.py`) is per server.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

import httpx
from pydantic import SecretStr

from research_tool.core.errors import BadInputError, EngineUnavailableError
from research_tool.core.logging import get_logger
from research_tool.core.settings import Settings, secret_value
from research_tool.engines.base import ReasoningEngine
from research_tool.engines.chat_template import llama_cpp_template_check
from research_tool.engines.llm import Closer, LLMEngine, LLMLimits
from research_tool.engines.output_format import OLLAMA_FORMS, OPENAI_FORMS, ChatRequests, prompt_only, server_format
from research_tool.engines.preflight import ollama_preflight, openai_preflight
from research_tool.engines.prompt_timing import server_timing

log = get_logger(__name__)

Provider = Literal["ollama", "openai", "anthropic"]
PROVIDERS: tuple[Provider, ...] = ("ollama", "openai", "anthropic")
OFFLINE = "offline"
OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"
LOCAL_PRIVACY_MODES = ("local_only", "hybrid")
LOCAL_NAME_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa")
CONNECT_TIMEOUT_S = 5.0
MAX_RETRIES = 1  # the client's own retry of a failed HTTP call (429 Retry-After); inside the whole-call bound
MAX_ANSWER_TOKENS = 4096  # every provider's max_tokens; also what a call reserves from the token budget
_NO_TEMPERATURE_PREFIXES = ("o1", "o3", "o4", "gpt-5")
_SPEC_HELP = "use offline, ollama:<model>, openai:<model> or anthropic:<model>"


@dataclass(frozen=True)
class ModelSpec:
    provider: Provider
    model: str

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}"


def parse_model_spec(spec: str) -> ModelSpec | None:
    """`provider:model`, or None for `offline`; anything else is `BadInputError`."""
    text = (spec or "").strip()
    if text.lower() == OFFLINE:
        return None
    provider, sep, model = text.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if not sep or provider not in PROVIDERS or not model or any(c.isspace() for c in model):
        raise BadInputError(f"RESEARCH_LLM={spec!r} is not a model spec; {_SPEC_HELP}.")
    return ModelSpec(provider=provider, model=model)


def _ip_is_local(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_private


def endpoint_is_local(url: str) -> bool:
    """True when the URL's host is a loopback or private address (names are resolved; all must be local)."""
    host = urlsplit(url).hostname
    if not host:
        return False
    try:
        return _ip_is_local(ipaddress.ip_address(host.split("%")[0]))
    except ValueError:
        pass
    host = host.lower().rstrip(".")
    if host == "localhost" or host.endswith(LOCAL_NAME_SUFFIXES):
        return True
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos}
    return bool(addresses) and all(_ip_is_local(a) for a in addresses)


def model_base_url(spec: ModelSpec, settings: Settings) -> str | None:
    if spec.provider == "ollama":
        return settings.ollama_base_url.rstrip("/")
    if spec.provider == "openai":
        return (settings.openai_base_url or OPENAI_DEFAULT_BASE_URL).rstrip("/")
    return None


def check_privacy(spec: ModelSpec | None, settings: Settings, privacy_mode: str) -> None:
    """`local_only` / `hybrid`: the model must run on this machine or this network."""
    if spec is None or privacy_mode not in LOCAL_PRIVACY_MODES:
        return
    allowed = (
        "use RESEARCH_LLM=offline, ollama:<model> with OLLAMA_BASE_URL on a loopback or private address, or "
        "openai:<model> with OPENAI_BASE_URL on a loopback or private address"
    )
    if spec.provider == "anthropic":
        raise BadInputError(
            f"privacy mode {privacy_mode} keeps research on local models, but RESEARCH_LLM={spec} sends it to "
            f"Anthropic's cloud; {allowed}, or choose privacy mode cloud_allowed."
        )
    if spec.provider == "openai" and not settings.openai_base_url:
        raise BadInputError(
            f"privacy mode {privacy_mode} keeps research on local models, but RESEARCH_LLM={spec} without "
            f"OPENAI_BASE_URL sends it to api.openai.com; {allowed}, or choose privacy mode cloud_allowed."
        )
    base_url = model_base_url(spec, settings) or ""
    if not endpoint_is_local(base_url):
        variable = "OLLAMA_BASE_URL" if spec.provider == "ollama" else "OPENAI_BASE_URL"
        raise BadInputError(
            f"privacy mode {privacy_mode} keeps research on local models, but {variable}={base_url} is not a "
            f"loopback or private address; {allowed}, or choose privacy mode cloud_allowed."
        )


def _client_timeout(settings: Settings) -> httpx.Timeout:
    return httpx.Timeout(settings.llm_timeout_s, connect=CONNECT_TIMEOUT_S)


def _limits(settings: Settings) -> LLMLimits:
    return LLMLimits(call_timeout_s=settings.llm_timeout_s, max_answer_tokens=MAX_ANSWER_TOKENS)


def _closer(obj: object, method: str) -> Callable[[], Awaitable[None]] | None:
    close = getattr(obj, method, None)
    return close if callable(close) else None


def _server_key(spec: ModelSpec, base_url: str) -> str:
    return f"{spec.provider} {base_url} {spec.model}"


def _openai_requests(spec: ModelSpec, settings: Settings, base_url: str) -> ChatRequests:
    """OpenAI's own API reads `max_completion_tokens` (and some of its models refuse `max_tokens`); every other
    OpenAI-compatible server also gets `max_tokens`, the field llama.cpp's and vLLM's servers read."""
    own_api = urlsplit(base_url).hostname == urlsplit(OPENAI_DEFAULT_BASE_URL).hostname
    extra: dict[str, object] = {} if own_api else {"max_tokens": MAX_ANSWER_TOKENS}
    key = _server_key(spec, base_url)
    server = server_format(key, settings.llm_structured_output, OPENAI_FORMS)
    timing = server_timing(key, settings.data_dir)
    return ChatRequests(provider="openai", server=server, extra_body=extra, timing=timing)


def _ollama_engine(
    spec: ModelSpec, settings: Settings, http_client: httpx.AsyncClient | None, fallback: ReasoningEngine | None
) -> LLMEngine:
    from langchain_ollama import ChatOllama

    base_url = settings.ollama_base_url.rstrip("/")
    chat = ChatOllama(
        model=spec.model,
        base_url=base_url,
        temperature=0,
        format="json",
        num_ctx=settings.llm_context_tokens,
        num_predict=MAX_ANSWER_TOKENS,
        client_kwargs={"timeout": _client_timeout(settings), "trust_env": False},
    )
    closers = [c for c in [_closer(getattr(chat, "_async_client", None), "close")] if c]
    return LLMEngine(
        chat,
        model_spec=str(spec),
        fallback=fallback,
        preflight=ollama_preflight(base_url, spec.model, http_client),
        closers=closers,
        limits=_limits(settings),
        requests=ChatRequests(
            provider="ollama",
            server=server_format(_server_key(spec, base_url), settings.llm_structured_output, OLLAMA_FORMS),
            timing=server_timing(_server_key(spec, base_url), settings.data_dir),
        ),
        probe_speed=settings.llm_speed_probe and endpoint_is_local(base_url),
    )


def _openai_engine(
    spec: ModelSpec, settings: Settings, http_client: httpx.AsyncClient | None, fallback: ReasoningEngine | None
) -> LLMEngine:
    from langchain_openai import ChatOpenAI

    base_url = (settings.openai_base_url or OPENAI_DEFAULT_BASE_URL).rstrip("/")
    # Local OpenAI-compatible servers (vLLM, llama.cpp, LM Studio) ignore the key but the client wants one.
    api_key = settings.openai_api_key if secret_value(settings.openai_api_key) else SecretStr("not-needed")
    own_client = http_client is None
    client = http_client or httpx.AsyncClient(timeout=_client_timeout(settings))
    extra: dict[str, object] = {}
    if not spec.model.lower().startswith(_NO_TEMPERATURE_PREFIXES):
        extra["temperature"] = 0
    chat = ChatOpenAI(
        model=spec.model,
        api_key=api_key,
        base_url=base_url,
        timeout=_client_timeout(settings),
        max_retries=MAX_RETRIES,
        max_tokens=MAX_ANSWER_TOKENS,
        stream_usage=True,
        use_responses_api=False,
        http_async_client=client,
        **extra,
    )
    closers: list[Closer] = [client.aclose] if own_client else []
    local_probes = settings.llm_speed_probe and endpoint_is_local(base_url)
    return LLMEngine(
        chat,
        model_spec=str(spec),
        fallback=fallback,
        preflight=openai_preflight(base_url, secret_value(settings.openai_api_key), http_client),
        closers=closers,
        limits=_limits(settings),
        requests=_openai_requests(spec, settings, base_url),
        probe_speed=local_probes,
        template_check=llama_cpp_template_check(
            _server_key(spec, base_url), base_url, spec.model, secret_value(settings.openai_api_key), http_client
        )
        if local_probes
        else None,
    )


def _anthropic_engine(spec: ModelSpec, settings: Settings, fallback: ReasoningEngine | None) -> LLMEngine:
    from langchain_anthropic import ChatAnthropic

    chat = ChatAnthropic(
        model=spec.model,
        api_key=settings.anthropic_api_key,
        max_tokens=MAX_ANSWER_TOKENS,
        temperature=0,
        timeout=settings.llm_timeout_s,
        max_retries=MAX_RETRIES,
    )
    return LLMEngine(
        chat, model_spec=str(spec), fallback=fallback, limits=_limits(settings), requests=prompt_only(str(spec))
    )


def _check_keys(spec: ModelSpec, settings: Settings) -> None:
    if spec.provider == "openai" and not secret_value(settings.openai_api_key) and not settings.openai_base_url:
        raise EngineUnavailableError(
            f"RESEARCH_LLM={spec} needs OPENAI_API_KEY (or OPENAI_BASE_URL pointing at a local server)."
        )
    if spec.provider == "anthropic" and not secret_value(settings.anthropic_api_key):
        raise EngineUnavailableError(f"RESEARCH_LLM={spec} needs ANTHROPIC_API_KEY.")


def check_engine_settings(settings: Settings, *, privacy_mode: str) -> ModelSpec | None:
    """Everything `create_engine` checks, without building a client: the spec is well formed
    (`BadInputError`), the privacy mode allows it (`BadInputError`), its key is set
    (`EngineUnavailableError`). Returns the spec (None for offline). Contacts no model server."""
    spec = parse_model_spec(settings.llm)
    check_privacy(spec, settings, privacy_mode)
    if spec is not None:
        _check_keys(spec, settings)
    return spec


def create_engine(
    settings: Settings,
    *,
    privacy_mode: str,
    http_client: httpx.AsyncClient | None = None,
    fallback: ReasoningEngine | None = None,
) -> ReasoningEngine:
    """The engine `settings.llm` names. `http_client` (the shared pooled client) serves the preflight and
    the OpenAI client; `fallback` replaces the offline engine that does the steps a model cannot (tests)."""
    spec = check_engine_settings(settings, privacy_mode=privacy_mode)
    if spec is None:
        if fallback is not None:
            return fallback
        from research_tool.engines.offline import OfflineEngine

        return OfflineEngine()
    if spec.provider == "ollama":
        engine = _ollama_engine(spec, settings, http_client, fallback)
    elif spec.provider == "openai":
        engine = _openai_engine(spec, settings, http_client, fallback)
    else:
        engine = _anthropic_engine(spec, settings, fallback)
    log.info("llm_engine_created", model=engine.model, privacy_mode=privacy_mode)
    return engine
