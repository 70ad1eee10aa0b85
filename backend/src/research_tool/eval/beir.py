"""BEIR's SciFact files and its retrieval metrics: the claims, the relevance judgements (with the test split derived
when its qrels file is absent), nDCG@k, recall@k and a percentile. Shared by the lexical benchmark (`scifact`), the
encoder's (`semantic`) and `make bench`'s local index figures.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

DEFAULT_DATA_DIR = Path("../shared/eval/scifact")
CUTOFF = 10


def load_queries(path: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                record = json.loads(line)
                queries[str(record["_id"])] = record["text"]
    return queries


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """`query-id corpus-id score` per line (tab separated, header first); relevance > 0 only."""
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle):
            parts = line.strip().split("\t")
            if line_no == 0 and not parts[-1].strip().lstrip("-").isdigit():
                continue  # header
            if len(parts) < 3:
                continue
            query_id, doc_id, score = parts[0].strip(), parts[1].strip(), int(parts[2])
            if score > 0:
                qrels.setdefault(query_id, {})[doc_id] = score
    return qrels


def load_judgements(data: Path, name: str) -> dict[str, dict[str, int]]:
    """qrels/<name>.tsv; for "test" without that file, and for "test-evidence", the claims outside train whose
    metadata names evidence (188 of BEIR's 300 test claims: those labelled SUPPORT or CONTRADICT)."""
    path = data / "qrels" / f"{name}.tsv"
    if name != "test-evidence" and (path.exists() or name != "test"):
        return load_qrels(path)
    train = load_qrels(data / "qrels" / "train.tsv")
    qrels: dict[str, dict[str, int]] = {}
    with (data / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            record = json.loads(line)
            query_id, evidence = str(record["_id"]), record.get("metadata") or {}
            if query_id not in train and evidence:
                qrels[query_id] = {str(doc_id): 1 for doc_id in evidence}
    return qrels


def ndcg_at_k(ranked_ids: list[str], relevant: dict[str, int], k: int = CUTOFF) -> float:
    """nDCG@k with linear gain and log2 discount (trec_eval's ndcg_cut, as BEIR reports it)."""
    dcg = sum(relevant.get(doc_id, 0) / math.log2(rank + 2) for rank, doc_id in enumerate(ranked_ids[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at_k(ranked_ids: list[str], relevant: dict[str, int], k: int) -> float:
    return len(set(ranked_ids[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))]
