"""SciFact retrieval benchmark for the local corpus index: index time, query latency, nDCG@10.

    python -m research_tool.eval.scifact [DATA_DIR] [--qrels train] [--title-weight W] [--semantic]

DATA_DIR holds BEIR's SciFact files: corpus.jsonl, queries.jsonl, qrels/<name>.tsv. The corpus is
indexed into a fresh SQLite file in a temporary folder, exactly as `research-tool index` would.
With no qrels/test.tsv, the test split is derived from queries.jsonl: the claims outside the train qrels whose
metadata names evidence abstracts (those abstracts are the relevant ones).

`--semantic` (the `semantic` extra; research_tool.eval.semantic) also measures BM25 mixed with the sentence
encoder on train and test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
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
from research_tool.providers.local_corpus.index import (
    DEFAULT_BODY_WEIGHT,
    DEFAULT_TITLE_WEIGHT,
    CorpusIndex,
)


def evaluate_scifact(
    data_dir: Path | str = DEFAULT_DATA_DIR,
    qrels_name: str = "train",
    *,
    title_weight: float = DEFAULT_TITLE_WEIGHT,
    body_weight: float = DEFAULT_BODY_WEIGHT,
    index: CorpusIndex | None = None,
) -> dict[str, Any]:
    """Index the corpus (unless `index` is given, already built), run every judged query, score it."""
    data = Path(data_dir)
    corpus = data / "corpus.jsonl"
    queries = load_queries(data / "queries.jsonl")
    qrels = load_judgements(data, qrels_name)
    with tempfile.TemporaryDirectory(prefix="scifact-eval-") as tmp:
        index_s = None
        if index is None:
            index = CorpusIndex(Path(tmp) / "index.db", title_weight=title_weight, body_weight=body_weight)
            started = time.perf_counter()
            stats = index.index_folder_sync(corpus)
            index_s = time.perf_counter() - started
            docs = stats.docs_total
        else:
            docs = None
        ranking_latencies: list[float] = []
        provider_latencies: list[float] = []
        ndcgs: list[float] = []
        recalls: list[float] = []
        judged = [qid for qid in qrels if qid in queries]
        for query_id in judged:
            started = time.perf_counter()
            hits = index.search_sync(queries[query_id], roots=[corpus], limit=100)
            ranking_latencies.append(time.perf_counter() - started)
            ranked = [hit.doc_id for hit in hits]
            ndcgs.append(ndcg_at_k(ranked, qrels[query_id]))
            recalls.append(recall_at_k(ranked, qrels[query_id], 100))
            # What the local provider asks for: the top 10 with text and snippet.
            started = time.perf_counter()
            index.search_sync(queries[query_id], roots=[corpus], limit=10)
            provider_latencies.append(time.perf_counter() - started)
    return {
        "qrels": qrels_name,
        "documents": docs,
        "queries": len(judged),
        "index_s": round(index_s, 3) if index_s is not None else None,
        "latency_top10_p50_ms": round(1000 * statistics.median(provider_latencies), 2),
        "latency_top10_p95_ms": round(1000 * percentile(provider_latencies, 0.95), 2),
        "latency_top100_p50_ms": round(1000 * statistics.median(ranking_latencies), 2),
        "latency_top100_p95_ms": round(1000 * percentile(ranking_latencies, 0.95), 2),
        "ndcg@10": round(statistics.fmean(ndcgs), 4),
        "recall@100": round(statistics.fmean(recalls), 4),
        "title_weight": index.title_weight,
        "body_weight": index.body_weight,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_dir", nargs="?", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--qrels", default="train")
    parser.add_argument("--title-weight", type=float, default=DEFAULT_TITLE_WEIGHT)
    parser.add_argument("--body-weight", type=float, default=DEFAULT_BODY_WEIGHT)
    parser.add_argument("--semantic", action="store_true", help="also BM25 mixed with the sentence encoder")
    args = parser.parse_args(argv)
    configure_logging("console", "WARNING")
    if not (args.data_dir / "corpus.jsonl").exists():
        print(f"SciFact data not found in {args.data_dir}", file=sys.stderr)
        return 2
    result = evaluate_scifact(args.data_dir, args.qrels, title_weight=args.title_weight, body_weight=args.body_weight)
    width = max(len(key) for key in result)
    print("SciFact (BEIR) on the local corpus index")
    for key, value in result.items():
        print(f"  {key:<{width}}  {value}")
    print("  anchors: BM25 (BEIR) 0.665, Elasticsearch 0.690 nDCG@10")
    if args.semantic:
        from research_tool.eval import semantic

        return semantic.main([str(args.data_dir)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
