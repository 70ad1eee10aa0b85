"""GET /api/providers: which search providers this server can use, for a client's (the web page's)
provider picker. Read-only; behind the token like the research routes."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request

from research_tool.api.auth import require_token
from research_tool.api.routes.research import services_of
from research_tool.models.api import ErrorResponse, ProviderInfo, ProviderList
from research_tool.models.request import SEARCH_PROVIDERS
from research_tool.providers.registry import create_provider

providers = APIRouter(prefix="/api/providers", tags=["research"], dependencies=[Depends(require_token)])

ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorResponse} for code in (401, 503)}


@providers.get("", response_model=ProviderList, responses=ERRORS)
async def list_providers(request: Request) -> ProviderList:
    """Every search provider: available or why not (`local`: the folders `research-tool index` indexed, and
    RESEARCH_CORPUS_DIRS)."""
    services = services_of(request)
    rows = []
    for name in SEARCH_PROVIDERS:
        provider = create_provider(name, services.settings, services.client)
        reason = provider.unavailable_reason()
        rows.append(
            ProviderInfo(
                name=name,
                available=reason is None,
                reason=reason,
                privacy=provider.privacy,
                kind=provider.kind,
                key_present=provider.has_key(),
            )
        )
    return ProviderList(providers=rows)
