"""The local index with dense vectors (the `semantic` extra): BM25 from FTS5 mixed with a sentence encoder.

`HybridIndex` is a `CorpusIndex` whose collections may carry vectors (providers/local_corpus/vectors.py):
- indexing a folder brings the FTS5 rows up to date as before, then encodes the new and changed documents of its
  collections that carry vectors (all of them when `embed_new`, which `research-tool index --semantic` and
  `RESEARCH_SEMANTIC_SEARCH=1` set). The async path encodes in worker processes
  (`python -m research_tool.providers.local_corpus.embed_worker`, one per core unless RESEARCH_ENCODER_PROCESSES
  says otherwise, each taking a shard of the pending documents), so a server's event loop and its other threads
  keep running; progress arrives as (done, total) through a callback.
- searching a folder whose collection carries vectors of the loaded model mixes BM25 with cosine similarity
  (vectors.mix_scores); any other search is the plain BM25 one, with no model loaded.

`open_corpus_index` gives a `HybridIndex` when the extra is installed, else a plain `CorpusIndex`: without the
extra nothing is imported or loaded.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from research_tool.core.logging import get_logger
from research_tool.providers.local_corpus.embeddings import (
    EncoderUnavailableError,
    SentenceEncoder,
    extra_missing,
    load_encoder,
    unavailable_reason,
)
from research_tool.providers.local_corpus.index import (
    FTS_SNIPPET_MAX_CHARS,
    SNIPPET_TOKENS,
    CorpusHit,
    CorpusIndex,
    FileProgress,
    IndexStats,
    _folder_key,
    _location,
    _prefix_bounds,
    build_match_query,
    long_snippet,
)
from research_tool.providers.local_corpus.index_pool import Cancel, run_in_index_pool
from research_tool.providers.local_corpus.vectors import (
    CANDIDATES,
    DEFAULT_DENSE_WEIGHT,
    CollectionVectors,
    EmbedStats,
    embed_pending,
    load_vectors,
    mix_scores,
    semantic_collections,
    vectors_version,
)

if TYPE_CHECKING:
    import sqlite3

    import numpy as np
    import numpy.typing as npt

log = get_logger(__name__)

Progress = Callable[[int, int], None]
WORKER_MODULE = "research_tool.providers.local_corpus.embed_worker"
ENCODER_PROCESSES_ENV = "RESEARCH_ENCODER_PROCESSES"


@dataclass
class MixPool:
    """One query's candidates: BM25's (doc id, score) in rank order and the dense side's scores."""

    match: str
    lexical: list[tuple[int, float]]
    dense_top: dict[int, float]
    dense_lookup: Callable[[int], float | None]
    roots: list[str] | None

    def ranked(self, weight: float) -> list[tuple[int, float]]:
        """(doc id, mixed score), best first, at dense weight `weight`."""
        mixed = mix_scores(dict(self.lexical), self.dense_top, self.dense_lookup, weight)
        return sorted(mixed.items(), key=lambda item: (-item[1], item[0]))


class HybridIndex(CorpusIndex):
    """A CorpusIndex whose searches mix BM25 with dense vectors where a collection carries them."""

    def __init__(
        self,
        db_path: Path | str | None = None,
        *,
        embed_new: bool = False,
        dense_weight: float = DEFAULT_DENSE_WEIGHT,
        candidates: int = CANDIDATES,
        max_file_bytes: int | None = None,
        **weights: float,
    ) -> None:
        super().__init__(db_path, max_file_bytes=max_file_bytes, **weights)
        self.embed_new = embed_new
        self.dense_weight = float(dense_weight)
        self.candidates = int(candidates)
        self._vectors: dict[int, CollectionVectors] = {}
        self._vectors_lock = threading.Lock()
        self._encoder_failed: str | None = None
        # Why the last index_folder could not store vectors (the FTS5 rows are up to date regardless), or None.
        self.last_embed_error: str | None = None

    # --- indexing --------------------------------------------------------------------------------

    def collections_to_embed(self, path: Path | str) -> list[int]:
        """The collections under (or holding) `path` that carry vectors, or all of them when `embed_new`."""
        root = str(Path(path).expanduser().resolve())
        with closing(self._connect()) as conn:
            overlapping = self._collections(conn, [root])
            if self.embed_new:
                return overlapping
            marked = semantic_collections(conn)
        return [c for c in overlapping if c in marked]

    def embed_sync(
        self, collections: Sequence[int], *, progress: Progress | None = None, shard: tuple[int, int] = (0, 1)
    ) -> list[EmbedStats]:
        """Encode pending documents in this process (the eval and each worker use it)."""
        encoder = load_encoder()
        results = []
        for collection in collections:
            with closing(self._connect()) as conn:
                results.append(embed_pending(conn, collection, encoder, progress=progress, shard=shard))
        return results

    def index_folder_sync(
        self,
        path: Path | str,
        *,
        cancel: Cancel | None = None,
        progress: Progress | None = None,
        file_progress: FileProgress | None = None,
    ) -> IndexStats:
        stats = super().index_folder_sync(path, cancel=cancel, file_progress=file_progress)
        collections = self.collections_to_embed(path)
        if collections:
            for result in self.embed_sync(collections, progress=progress):
                log.info("local_vectors_updated", root=str(path), **result.as_dict())
        return stats

    async def index_folder(
        self, path: Path | str, *, progress: Progress | None = None, file_progress: FileProgress | None = None
    ) -> IndexStats:
        """FTS5 rows in a thread, then vectors in a worker process (never on the event loop). A failure to
        embed is logged and kept in `last_embed_error`: searches stay BM25 where vectors are missing."""
        folder = _folder_key([path])
        stats = await run_in_index_pool(
            folder,
            lambda cancel: CorpusIndex.index_folder_sync(self, path, cancel=cancel, file_progress=file_progress),
        )
        collections = await run_in_index_pool(folder, lambda _cancel: self.collections_to_embed(path))
        self.last_embed_error = None
        if collections:
            try:
                await self._embed_in_worker(collections, progress)
            except EncoderUnavailableError as exc:
                self.last_embed_error = exc.message
        return stats

    async def _embed_in_worker(self, collections: Sequence[int], progress: Progress | None) -> None:
        """Encode in `encoder_processes()` worker processes, each taking the pending documents of one shard."""
        missing = unavailable_reason()
        if missing:
            log.warning("local_vectors_failed", collections=list(collections), error=missing)
            raise EncoderUnavailableError(missing)
        shards = encoder_processes()
        counts: dict[int, tuple[int, int]] = {}

        def shard_progress(shard: int, done: int, total: int) -> None:
            counts[shard] = (done, total)
            if progress is not None:
                progress(sum(d for d, _ in counts.values()), sum(t for _, t in counts.values()))

        await asyncio.gather(*(self._run_worker(collections, (i, shards), shard_progress) for i in range(shards)))

    async def _run_worker(
        self, collections: Sequence[int], shard: tuple[int, int], progress: Callable[[int, int, int], None]
    ) -> None:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            WORKER_MODULE,
            f"--shard={shard[0]}/{shard[1]}",
            str(self.db_path),
            *(str(c) for c in collections),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None and process.stderr is not None
        errors = asyncio.ensure_future(process.stderr.read())
        try:
            async for line in process.stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if "stats" in event:
                    log.info("local_vectors_updated", collection=event.get("collection"), **event["stats"])
                elif "done" in event:
                    progress(shard[0], int(event["done"]), int(event["total"]))
            code = await process.wait()
        except BaseException:
            if process.returncode is None:
                process.kill()
                await process.wait()
            raise
        finally:
            stderr = (await errors).decode("utf-8", errors="replace")
        if code != 0:
            last = stderr.strip().splitlines()[-1:] or [f"exit code {code}"]
            log.warning("local_vectors_failed", collections=list(collections), error=last[0][:300])
            raise EncoderUnavailableError(f"embedding failed: {last[0][:300]}")

    # --- searching -------------------------------------------------------------------------------

    def _encoder(self) -> SentenceEncoder | None:
        if self._encoder_failed is not None:
            return None
        try:
            return load_encoder()
        except EncoderUnavailableError as exc:
            self._encoder_failed = exc.message
            log.warning("semantic_search_unavailable", reason=exc.message)
            return None

    def _collection_vectors(self, conn: sqlite3.Connection, collection: int) -> CollectionVectors:
        version = vectors_version(conn, collection)
        with self._vectors_lock:
            cached = self._vectors.get(collection)
            if cached is not None and cached.version == version:
                return cached
        loaded = load_vectors(conn, collection)
        with self._vectors_lock:
            self._vectors[collection] = loaded
        return loaded

    def search_sync(
        self,
        query: str,
        *,
        roots: Sequence[Path | str] | None = None,
        limit: int = 10,
        cancel: Cancel | None = None,
        query_vector: object | None = None,
    ) -> list[CorpusHit]:
        """BM25 mixed with cosine similarity where the folders carry vectors; `query_vector` (the query already
        encoded) skips encoding; `cancel` aborts a statement in progress, as in the plain search."""
        pool = self.mix_pool(query, roots=roots, limit=limit, query_vector=query_vector)
        if pool is None:
            return super().search_sync(query, roots=roots, limit=limit, cancel=cancel)
        chosen = pool.ranked(self.dense_weight)[:limit]
        with closing(self._connect()) as conn:
            if cancel is not None:
                cancel.watch(conn)
            by_id = self._hits_for(conn, [row_id for row_id, _ in chosen], pool.roots, pool.match)
        return [
            _replace_score(by_id[row_id], score, rank)
            for rank, (row_id, score) in enumerate(((r, s) for r, s in chosen if r in by_id), start=1)
        ]

    def mix_pool(
        self,
        query: str,
        *,
        roots: Sequence[Path | str] | None = None,
        limit: int = 10,
        query_vector: object | None = None,
    ) -> MixPool | None:
        """The pooled BM25 and dense candidates of a query, or None where the plain BM25 search applies (no
        vectors under `roots`, vectors of another model, no encoder, or a query with no searchable word)."""
        match = build_match_query(query)
        if limit <= 0 or match is None:
            return None
        root_strs = [str(Path(r).expanduser().resolve()) for r in roots] if roots is not None else None
        with closing(self._connect()) as conn:
            marked = semantic_collections(conn)
            wanted = [c for c in self._collections(conn, root_strs) if c in marked] if marked else []
        if not wanted:
            return None
        encoder = self._encoder()
        if encoder is None:
            return None
        current = [c for c in wanted if marked[c] == encoder.model_key]
        if not current:  # vectors of another model: BM25 until the folder is indexed again
            return None
        if query_vector is None:
            query_vector = encoder.encode([query])[0]
        with closing(self._connect()) as conn:
            lexical = self._bm25_ranked(conn, match, root_strs, max(limit, self.candidates))
            dense_top, dense_lookup = self._dense_candidates(conn, current, query_vector, root_strs)
        return MixPool(match, lexical, dense_top, dense_lookup, root_strs)

    def _bm25_ranked(
        self, conn: sqlite3.Connection, match: str, roots: Sequence[str] | None, limit: int
    ) -> list[tuple[int, float]]:
        """BM25's top (doc id, score), higher better: CorpusIndex.search_sync's ranking query without fetching
        texts and snippets for the whole candidate list (only the final hits need them)."""
        clause, params = self._roots_clause(roots)
        ranked: list[tuple[int, float]] = []
        for collection in self._collections(conn, roots):
            table = f"docs_fts_{int(collection)}"
            ranked += conn.execute(
                f"""
                SELECT f.rowid, bm25({table}, ?, ?, ?) AS score
                FROM {table} f JOIN docs d ON d.id = f.rowid
                WHERE {table} MATCH ? AND {clause}
                ORDER BY score LIMIT ?
                """,
                (self.title_weight, self.body_weight, self.names_weight, match, *params, limit),
            ).fetchall()
        ranked.sort(key=lambda row: (row[1], row[0]))
        return [(int(row_id), -float(score)) for row_id, score in ranked[:limit]]

    def _dense_candidates(
        self,
        conn: sqlite3.Connection,
        collections: Sequence[int],
        query_vector: object,
        roots: Sequence[str] | None,
    ) -> tuple[dict[int, float], Callable[[int], float | None]]:
        """The dense top candidates under `roots` (doc id -> cosine) and a lookup of any document's cosine."""
        import numpy as np

        scores: dict[int, float] = {}
        pooled_ids: list[npt.NDArray[np.int64]] = []
        pooled_scores: list[npt.NDArray[np.float32]] = []
        for collection in collections:
            vectors = self._collection_vectors(conn, collection)
            if not len(vectors.doc_ids):
                continue
            sims = vectors.matrix @ np.asarray(query_vector, dtype=np.float32)
            pooled_ids.append(vectors.doc_ids)
            pooled_scores.append(sims)
        if not pooled_ids:
            return {}, _no_score
        ids = np.concatenate(pooled_ids)
        sims = np.concatenate(pooled_scores)
        lookup = dict(zip(ids.tolist(), sims.tolist(), strict=True))
        take = min(len(ids), self.candidates * (1 if roots is None else 4))
        top = np.argpartition(-sims, take - 1)[:take] if take < len(ids) else np.arange(len(ids))
        top = top[np.argsort(-sims[top], kind="stable")]
        inside = self._inside_roots(conn, [int(ids[i]) for i in top], roots)
        for i in top:
            row_id = int(ids[i])
            if row_id in inside:
                scores[row_id] = float(sims[i])
                if len(scores) >= self.candidates:
                    break
        return scores, lookup.get

    @staticmethod
    def _inside_roots(conn: sqlite3.Connection, row_ids: Sequence[int], roots: Sequence[str] | None) -> set[int]:
        if roots is None:
            return set(row_ids)
        inside: set[int] = set()
        for start in range(0, len(row_ids), 500):
            chunk = list(row_ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for row_id, path in conn.execute(f"SELECT id, path FROM docs WHERE id IN ({marks})", chunk):
                if any(path == r or path.startswith(_prefix_bounds(r)[0]) for r in roots):
                    inside.add(int(row_id))
        return inside

    @staticmethod
    def _hits_for(
        conn: sqlite3.Connection, row_ids: Sequence[int], roots: Sequence[str] | None, match: str
    ) -> dict[int, CorpusHit]:
        """The hits to return: FTS5's snippet where the document matches the query's words, else (a document
        only the dense side found) the start of its text."""
        found: dict[int, CorpusHit] = {}
        if not row_ids:
            return found
        marks = ",".join("?" * len(row_ids))
        rows = conn.execute(
            f"SELECT id, path, doc_key, url, collection FROM docs WHERE id IN ({marks})", list(row_ids)
        ).fetchall()
        for row_id, path, doc_key, url, collection in rows:
            table = f"docs_fts_{int(collection)}"
            # snippet() is quadratic in a long document's matches (index.py): the linear one past the bound
            text = conn.execute(
                f"SELECT title, body, CASE WHEN length(body) <= {FTS_SNIPPET_MAX_CHARS} "
                f"THEN snippet({table}, 1, '', '', ' … ', {SNIPPET_TOKENS}) END FROM {table} "
                f"WHERE {table} MATCH ? AND rowid = ?",
                (match, row_id),
            ).fetchone()
            if text is not None and text[2] is None:
                text = (text[0], text[1], long_snippet(text[1] or "", match))
            if text is None:
                plain = conn.execute(f"SELECT title, body FROM {table} WHERE rowid = ?", (row_id,)).fetchone()
                if plain is None:
                    continue
                words = (plain[1] or "").split()
                cut = 2 * SNIPPET_TOKENS
                text = (*plain, " ".join(words[:cut]) + (" …" if len(words) > cut else ""))
            title, body, snippet = text
            location = _location(path, doc_key, roots)
            found[int(row_id)] = CorpusHit(
                doc_id=doc_key or location,
                title=title or "",
                text=body or "",
                url=url,
                location=location,
                path=path,
                score=0.0,
                snippet=re.sub(r"\s+", " ", snippet or "").strip(),
                rank=0,
            )
        return found


def _no_score(_row_id: int) -> float | None:
    return None


def _replace_score(hit: CorpusHit, score: float, rank: int) -> CorpusHit:
    from dataclasses import replace

    return replace(hit, score=round(score, 6), rank=rank)


def open_corpus_index(
    db_path: Path | str | None = None, *, semantic: bool = False, max_file_bytes: int | None = None
) -> CorpusIndex:
    """A HybridIndex when the `semantic` extra is installed (new folders get vectors when `semantic`), else a
    plain CorpusIndex. Cheap: nothing is imported or loaded until a collection with vectors is searched."""
    if extra_missing() is not None:
        if semantic:
            log.warning("semantic_search_unavailable", reason=extra_missing())
        return CorpusIndex(db_path, max_file_bytes=max_file_bytes)
    return HybridIndex(db_path, embed_new=semantic, max_file_bytes=max_file_bytes)


def encoder_processes() -> int:
    """Worker processes for one indexing run: RESEARCH_ENCODER_PROCESSES, else one per core (at most 4)."""
    configured = os.environ.get(ENCODER_PROCESSES_ENV, "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, min(4, os.cpu_count() or 1))


def worker_main(argv: Sequence[str]) -> int:
    """`python -m research_tool.providers.local_corpus.embed_worker [--shard=I/N] DB COLLECTION...`: JSON lines."""
    args = list(argv)
    shard = (0, 1)
    if args and args[0].startswith("--shard="):
        index, count = args.pop(0).removeprefix("--shard=").split("/")
        shard = (int(index), int(count))
    db_path, *collections = args
    index_file = HybridIndex(db_path)

    def emit(event: dict[str, object]) -> None:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

    for collection in (int(c) for c in collections):

        def progress(done: int, total: int, collection: int = collection) -> None:
            emit({"collection": collection, "done": done, "total": total})

        [stats] = index_file.embed_sync([collection], progress=progress, shard=shard)
        emit({"collection": collection, "stats": stats.as_dict()})
    return 0
