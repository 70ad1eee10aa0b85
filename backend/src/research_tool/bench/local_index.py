"""Benchmark 5, local index: index time of the SciFact corpus (5,183 abstracts) in the local corpus
index, and query latency p50/p95 of a top-10 search (what the `local` provider asks for), over the
judged train claims. The measuring code is make eval's (research_tool.eval.scifact); this module finds
the data and reports the speed figures (nDCG@10 is make eval's figure, shown here for reference).

Data: `$EVAL_DATA_DIR/scifact`, else `../shared/eval/scifact` beside the checkout; skipped, saying
so, when absent (a fresh clone has no ../shared).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from research_tool.bench.results import BenchResult
from research_tool.eval.scifact import evaluate_scifact

DEFAULT_EVAL_DIR = Path(__file__).resolve().parents[4].parent / "shared" / "eval"
REQUIRED_FILES = ("corpus.jsonl", "queries.jsonl", "qrels/train.tsv")


def scifact_dir() -> Path:
    return Path(os.environ.get("EVAL_DATA_DIR", str(DEFAULT_EVAL_DIR))) / "scifact"


async def run_local_index(data_dir: Path | None = None) -> BenchResult:
    data = data_dir or scifact_dir()
    result = BenchResult(
        name="local_index",
        title="Local index: SciFact index time and top-10 query latency",
        parameters={"data": str(data), "qrels": "train", "index": "SQLite FTS5 (CorpusIndex), fresh file"},
    )
    missing = [name for name in REQUIRED_FILES if not (data / name).exists()]
    if missing:
        result.skipped = f"SciFact not found in {data} (missing {', '.join(missing)}); set EVAL_DATA_DIR"
        return result
    started = time.perf_counter()
    scores = await asyncio.to_thread(evaluate_scifact, data, "train")
    result.add("documents indexed", scores["documents"])
    result.add("index time", scores["index_s"], "s")
    result.add(
        "documents per second", round(scores["documents"] / scores["index_s"], 1) if scores["index_s"] else None, "/s"
    )
    result.add("query latency top-10 p50", scores["latency_top10_p50_ms"], "ms", note=f"{scores['queries']} queries")
    result.add("query latency top-10 p95", scores["latency_top10_p95_ms"], "ms")
    result.add("nDCG@10 (train qrels, make eval's figure)", scores["ndcg@10"])
    result.details["scifact"] = scores
    await asyncio.to_thread(add_semantic_figures, result, data)
    result.seconds = round(time.perf_counter() - started, 2)
    return result


SEMANTIC_SAMPLE = 64  # passages encoded to measure throughput (the whole corpus is make eval's, cached)
SEMANTIC_QUERIES = 200  # claims encoded one by one (query encoding latency) and searched (top-10 latency)


def _runtime_figures(encoder: Any, texts: list[str], claims: list[str]) -> dict[str, float]:
    """One runtime's encoding throughput and CPU per passage on `texts`, and its per-query encoding latency."""
    import statistics

    from research_tool.eval.beir import percentile

    encoder.encode(texts[:2])  # warm: first-run allocations are not the steady cost
    cpu, wall = time.process_time(), time.perf_counter()
    encoder.encode(texts)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    latencies, cpu_ms = [], []
    for claim in claims:
        began, began_cpu = time.perf_counter(), time.process_time()
        encoder.encode([claim])
        latencies.append(1000 * (time.perf_counter() - began))
        cpu_ms.append(1000 * (time.process_time() - began_cpu))
    return {
        "passages_per_s": round(len(texts) / wall, 2),
        "cpu_per_passage": round(cpu / len(texts), 4),
        "query_p50_ms": round(statistics.median(latencies), 1),
        "query_p95_ms": round(percentile(latencies, 0.95), 1),
        # CPU time is what an idle machine's wall time would be (one thread); the wall figures above wait for cores
        "query_cpu_p50_ms": round(statistics.median(cpu_ms), 1),
        "query_cpu_p95_ms": round(percentile(cpu_ms, 0.95), 1),
    }


def add_semantic_figures(result: BenchResult, data: Path) -> None:
    """The `semantic` extra's figures: encoding throughput on a sample of SciFact passages; vector bytes per
    document and top-10 latency (query encoding included) on make eval's cached SciFact index, when present."""
    import itertools
    import json
    import statistics
    from contextlib import closing

    from research_tool.eval import semantic
    from research_tool.eval.beir import load_queries, percentile
    from research_tool.providers.local_corpus.embeddings import (
        RUNTIMES,
        SentenceEncoder,
        encoder_threads,
        load_encoder,
        onnx_missing,
        unavailable_reason,
    )
    from research_tool.providers.local_corpus.hybrid import HybridIndex
    from research_tool.providers.local_corpus.index import CorpusIndex
    from research_tool.providers.local_corpus.vectors import passage_text, semantic_collections

    reason = unavailable_reason(allow_download=False)
    if reason:
        result.add("semantic: skipped", None, note=reason)
        return
    encoder = load_encoder(allow_download=False)
    with (data / "corpus.jsonl").open(encoding="utf-8") as handle:
        records = [json.loads(line) for line in itertools.islice(handle, SEMANTIC_SAMPLE)]
    texts = [passage_text(r.get("title") or "", r.get("text") or "") for r in records]
    claims = list(load_queries(data / "queries.jsonl").values())[:SEMANTIC_QUERIES]
    tokens = statistics.fmean(encoder.token_counts(texts))
    result.add(
        "semantic: runtime", encoder.runtime, note=f"{encoder_threads()} thread per process ({encoder.model_key})"
    )
    # Every runtime installed here, the active one first (its figures are the ones the index and searches get).
    for runtime in [encoder.runtime, *(r for r in RUNTIMES if r != encoder.runtime)]:
        if runtime.startswith("onnx") and onnx_missing():
            continue
        figures = _runtime_figures(
            encoder if runtime == encoder.runtime else SentenceEncoder(encoder.files, runtime=runtime), texts, claims
        )
        label = "" if runtime == encoder.runtime else f" ({runtime})"
        result.add(
            f"semantic: passages encoded per second{label}",
            figures["passages_per_s"],
            "/s",
            note=f"{tokens:.0f} tokens on average",
        )
        result.add(f"semantic: CPU seconds per passage{label}", figures["cpu_per_passage"], "s")
        result.add(f"semantic: query encoding p50{label}", figures["query_p50_ms"], "ms")
        result.add(f"semantic: query encoding p95{label}", figures["query_p95_ms"], "ms")
        result.add(
            f"semantic: query encoding CPU p50 / p95{label}",
            figures["query_cpu_p50_ms"],
            "ms",
            note=f"p95 {figures['query_cpu_p95_ms']} ms",
        )
    db = semantic.default_cache_dir() / semantic.INDEX_FILE
    index = HybridIndex(db) if db.exists() else None
    if index is not None:
        with closing(index._connect()) as conn:
            marked = semantic_collections(conn)
    if index is None or not marked:
        result.add("semantic: index figures", None, note=f"no cached SciFact index with vectors at {db}: make eval")
        return
    corpus = (data / "corpus.jsonl").resolve()
    docs = sum(1 for _ in corpus.open(encoding="utf-8"))
    result.add("semantic: vector bytes per document", round(semantic.vector_bytes(index) / docs), "B")
    plain, mixed, plain_cpu, mixed_cpu = [], [], [], []
    index.search_sync(claims[0], roots=[corpus], limit=10)  # warm: loads the encoder and the folder's vectors
    for text in claims:
        began, began_cpu = time.perf_counter(), time.process_time()
        CorpusIndex.search_sync(index, text, roots=[corpus], limit=10)
        plain.append(1000 * (time.perf_counter() - began))
        plain_cpu.append(1000 * (time.process_time() - began_cpu))
        began, began_cpu = time.perf_counter(), time.process_time()
        index.search_sync(text, roots=[corpus], limit=10)
        mixed.append(1000 * (time.perf_counter() - began))
        mixed_cpu.append(1000 * (time.process_time() - began_cpu))
    result.add("semantic: BM25 top-10 latency p50", round(statistics.median(plain), 1), "ms")
    result.add("semantic: BM25 top-10 latency p95", round(percentile(plain, 0.95), 1), "ms")
    result.add("semantic: hybrid top-10 latency p50", round(statistics.median(mixed), 1), "ms")
    result.add("semantic: hybrid top-10 latency p95", round(percentile(mixed, 0.95), 1), "ms")
    result.add("semantic: latency added p95", round(percentile(mixed, 0.95) - percentile(plain, 0.95), 1), "ms")
    result.add(
        "semantic: CPU added per search p50 / p95",
        round(statistics.median(mixed_cpu) - statistics.median(plain_cpu), 1),
        "ms",
        note=f"p95 {round(percentile(mixed_cpu, 0.95) - percentile(plain_cpu, 0.95), 1)} ms (idle-machine latency)",
    )
