"""Item 11: page text lives in a content store shared by the sessions of a data dir, not in the graph state."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

from research_tool.core.settings import Settings
from research_tool.graph.nodes.page_text import store_page_text, with_page_text
from research_tool.models.request import ResearchRequest
from research_tool.models.state import merge_sources
from research_tool.runtime.content_store import ContentStore, content_key
from tests.support.sessions import assert_citations_resolve, run_session

from .conftest import QUESTION


def _request(corpus: Path) -> ResearchRequest:
    return ResearchRequest(
        query=QUESTION, providers=["local"], corpus_dirs=[str(corpus)], fetch=False, clarify=False, tier="simple"
    )


def _rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(db)) as conn:
        return list(conn.execute(sql).fetchall())


async def test_state_keeps_key_and_length_and_the_same_page_is_stored_once(
    settings: Settings, small_corpus: Path
) -> None:
    first = await run_session(settings, _request(small_corpus))
    assert first.record.status == "completed" and first.report is not None
    assert_citations_resolve(first.report, first.state)  # text came back for extraction and the citation check
    assert first.report["findings"], "facts were extracted from the stored text"

    sources = first.state["sources"]
    with_text = [s for s in sources.values() if s.get("content_key")]
    assert with_text, "local documents arrive with their text"
    assert all(not s.get("full_content") for s in sources.values()), "page text left the graph state"
    content_db = settings.data_dir / "content.db"
    stored = {(str(u), str(k)): int(n) for u, k, n in _rows(content_db, "SELECT url, sha256, length FROM page_text")}
    for source in with_text:
        assert stored[(source["url"], source["content_key"])] == source["content_length"]

    # The checkpoints hold no page text: a long sentence of a stored page is nowhere in them.
    _, key = next(iter(stored))
    text = str(_rows(content_db, f"SELECT text FROM page_text WHERE sha256 = '{key}'")[0][0])
    probe = max(text.split(". "), key=len)[:200].encode()
    blobs = _rows(settings.data_dir / "checkpoints.db", "SELECT checkpoint FROM checkpoints")
    blobs += _rows(settings.data_dir / "checkpoints.db", "SELECT value FROM writes")
    assert len(probe) > 40 and not any(probe in bytes(b[0]) for b in blobs if b[0])

    second = await run_session(settings, _request(small_corpus))
    assert second.record.status == "completed"
    assert _rows(content_db, "SELECT COUNT(*) FROM page_text")[0][0] == len(stored), "same pages, stored once"
    refs = _rows(content_db, "SELECT session_id, COUNT(*) FROM page_text_refs GROUP BY session_id")
    assert {sid for sid, _ in refs} == {first.record.id, second.record.id}


async def test_content_store_round_trip_and_release(tmp_path: Path) -> None:
    store = await ContentStore.open(tmp_path / "content.db")
    try:
        keys = await store.put_many("s1", {"https://a.example/x": "alpha text", "https://b.example/y": "beta text"})
        assert keys["https://a.example/x"] == content_key("alpha text")
        await store.put_many("s2", {"https://a.example/x": "alpha text"})
        refs = [("https://a.example/x", keys["https://a.example/x"]), ("https://b.example/y", "0" * 64)]
        assert await store.get_many(refs) == {refs[0]: "alpha text"}
        assert await store.stats() == (2, len("alpha text") + len("beta text"))

        assert await store.release(["s1"]) == 1  # beta was only s1's; alpha is still s2's
        assert await store.get_many(refs[:1]) == {refs[0]: "alpha text"}
        assert await store.release(["s2"]) == 1
        assert await store.stats() == (0, 0)
    finally:
        await store.aclose()


async def test_nodes_see_the_same_source_dicts_as_before(tmp_path: Path) -> None:
    from research_tool.engines.offline import OfflineEngine
    from research_tool.graph.context import ResearchContext
    from research_tool.providers.gateway import SearchGateway

    store = await ContentStore.open(tmp_path / "content.db")
    try:
        ctx = ResearchContext(
            session_id="s",
            settings=Settings(_env_file=None, data_dir=tmp_path),
            engine=OfflineEngine(),  # type: ignore[call-arg]
            gateway=SearchGateway(),
            client=None,
            page_texts=store,  # type: ignore[arg-type]
        )
        entry = {"url": "https://a.example/x", "title": "A", "snippet": "s", "full_content": "whole page", "rank": 1}
        stored = await store_page_text(ctx, {entry["url"]: entry})
        kept = stored[entry["url"]]
        assert kept["full_content"] is None and kept["content_length"] == len("whole page")
        assert (await with_page_text(ctx, stored))[entry["url"]] == entry
        # A later sighting without text keeps the key; one with new text takes the new key.
        merged = merge_sources(stored, {entry["url"]: {**entry, "full_content": None}})
        assert merged[entry["url"]]["content_key"] == kept["content_key"]
        newer = merge_sources(stored, {entry["url"]: {**kept, "content_key": "f" * 64, "content_length": 3}})
        assert newer[entry["url"]]["content_key"] == "f" * 64 and newer[entry["url"]]["content_length"] == 3
    finally:
        await store.aclose()


async def test_text_sqlite_cannot_encode_is_stored_with_a_replacement_character(tmp_path: Path) -> None:
    store = await ContentStore.open(tmp_path / "content.db")
    try:
        keys = await store.put_many("s1", {"https://example.org/pdf": "caf\ud800e au lait"})
        got = await store.get_many([("https://example.org/pdf", keys["https://example.org/pdf"])])
    finally:
        await store.aclose()
    assert list(got.values()) == ["caf\ufffde au lait"]


async def test_sessions_storing_and_releasing_at_once_each_get_their_own_texts_back(tmp_path: Path) -> None:
    store = await ContentStore.open(tmp_path / "content.db")

    async def session(n: int) -> None:
        for round_ in range(5):
            texts = {f"https://example.org/{n}/{round_}/{k}": f"page {n}.{round_}.{k} " * 200 for k in range(8)}
            keys = await store.put_many(f"s{n}", texts)
            got = await store.get_many(keys.items())
            assert {url: got[(url, key)] for url, key in keys.items()} == texts
        await store.release([f"s{n}"])

    try:
        await asyncio.gather(*(session(n) for n in range(6)))
        assert await store.stats() == (0, 0)
    finally:
        await store.aclose()
