"""With no stand-in given, a degraded step is done by the real offline engine."""

from __future__ import annotations

from research_tool.engines.factory import create_engine
from research_tool.engines.llm import LLMEngine
from research_tool.engines.offline import OfflineEngine
from research_tool.models.domain import DOMAINS

from .conftest import llm_settings
from .servers import OpenAIServer


async def test_invalid_twice_is_done_by_the_offline_engine(openai_server: OpenAIServer) -> None:
    openai_server.script("plan", "no JSON here", '{"plan": []}')
    engine = create_engine(llm_settings("openai", openai_server.base_url), privacy_mode="local_only")
    assert isinstance(engine, LLMEngine)

    step = await engine.plan("How do I run a subprocess with a timeout in Python?", DOMAINS["technical"], 4)

    assert isinstance(engine.fallback, OfflineEngine)
    assert step.value.queries, "the offline engine planned queries"
    assert [e.error.type for e in step.errors][-1] == "engine_output"
    await engine.aclose()
