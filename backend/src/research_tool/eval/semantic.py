"""SciFact with the `semantic` extra: BM25 against BM25 mixed with the sentence encoder, on train and test.

    python -m research_tool.eval.semantic [DATA_DIR] [--cache-dir DIR] [--latency-queries N]

The corpus is indexed with vectors into `<cache dir>/scifact-semantic.db` (EVAL_CACHE_DIR, default
data/eval-cache) as `research-tool index --semantic` does it (FTS5 rows, then the encoder's worker processes; the
wall time, the load average and the workers' CPU per document are printed): the first run encodes the 5,183
abstracts (about 3 minutes on 2 idle cores with onnxruntime), later runs find nothing pending
(the index is incremental), so `make eval` pays for the encoding once. The mix weight is chosen on train from
`WEIGHTS` and then measured on test; the default weight in vectors.py is the one this run chose. Query vectors
are computed once per claim and reused across weights (`search_sync(query_vector=...)`, the same code path).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

from research_tool.core.logging import configure_logging
from research_tool.eval.beir import (
    DEFAULT_DATA_DIR,
    load_judgements,
    load_queries,
    ndcg_at_k,
    percentile,
    recall_at_k,
)
from research_tool.providers.local_corpus.embeddings import encoder_threads, load_encoder, unavailable_reason
from research_tool.providers.local_corpus.hybrid import HybridIndex, MixPool, encoder_processes
from research_tool.providers.local_corpus.index import CorpusIndex

WEIGHTS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
INDEX_FILE = "scifact-semantic.db"


def default_cache_dir() -> Path:
    return Path(os.environ.get("EVAL_CACHE_DIR", "data/eval-cache"))


def vector_bytes(index: CorpusIndex) -> int:
    """Bytes the vector tables take in the index file (SQLite's dbstat, pages included)."""
    import sqlite3

    with closing(sqlite3.connect(index.db_path)) as conn:
        try:
            row = conn.execute(
                "SELECT SUM(pgsize) FROM dbstat WHERE name IN ('doc_vectors', 'semantic_collections')"
            ).fetchone()
            return int(row[0] or 0)
        except sqlite3.OperationalError:  # SQLite built without dbstat: count the stored bytes
            row = conn.execute("SELECT SUM(length(vector) + length(doc_hash) + 16) FROM doc_vectors").fetchone()
            return int(row[0] or 0)


def _pools(
    index: HybridIndex, corpus: Path, queries: dict[str, str], query_ids: list[str], vectors: dict[str, Any]
) -> dict[str, MixPool]:
    """Each query's pooled candidates, computed once and ranked at every weight (HybridIndex.search_sync's path)."""
    pools = {}
    for query_id in query_ids:
        pool = index.mix_pool(queries[query_id], roots=[corpus], limit=100, query_vector=vectors[query_id])
        if pool is None:
            raise RuntimeError(f"no vectors for {corpus} in {index.db_path}")
        pools[query_id] = pool
    return pools


def _bm25_scores(
    pools: dict[str, MixPool], qrels: dict[str, dict[str, int]], doc_keys: dict[int, str]
) -> dict[str, float]:
    ndcgs, recalls = [], []
    for query_id, relevant in qrels.items():
        ranked = [doc_keys[row_id] for row_id, _ in pools[query_id].lexical]
        ndcgs.append(ndcg_at_k(ranked, relevant))
        recalls.append(recall_at_k(ranked, relevant, 100))
    return {"ndcg@10": round(statistics.fmean(ndcgs), 4), "recall@100": round(statistics.fmean(recalls), 4)}


def _scores(
    pools: dict[str, MixPool], qrels: dict[str, dict[str, int]], doc_keys: dict[int, str], weight: float
) -> dict[str, float]:
    ndcgs, recalls = [], []
    for query_id, relevant in qrels.items():
        ranked = [doc_keys[row_id] for row_id, _ in pools[query_id].ranked(weight)[:100]]
        ndcgs.append(ndcg_at_k(ranked, relevant))
        recalls.append(recall_at_k(ranked, relevant, 100))
    return {"ndcg@10": round(statistics.fmean(ndcgs), 4), "recall@100": round(statistics.fmean(recalls), 4)}


def evaluate(data_dir: Path, cache_dir: Path, *, latency_queries: int = 200) -> dict[str, Any]:
    corpus = (data_dir / "corpus.jsonl").resolve()
    cache_dir.mkdir(parents=True, exist_ok=True)
    index = HybridIndex(cache_dir / INDEX_FILE, embed_new=True)
    embedded: list[int] = [0]

    def progress(done: int, total: int) -> None:
        embedded[0] = total

    started = time.perf_counter()
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_before = os.getloadavg()[0]
    # As `research-tool index --semantic` and the server do it: FTS5 rows in a thread, vectors in worker processes.
    asyncio.run(index.index_folder(corpus, progress=progress))
    if index.last_embed_error:
        raise RuntimeError(f"embedding failed: {index.last_embed_error}")
    index_s = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    worker_cpu = (children.ru_utime + children.ru_stime) - (children_before.ru_utime + children_before.ru_stime)
    encoder = load_encoder(allow_download=False)
    queries = load_queries(data_dir / "queries.jsonl")
    names = ["train", "test"] + (["test-evidence"] if (data_dir / "qrels" / "test.tsv").exists() else [])
    splits = {name: load_judgements(data_dir, name) for name in names}
    splits = {name: {q: r for q, r in qrels.items() if q in queries} for name, qrels in splits.items()}
    vectors: dict[str, Any] = {}
    encode_ms: list[float] = []
    for qrels in splits.values():
        for query_id in qrels:
            if query_id not in vectors:
                began = time.perf_counter()
                vectors[query_id] = encoder.encode([queries[query_id]])[0]
                encode_ms.append(1000 * (time.perf_counter() - began))
    result: dict[str, Any] = {
        "model": encoder.model_key,
        "runtime": f"{encoder.runtime}, {encoder_processes()} worker processes x {encoder_threads()} thread",
        "index_s (FTS5 + vectors of pending documents)": round(index_s, 1),
        "load average (1 min) at start / end of indexing": (round(load_before, 1), round(os.getloadavg()[0], 1)),
        "documents embedded in this run": embedded[0],
        "worker CPU-s per embedded document (models loaded included)": (
            round(worker_cpu / embedded[0], 4) if embedded[0] else None
        ),
        "vector bytes per 1,000 documents": None,
        "query encoding p50/p95 ms": (
            round(statistics.median(encode_ms), 1),
            round(percentile(encode_ms, 0.95), 1),
        ),
    }
    size = vector_bytes(index)
    docs = sum(1 for _ in corpus.open(encoding="utf-8"))
    result["documents"] = docs
    result["vector bytes per 1,000 documents"] = round(1000 * size / docs)
    # BM25 alone (the same FTS5 rows: each pool's BM25 list) on both splits, then the weight fitted on train,
    # then test at it.
    with closing(index._connect()) as conn:
        doc_keys = {int(row_id): str(key) for row_id, key in conn.execute("SELECT id, doc_key FROM docs")}
    judged = list(dict.fromkeys(q for qrels in splits.values() for q in qrels))
    pools = _pools(index, corpus, queries, judged, vectors)
    for name, qrels in splits.items():
        result[f"{name} BM25 ({len(qrels)} claims)"] = _bm25_scores(pools, qrels, doc_keys)
    by_weight = {weight: _scores(pools, splits["train"], doc_keys, weight) for weight in WEIGHTS}
    best = max(WEIGHTS, key=lambda w: (by_weight[w]["ndcg@10"], -abs(w - 0.5)))
    result["train hybrid by weight (nDCG@10)"] = {w: s["ndcg@10"] for w, s in by_weight.items()}
    result["fitted weight (train)"] = best
    result["train hybrid at fitted weight"] = by_weight[best]
    for name in names[1:]:
        result[f"{name} hybrid at fitted weight"] = _scores(pools, splits[name], doc_keys, best)
        result[f"{name} hybrid by weight (nDCG@10, for reference)"] = {
            w: _scores(pools, splits[name], doc_keys, w)["ndcg@10"] for w in WEIGHTS
        }
    index.dense_weight = best
    # Latency of a top-10 search as the local provider asks for it, query encoding included.
    sample = list(splits["train"])[:latency_queries]
    plain, mixed, plain_cpu, mixed_cpu = [], [], [], []
    for query_id in sample:
        began, began_cpu = time.perf_counter(), time.process_time()
        CorpusIndex.search_sync(index, queries[query_id], roots=[corpus], limit=10)
        plain.append(1000 * (time.perf_counter() - began))
        plain_cpu.append(1000 * (time.process_time() - began_cpu))
        began, began_cpu = time.perf_counter(), time.process_time()
        index.search_sync(queries[query_id], roots=[corpus], limit=10)
        mixed.append(1000 * (time.perf_counter() - began))
        mixed_cpu.append(1000 * (time.process_time() - began_cpu))
    result["top-10 latency BM25 p50/p95 ms"] = (round(statistics.median(plain), 1), round(percentile(plain, 0.95), 1))
    result["top-10 latency hybrid p50/p95 ms"] = (
        round(statistics.median(mixed), 1),
        round(percentile(mixed, 0.95), 1),
    )
    result["latency added p95 ms"] = round(percentile(mixed, 0.95) - percentile(plain, 0.95), 1)
    # CPU time (one thread): what the wall times above would be on an idle machine
    result["CPU added per search p50/p95 ms"] = (
        round(statistics.median(mixed_cpu) - statistics.median(plain_cpu), 1),
        round(percentile(mixed_cpu, 0.95) - percentile(plain_cpu, 0.95), 1),
    )
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--latency-queries", type=int, default=200)
    args = parser.parse_args(argv)
    configure_logging("console", "WARNING")
    reason = unavailable_reason(allow_download=False)
    if reason:
        print(f"skipped SciFact with the semantic extra: {reason}", file=sys.stderr)
        return 0
    if not (args.data_dir / "corpus.jsonl").exists():
        print(f"SciFact data not found in {args.data_dir}", file=sys.stderr)
        return 2
    result = evaluate(args.data_dir, args.cache_dir or default_cache_dir(), latency_queries=args.latency_queries)
    width = max(len(key) for key in result)
    print("SciFact with the semantic extra (BM25 mixed with all-MiniLM-L6-v2 by z-score)")
    for key, value in result.items():
        print(f"  {key:<{width}}  {value}")
    if not (args.data_dir / "qrels" / "test.tsv").exists():
        print("  test: the claims outside the train qrels whose metadata names evidence (no qrels/test.tsv here)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
