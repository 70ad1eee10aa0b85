"""Dense vectors stored beside the FTS5 rows of the local index, and their z-score mix with BM25.

Two tables in the index file (created on first use; the FTS5 layout is untouched):
- `semantic_collections`: the collections that carry vectors, each with its folder and the encoder's model key
  (name, weights digest, pooling, truncation). A different model key drops the collection's vectors, so a model
  change re-embeds every document.
- `doc_vectors`: one row per document (its `docs.id`), the first 16 hex digits of the document hash it was
  computed from, and the vector as float16 bytes (384 x 2 = 768 bytes). A document whose hash changed, or that has
  no row, is "pending"; rows whose document is gone are deleted. So embedding is incremental: only new or changed
  documents are encoded, and an interrupted run resumes where it stopped (each chunk is its own transaction).

Mixing (`mix_scores`): BM25's top candidates and the dense top candidates are pooled; each score list is turned
into z-scores over its own top list, a document missing from BM25's list takes that list's lowest z, and the
final score is (1 - w) z_bm25 + w z_dense. w = `DEFAULT_DENSE_WEIGHT`, fitted on SciFact train (make eval).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from research_tool.providers.local_corpus.embeddings import SentenceEncoder

# Fitted on SciFact train (make eval, research_tool.eval.semantic): nDCG@10 at 0.2 0.729, 0.3 0.737, 0.4 0.739,
# 0.5 0.736, 0.6 0.729, 0.7 0.719 (BM25 alone 0.707); test at 0.4: 0.741 (BM25 0.692).
DEFAULT_DENSE_WEIGHT = 0.4
CANDIDATES = 100  # BM25 and dense candidates pooled before mixing
EMBED_CHUNK = 64  # documents encoded and committed together (one progress step)
HASH_CHARS = 16

SCHEMA = """
CREATE TABLE IF NOT EXISTS semantic_collections (
    collection INTEGER PRIMARY KEY, root TEXT NOT NULL, model TEXT NOT NULL, generation INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS doc_vectors (
    doc_id INTEGER PRIMARY KEY, collection INTEGER NOT NULL, doc_hash TEXT NOT NULL, vector BLOB NOT NULL);
"""


@dataclass
class EmbedStats:
    """What one `embed_pending` call did."""

    documents: int = 0  # documents in the collection
    embedded: int = 0  # encoded now (new or changed)
    removed: int = 0  # vectors of documents that are gone
    seconds: float = 0.0
    model: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "embedded": self.embedded,
            "removed": self.removed,
            "seconds": self.seconds,
            "model": self.model,
        }


def ensure_schema(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA)


def semantic_collections(conn: sqlite3.Connection) -> dict[int, str]:
    """Collection id -> model key, for collections that carry vectors and still exist with the same folder."""
    try:
        rows = conn.execute(
            "SELECT s.collection, s.model FROM semantic_collections s "
            "JOIN collections c ON c.id = s.collection AND c.root = s.root"
        ).fetchall()
    except sqlite3.OperationalError:  # no such table: nothing was ever embedded in this file
        return {}
    return {int(cid): str(model) for cid, model in rows}


def mark_semantic(conn: sqlite3.Connection, collection: int, model_key: str) -> None:
    """Make a collection carry vectors of `model_key`; vectors of another model (or folder) are dropped."""
    ensure_schema(conn)
    root = conn.execute("SELECT root FROM collections WHERE id = ?", (collection,)).fetchone()
    if root is None:
        return
    current = conn.execute(
        "SELECT root, model FROM semantic_collections WHERE collection = ?", (collection,)
    ).fetchone()
    if current == (root[0], model_key):
        return
    conn.execute("BEGIN IMMEDIATE")
    # Another encoding process (a shard of the same run) may have marked it meanwhile: read again under the lock.
    current = conn.execute(
        "SELECT root, model FROM semantic_collections WHERE collection = ?", (collection,)
    ).fetchone()
    if current == (root[0], model_key):
        conn.execute("COMMIT")
        return
    conn.execute("DELETE FROM doc_vectors WHERE collection = ?", (collection,))
    conn.execute(
        "INSERT INTO semantic_collections (collection, root, model) VALUES (?, ?, ?) "
        "ON CONFLICT(collection) DO UPDATE SET root = excluded.root, model = excluded.model, "
        "generation = generation + 1",
        (collection, root[0], model_key),
    )
    conn.execute("COMMIT")


def passage_text(title: str, body: str) -> str:
    """What is embedded for a document: its title, then its text (the encoder cuts at its token limit)."""
    return f"{title}\n{body}" if title else body


def pending_documents(conn: sqlite3.Connection, collection: int) -> list[tuple[int, str]]:
    """(doc id, hash prefix) of the collection's documents with no vector for their current content."""
    rows = conn.execute(
        f"""
        SELECT d.id, substr(d.doc_hash, 1, {HASH_CHARS}) FROM docs d LEFT JOIN doc_vectors v ON v.doc_id = d.id
        WHERE d.collection = ? AND (v.doc_id IS NULL OR v.doc_hash != substr(d.doc_hash, 1, {HASH_CHARS}))
        ORDER BY d.id
        """,
        (collection,),
    ).fetchall()
    return [(int(doc_id), str(digest)) for doc_id, digest in rows]


def embed_pending(
    conn: sqlite3.Connection,
    collection: int,
    encoder: SentenceEncoder,
    *,
    progress: Callable[[int, int], None] | None = None,
    shard: tuple[int, int] = (0, 1),
) -> EmbedStats:
    """Encode the collection's new and changed documents and store their vectors; drop vectors of gone ones.

    `progress(done, total)` is called after each committed chunk (and once at the start). `shard` (i, n): this
    call encodes the pending documents whose id is i modulo n, so n processes can share a run."""
    started = time.perf_counter()
    mark_semantic(conn, collection, encoder.model_key)
    stats = EmbedStats(model=encoder.model_key)
    conn.execute("BEGIN IMMEDIATE")
    stats.removed = conn.execute(
        "DELETE FROM doc_vectors WHERE collection = ? AND doc_id NOT IN (SELECT id FROM docs WHERE collection = ?)",
        (collection, collection),
    ).rowcount
    if stats.removed:
        _bump(conn, collection)
    conn.execute("COMMIT")
    index, shards = shard
    pending = [item for item in pending_documents(conn, collection) if item[0] % shards == index]
    stats.documents = int(conn.execute("SELECT COUNT(*) FROM docs WHERE collection = ?", (collection,)).fetchone()[0])
    table = f"docs_fts_{int(collection)}"
    if progress is not None:
        progress(0, len(pending))
    for start in range(0, len(pending), EMBED_CHUNK):
        chunk = pending[start : start + EMBED_CHUNK]
        marks = ",".join("?" * len(chunk))
        texts = {
            int(row_id): passage_text(title or "", body or "")
            for row_id, title, body in conn.execute(
                f"SELECT rowid, title, body FROM {table} WHERE rowid IN ({marks})", [doc_id for doc_id, _ in chunk]
            )
        }
        present = [(doc_id, digest) for doc_id, digest in chunk if doc_id in texts]
        vectors = encoder.encode([texts[doc_id] for doc_id, _ in present])
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO doc_vectors (doc_id, collection, doc_hash, vector) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(doc_id) DO UPDATE SET collection = excluded.collection, doc_hash = excluded.doc_hash, "
            "vector = excluded.vector",
            [
                (doc_id, collection, digest, vector.astype("<f2").tobytes())
                for (doc_id, digest), vector in zip(present, vectors, strict=True)
            ],
        )
        _bump(conn, collection)
        conn.execute("COMMIT")
        stats.embedded += len(present)
        if progress is not None:
            progress(min(start + len(chunk), len(pending)), len(pending))
    stats.seconds = round(time.perf_counter() - started, 3)
    return stats


@dataclass
class CollectionVectors:
    """A collection's vectors in memory: doc ids and a (n, 384) float32 matrix; `version` detects writes."""

    doc_ids: npt.NDArray[np.int64]
    matrix: npt.NDArray[np.float32]
    version: tuple[str, int]


def vectors_version(conn: sqlite3.Connection, collection: int) -> tuple[str, int]:
    """(model, generation): the generation grows with every write of the collection's vectors."""
    row = conn.execute(
        "SELECT model, generation FROM semantic_collections WHERE collection = ?", (collection,)
    ).fetchone()
    return (str(row[0]), int(row[1])) if row else ("", -1)


def _bump(conn: sqlite3.Connection, collection: int) -> None:
    conn.execute("UPDATE semantic_collections SET generation = generation + 1 WHERE collection = ?", (collection,))


def load_vectors(conn: sqlite3.Connection, collection: int) -> CollectionVectors:
    import numpy as np

    version = vectors_version(conn, collection)
    rows = conn.execute(
        "SELECT doc_id, vector FROM doc_vectors WHERE collection = ? ORDER BY doc_id", (collection,)
    ).fetchall()
    ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    matrix = (
        np.frombuffer(b"".join(row[1] for row in rows), dtype="<f2").reshape(len(rows), -1).astype(np.float32)
        if rows
        else np.zeros((0, 0), dtype=np.float32)
    )
    return CollectionVectors(ids, matrix, version)


def zscores(values: Sequence[float]) -> list[float]:
    if not values:
        return []
    mean = sum(values) / len(values)
    spread = (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5
    return [(v - mean) / spread if spread > 0 else 0.0 for v in values]


def mix_scores(
    bm25: dict[int, float],
    dense_top: dict[int, float],
    dense_all: Callable[[int], float | None],
    weight: float = DEFAULT_DENSE_WEIGHT,
) -> dict[int, float]:
    """Mixed scores of the pooled candidates (BM25's list and the dense list, both doc id -> score).

    z-scores of each list are taken over that list; a candidate missing from BM25's list takes its lowest z;
    one missing from the dense list gets its own dense score (`dense_all`) normalised by the dense list's
    mean and spread. Higher is better."""
    bm25_ids = list(bm25)
    bm25_z = dict(zip(bm25_ids, zscores([bm25[i] for i in bm25_ids]), strict=True))
    floor = min(bm25_z.values(), default=0.0)
    dense_values = list(dense_top.values())
    mean = sum(dense_values) / len(dense_values) if dense_values else 0.0
    spread = (sum((v - mean) ** 2 for v in dense_values) / len(dense_values)) ** 0.5 if dense_values else 0.0
    mixed: dict[int, float] = {}
    for doc_id in dict.fromkeys([*bm25_ids, *dense_top]):
        dense = dense_top.get(doc_id)
        if dense is None:
            dense = dense_all(doc_id)
        dense_z = (dense - mean) / spread if dense is not None and spread > 0 else (0.0 if dense is not None else None)
        lexical = bm25_z.get(doc_id, floor)
        mixed[doc_id] = (1.0 - weight) * lexical + weight * (dense_z if dense_z is not None else 0.0)
    return mixed
