"""Which providers a session may and will use: privacy mode, availability, domain, memory ranking."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import httpx

from research_tool.core.errors import BadInputError
from research_tool.core.settings import Settings
from research_tool.models.domain import DOMAINS
from research_tool.models.request import ResearchRequest
from research_tool.providers.local_corpus.indexed_folders import local_folders
from research_tool.providers.registry import create_provider, provider_class


def corpus_dirs_for(request: ResearchRequest, settings: Settings) -> list[Path]:
    """The request's folders (or RESEARCH_CORPUS_DIRS) and the folders `research-tool index` indexed."""
    return local_folders(settings, request.corpus_dirs)


def _is_folder(folder: str) -> bool:
    """Whether a user-given path names a folder. Any OSError (a component over 255 bytes, a path over
    PATH_MAX, a permission error) or ValueError (a NUL byte) is bad input, never a server error."""
    try:
        return Path(folder).expanduser().is_dir()
    except (OSError, RuntimeError, ValueError) as exc:
        shown = folder if len(folder) <= 80 else folder[:77] + "..."
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise BadInputError(f"corpus folder is not a usable path: {shown!r} ({reason})") from None


def privacy_allows(privacy_mode: str, provider_name: str) -> bool:
    if privacy_mode != "local_only":
        return True
    return provider_class(provider_name).privacy == "local"


def validate_request(request: ResearchRequest, settings: Settings, client: httpx.AsyncClient) -> None:
    """Bad input that can be known before the session starts raises BadInputError with one clear line."""
    for folder in request.corpus_dirs:
        if not _is_folder(folder):
            raise BadInputError(f"corpus folder not found: {folder}")
    dirs = corpus_dirs_for(request, settings)
    if request.providers is None:
        check_some_provider_can_search(request, settings, client, dirs)
        return
    for name in request.providers:
        if not privacy_allows(request.privacy, name):
            raise BadInputError(
                f"provider '{name}' sends queries to the cloud, which privacy mode '{request.privacy}' forbids"
            )
        provider = create_provider(name, settings, client, corpus_dirs=dirs)
        reason = provider.unavailable_reason()
        if reason:
            raise BadInputError(f"provider '{name}' is not available: {reason}")


def check_some_provider_can_search(
    request: ResearchRequest, settings: Settings, client: httpx.AsyncClient, dirs: Sequence[Path]
) -> None:
    """A request that leaves the providers to the domain must leave at least one that can search: a
    `local_only` session with no corpus folder would otherwise "complete" with nothing searched."""
    domains = [request.domain] if request.domain else list(DOMAINS)
    candidates = list(dict.fromkeys(name for d in domains for name in DOMAINS[d].provider_order()))
    reasons: list[str] = []
    for name in candidates:
        if not privacy_allows(request.privacy, name):
            continue
        reason = create_provider(name, settings, client, corpus_dirs=dirs).unavailable_reason()
        if reason is None:
            return
        reasons.append(f"{name}: {reason}")
    allowed = "; ".join(reasons) or "none is allowed"
    raise BadInputError(
        f"no provider can search for this request (privacy mode '{request.privacy}'"
        + (f", domain '{request.domain}'" if request.domain else "")
        + f"): {allowed}"
    )


def choose_providers(
    request: ResearchRequest,
    domain: str,
    settings: Settings,
    client: httpx.AsyncClient,
    ranking: Sequence[tuple[str, float]] = (),
) -> list[str]:
    """Explicit providers win; otherwise the domain's order, filtered by privacy and availability,
    reordered by the memory's ranking within the primary and the secondary group."""
    if request.providers is not None:
        return list(request.providers)
    config = DOMAINS[domain]
    dirs = corpus_dirs_for(request, settings)
    scores = dict(ranking)

    def usable(name: str) -> bool:
        if not privacy_allows(request.privacy, name):
            return False
        return create_provider(name, settings, client, corpus_dirs=dirs).is_available()

    def ranked(names: list[str]) -> list[str]:
        kept = [n for n in names if n not in config.excluded_sources and usable(n)]
        return sorted(kept, key=lambda n: -scores.get(n, 0.5))

    primary = ranked(config.primary_sources)
    secondary = [n for n in ranked(config.secondary_sources) if n not in primary]
    return primary + secondary if not primary else primary + secondary[:1]
