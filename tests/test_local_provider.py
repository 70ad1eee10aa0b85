"""The `local` provider: indexes its folders on first use and returns citable, fetch-free results."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from research_tool.core.errors import BadInputError, ProviderUnavailableError
from research_tool.core.settings import Settings
from research_tool.providers.local_corpus.index import CorpusIndex
from research_tool.providers.registry import create_provider
from research_tool.providers.search.local import MAX_CONTENT_CHARS, LocalProvider, truncate_text


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as shared:
        yield shared


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", corpus_dirs="")


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    (root / "guides").mkdir(parents=True)
    (root / "guides" / "subprocess.txt").write_text(
        "Running subprocesses\n\nsubprocess.run(args, timeout=5, capture_output=True) waits for the command. "
        "If the timeout expires, the child is killed and TimeoutExpired is raised.\n",
        encoding="utf-8",
    )
    (root / "corpus.jsonl").write_text(
        json.dumps({"_id": "4983", "title": "Threads and timeouts", "text": "A thread can join with a timeout."})
        + "\n",
        encoding="utf-8",
    )
    return root


async def test_search_returns_full_documents_with_location(
    settings: Settings, client: httpx.AsyncClient, docs: Path
) -> None:
    provider = LocalProvider(settings, client, corpus_dirs=[docs])
    assert provider.is_available()
    assert (provider.name, provider.privacy, provider.kind) == ("local", "local", "local")
    assert provider.requests_per_second >= 1000

    results = await provider.search("subprocess timeout capture output", max_results=5)
    first = results[0]
    assert first.title == "Running subprocesses"
    assert first.location == "guides/subprocess.txt"
    assert first.url == (docs / "guides" / "subprocess.txt").resolve().as_uri()
    assert first.full_content is not None and "TimeoutExpired is raised" in first.full_content
    assert "timeout" in first.snippet.lower() and len(first.snippet) < len(first.full_content) + 10
    assert (first.source_name, first.rank, first.query) == ("local", 1, "subprocess timeout capture output")
    jsonl = next(r for r in results if r.location == "corpus.jsonl#4983")
    assert jsonl.url.endswith("corpus.jsonl#4983") and jsonl.title == "Threads and timeouts"
    assert [r.rank for r in results] == list(range(1, len(results) + 1))
    # The index lives in the data dir.
    assert (settings.data_dir / "local_index.db").exists()


async def test_indexes_once_and_searches_only_its_folders(
    settings: Settings, client: httpx.AsyncClient, docs: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.txt").write_text("Other folder\n\nA timeout elsewhere.\n", encoding="utf-8")
    shared_index = CorpusIndex(tmp_path / "shared.db")
    await shared_index.index_folder(other)

    provider = LocalProvider(settings, client, corpus_dirs=[docs], index=shared_index)
    results = await provider.search("timeout")
    assert {r.location for r in results} == {"guides/subprocess.txt", "corpus.jsonl#4983"}

    # Indexed on first use only: a second search, even from a new provider on the same index
    # (the collect node builds one per cycle), does not walk the folder again.
    (docs / "late.txt").write_text("Late\n\nA timeout added later.\n", encoding="utf-8")
    assert all(r.location != "late.txt" for r in await provider.search("timeout"))
    again = LocalProvider(settings, client, corpus_dirs=[docs], index=CorpusIndex(tmp_path / "shared.db"))
    assert all(r.location != "late.txt" for r in await again.search("timeout"))
    stats = await provider.ensure_indexed(force=True)
    assert stats.files_added == 1 and stats.files_unchanged == 2
    assert any(r.location == "late.txt" for r in await provider.search("timeout"))


async def test_corpus_dirs_default_to_settings(tmp_path: Path, client: httpx.AsyncClient, docs: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data", corpus_dirs=str(docs))
    provider = create_provider("local", settings, client)
    assert isinstance(provider, LocalProvider)
    assert provider.corpus_dirs == [docs]
    assert (await provider.search("thread join"))[0].location == "corpus.jsonl#4983"


async def test_missing_folder_is_bad_input(settings: Settings, client: httpx.AsyncClient, tmp_path: Path) -> None:
    missing = tmp_path / "does-not-exist"
    provider = LocalProvider(settings, client, corpus_dirs=[missing])
    assert provider.unavailable_reason() == f"corpus folder not found: {missing}"
    with pytest.raises(BadInputError) as caught:
        await provider.search("anything")
    assert str(caught.value) == f"corpus folder not found: {missing}"
    assert "\n" not in str(caught.value)


async def test_no_folder_configured_is_unavailable(settings: Settings, client: httpx.AsyncClient) -> None:
    provider = LocalProvider(settings, client)
    assert not provider.is_available()
    assert "RESEARCH_CORPUS_DIRS" in (provider.unavailable_reason() or "")
    with pytest.raises(ProviderUnavailableError):
        await provider.search("anything")


async def test_hostile_query_returns_empty_not_error(settings: Settings, client: httpx.AsyncClient, docs: Path) -> None:
    provider = LocalProvider(settings, client, corpus_dirs=[docs])
    assert await provider.search('" * -- : NOT') == []


def test_truncate_text_cuts_long_documents_at_a_boundary() -> None:
    short = "One. Two."
    assert truncate_text(short) == short
    long_text = ("Sentence number one is here. " * 10_000).strip()
    cut = truncate_text(long_text)
    assert len(cut) <= MAX_CONTENT_CHARS and cut.endswith(".")
