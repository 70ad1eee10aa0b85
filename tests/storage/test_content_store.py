"""Item 11: page text lives in a content store shared by the sessions of a data dir, not in the graph state;
issue 24: a local document's text is referenced from the corpus index, not copied, and checkpoints are compressed."""

from __future__ import annotations

import asyncio
import sqlite3
import zlib
from contextlib import closing
from pathlib import Path

from research_tool.core.settings import Settings
from research_tool.graph.nodes.page_text import store_page_text, with_page_text
from research_tool.models.request import ResearchRequest
from research_tool.models.state import merge_sources
from research_tool.providers.local_corpus.index import CorpusIndex
from research_tool.providers.search.local import INDEX_FILE
from research_tool.runtime.checkpoints import COMPRESSED_PREFIX
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


def _checkpoint_blobs(data_dir: Path) -> list[bytes]:
    """Every checkpoint and write blob, decompressed as the saver reads it."""
    db = data_dir / "checkpoints.db"
    typed = _rows(db, "SELECT type, checkpoint FROM checkpoints") + _rows(db, "SELECT type, value FROM writes")
    blobs: list[bytes] = []
    for kind, blob in typed:
        if not blob:
            continue
        data = bytes(blob)  # type: ignore[arg-type]
        blobs.append(zlib.decompress(data) if str(kind).startswith(COMPRESSED_PREFIX) else data)
    return blobs


async def test_local_documents_are_referenced_from_the_index_not_copied(settings: Settings, small_corpus: Path) -> None:
    first = await run_session(settings, _request(small_corpus))
    assert first.record.status == "completed" and first.report is not None
    assert_citations_resolve(first.report, first.state)  # text came back for extraction and the citation check
    assert first.report["findings"], "facts were extracted from the referenced text"

    sources = first.state["sources"]
    with_text = [s for s in sources.values() if s.get("content_key")]
    assert with_text, "local documents arrive with their text"
    assert all(not s.get("full_content") for s in sources.values()), "page text left the graph state"
    assert all(s.get("content_ref") == "local" for s in with_text)
    content_db = settings.data_dir / "content.db"
    assert _rows(content_db, "SELECT COUNT(*) FROM page_text")[0][0] == 0, "no copy of what the index holds"
    indexed = await CorpusIndex(settings.data_dir / INDEX_FILE).texts([s["url"] for s in with_text])
    for source in with_text:
        assert content_key(indexed[source["url"]]) == source["content_key"]
        assert len(indexed[source["url"]]) == source["content_length"]

    # The checkpoints hold no page text: a long sentence of a document is nowhere in them.
    text = indexed[with_text[0]["url"]]
    probe = max(text.split(". "), key=len)[:200].encode()
    blobs = _checkpoint_blobs(settings.data_dir)
    assert len(probe) > 40 and blobs and not any(probe in b for b in blobs)
    assert any(with_text[0]["url"].encode() in b for b in blobs), "the decompressed blobs are what was searched"


async def test_a_local_document_edited_since_is_read_as_gone(tmp_path: Path) -> None:
    from research_tool.engines.offline import OfflineEngine
    from research_tool.graph.context import ResearchContext
    from research_tool.providers.gateway import SearchGateway
    from research_tool.providers.search.local import LocalProvider

    folder = tmp_path / "docs"
    folder.mkdir()
    doc = folder / "kettle.md"
    doc.write_text("# Kettles\n\nA bimetallic strip switches the kettle off when the steam reaches it.\n")
    settings = Settings(_env_file=None, data_dir=tmp_path / "data")  # type: ignore[call-arg]
    store = await ContentStore.open(tmp_path / "data" / "content.db")
    try:
        ctx = ResearchContext(
            session_id="s",
            settings=settings,
            engine=OfflineEngine(),  # type: ignore[call-arg]
            gateway=SearchGateway(),
            client=None,
            page_texts=store,  # type: ignore[arg-type]
        )
        provider = LocalProvider(settings, None, corpus_dirs=[folder])  # type: ignore[arg-type]
        [hit] = await provider.search("bimetallic kettle")
        entry = {**hit.model_dump(mode="json"), "found_by": ["local"]}
        stored = await store_page_text(ctx, {hit.url: entry})
        assert stored[hit.url]["content_ref"] == "local" and await store.stats() == (0, 0)
        assert (await with_page_text(ctx, stored))[hit.url]["full_content"] == hit.full_content

        doc.write_text("# Kettles\n\nRewritten: a thermostat switches it off.\n")
        await provider.ensure_indexed(force=True)
        again = (await with_page_text(ctx, stored))[hit.url]
        assert not again.get("full_content") and again["snippet"] == hit.snippet  # as a page that could not be read
    finally:
        await store.aclose()


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
