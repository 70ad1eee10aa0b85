"""The memory store: per-domain provider history in SQLite, and the ranking the plan node uses."""

from __future__ import annotations

from pathlib import Path

from research_tool.core.settings import Settings
from research_tool.models.entities import AccessFailure
from research_tool.providers.memory import NEUTRAL_SCORE, MemoryStore


def _failure(provider: str, error_type: str = "server_error", url: str | None = None) -> AccessFailure:
    return AccessFailure(provider=provider, url=url, query="q", error_type=error_type, message=f"{provider} failed")


async def test_ranking_prefers_reliable_cited_providers_and_tries_new_ones(tmp_path: Path) -> None:
    memory = MemoryStore(Settings(data_dir=tmp_path))
    assert memory.path == tmp_path / "memory.db" == MemoryStore.from_settings(Settings(data_dir=tmp_path)).path
    for _ in range(4):
        await memory.record_results("academic", "arxiv", 10)
        await memory.record_results("academic", "pubmed", 10)
    await memory.record_citations("academic", "arxiv", 12)
    await memory.record_citations("academic", "pubmed", 1)
    for _ in range(6):
        await memory.record_failure("academic", _failure("semantic_scholar"))
    await memory.record_results("academic", "semantic_scholar", 3)

    ranking = await memory.rank_providers("academic", ["semantic_scholar", "pubmed", "brand_new", "arxiv"])

    assert [name for name, _ in ranking] == ["arxiv", "pubmed", "brand_new", "semantic_scholar"]
    scores = dict(ranking)
    assert scores["brand_new"] == NEUTRAL_SCORE
    assert scores["arxiv"] > scores["pubmed"] > NEUTRAL_SCORE > scores["semantic_scholar"]


async def test_domains_are_separate_and_unknown_domains_are_neutral(tmp_path: Path) -> None:
    memory = MemoryStore(tmp_path / "memory.db")
    await memory.record_results("medical", "pubmed", 10)
    await memory.record_citations("medical", "pubmed", 5)
    assert await memory.rank_providers("general", ["tavily", "pubmed"]) == [
        ("tavily", NEUTRAL_SCORE),
        ("pubmed", NEUTRAL_SCORE),
    ]
    [stats] = await memory.provider_stats("medical")
    assert (stats.provider, stats.calls, stats.results, stats.citations, stats.failures) == ("pubmed", 1, 10, 5, 0)


async def test_failures_are_kept_newest_first_across_store_instances(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    first = MemoryStore(path)
    await first.record_failure("general", _failure("crawler", "access_denied", url="https://example.com/a"))
    await first.record_failure("general", _failure("brave", "rate_limited"))
    again = MemoryStore(path)  # another session, same file
    await again.record_failure("general", _failure("crawler", "fetch_refused", url="http://10.0.0.1/"))

    failures = await again.failures(limit=2)
    assert [(f.provider, f.error_type) for f in failures] == [("crawler", "fetch_refused"), ("brave", "rate_limited")]
    assert failures[0].url == "http://10.0.0.1/" and failures[0].query == "q"
    assert [f.url for f in await again.failures(10, provider="crawler")] == [
        "http://10.0.0.1/",
        "https://example.com/a",
    ]
