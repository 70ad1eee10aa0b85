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
    result.seconds = round(time.perf_counter() - started, 2)
    return result
