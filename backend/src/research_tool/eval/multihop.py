"""Multi-hop evidence: does the research loop cite every gold paragraph, and does it beat one BM25 query?

For HotpotQA and MuSiQue (the `*_train100` sets): index each set's corpus as jsonl, research every question
with the offline engine and the `local` provider, and count the questions whose cited sources include every
gold paragraph. The baseline is a single BM25 query (the question) returning as many documents as that
session cited. Also: citation precision checked independently of the engine (the cited source really
contains the cited sentence), unresolvable citations, time and provider calls per question.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from research_tool.core.logging import configure_logging
from research_tool.core.settings import Settings
from research_tool.models.request import ResearchRequest
from research_tool.providers.local_corpus.hybrid import open_corpus_index
from research_tool.providers.local_corpus.index import CorpusIndex
from research_tool.runtime.composition import open_research_services

DEFAULT_EVAL_DIR = Path(__file__).resolve().parents[4].parent / "shared" / "eval"
MARKER = re.compile(r"\[(\d+)\]")
SPACE = re.compile(r"\s+")


@dataclass
class Question:
    id: str
    text: str
    gold: set[str]  # document ids


@dataclass
class Dataset:
    name: str
    questions: list[Question]
    documents: list[dict[str, str]] = field(default_factory=list)  # {id, title, text}


def load_hotpotqa(folder: Path) -> Dataset:
    corpus = json.loads((folder / "hipporag_hotpotqa_train100_corpus.json").read_text(encoding="utf-8"))
    ids = {title: f"h{i:04d}" for i, title in enumerate(corpus)}
    documents = [{"id": ids[t], "title": t, "text": "".join(s).strip()} for t, s in corpus.items()]
    raw = json.loads((folder / "hipporag_hotpotqa_train100.json").read_text(encoding="utf-8"))
    questions = [
        Question(q["_id"], q["question"], {ids[title] for title, _ in q["supporting_facts"] if title in ids})
        for q in raw
    ]
    return Dataset("hotpotqa", questions, documents)


def load_musique(folder: Path) -> Dataset:
    corpus = json.loads((folder / "hipporag_musique_train100_corpus.json").read_text(encoding="utf-8"))
    documents = [{"id": f"m{i:04d}", "title": d["title"], "text": d["text"]} for i, d in enumerate(corpus)]
    by_content = {(d["title"], SPACE.sub(" ", d["text"]).strip()): d["id"] for d in documents}
    raw = json.loads((folder / "hipporag_musique_train100.json").read_text(encoding="utf-8"))
    questions = []
    for q in raw:
        gold = {
            by_content[(p["title"], SPACE.sub(" ", p["paragraph_text"]).strip())]
            for p in q["paragraphs"]
            if p["is_supporting"] and (p["title"], SPACE.sub(" ", p["paragraph_text"]).strip()) in by_content
        }
        questions.append(Question(q["id"], q["question"], gold))
    return Dataset("musique", questions, documents)


LOADERS = {"hotpotqa": ("hotpotqa_train100", load_hotpotqa), "musique": ("musique_train100", load_musique)}


def write_corpus(dataset: Dataset, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "corpus.jsonl"
    lines = [json.dumps(d, ensure_ascii=False) for d in dataset.documents]
    text = "\n".join(lines) + "\n"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return folder


def doc_id(url: str) -> str:
    return url.rsplit("#", 1)[-1]


def _norm(text: str) -> str:
    return SPACE.sub(" ", MARKER.sub("", text)).strip().casefold()


def citation_precision(report: dict[str, Any], texts: dict[str, str]) -> tuple[int, int, int]:
    """(markers whose cited source contains the cited sentence, all markers, unresolvable markers).
    Checked here, independently of the engine's own check: a plain containment test on the source text."""
    by_id = {c["id"]: _norm(texts.get(doc_id(c["url"]), "")) for c in report["citations"]}
    supported = total = unresolvable = 0
    sentences = [s for s in re.split(r"(?<=[.!?\]])\s+(?=[A-Z])", report["answer"]) if MARKER.search(s)]
    sentences += [f["statement"] for f in report["findings"]]
    for sentence in sentences:
        claim = _norm(sentence).rstrip(" .")
        for n in MARKER.findall(sentence):
            total += 1
            source = by_id.get(f"[{n}]")
            if source is None:
                unresolvable += 1
            elif claim and claim in source:
                supported += 1
    return supported, total, unresolvable


async def evaluate(
    dataset: Dataset,
    work_dir: Path,
    tier: str,
    *,
    limit: int | None = None,
    concurrency: int = 4,
    semantic: bool = False,
) -> dict[str, Any]:
    corpus = write_corpus(dataset, work_dir / dataset.name / "corpus")
    questions = dataset.questions[:limit] if limit else dataset.questions
    run_dir = work_dir / dataset.name / (f"run-{tier}-semantic" if semantic else f"run-{tier}")
    settings = Settings(data_dir=run_dir, max_concurrent_sessions=concurrency, semantic_search=semantic)
    texts = {d["id"]: d["text"] for d in dataset.documents}
    # --semantic: the folder gets vectors (the `semantic` extra) and the local provider's searches mix them
    index = open_corpus_index(settings.db_path("local_index.db"), semantic=semantic)
    await index.index_folder(corpus)
    rows: list[dict[str, Any]] = []
    async with open_research_services(settings) as services:
        started: dict[str, tuple[Question, float]] = {}
        for question in questions:
            request = ResearchRequest(
                query=question.text,
                tier=tier,
                providers=["local"],
                corpus_dirs=[str(corpus)],
                fetch=False,
                formats=["json"],
            )
            record = await services.runner.create(request)
            started[record.id] = (question, time.monotonic())
            services.runner.launch(record.id)
        for session_id, (question, _started_at) in started.items():
            record = await services.runner.wait(session_id)
            report = await services.runner.report(session_id) if record.status == "completed" else None
            rows.append(await _score(question, report, index, corpus, texts, record.status))
    return _summary(dataset.name, tier, rows)


async def _score(
    question: Question,
    report: dict[str, Any] | None,
    index: CorpusIndex,
    corpus: Path,
    texts: dict[str, str],
    status: str,
) -> dict[str, Any]:
    cited = [doc_id(c["url"]) for c in (report or {}).get("citations", [])]
    k = max(1, len(cited))
    hits = await index.search(question.text, roots=[corpus], limit=k)
    baseline = [h.doc_id for h in hits]
    supported, total, unresolvable = citation_precision(report, texts) if report else (0, 0, 0)
    meta = (report or {}).get("metadata", {})
    return {
        "id": question.id,
        "status": status,
        "cited": len(cited),
        "loop_hit": bool(question.gold) and question.gold <= set(cited),
        "baseline_hit": bool(question.gold) and question.gold <= set(baseline),
        "loop_gold_found": len(question.gold & set(cited)),
        "baseline_gold_found": len(question.gold & set(baseline)),
        "gold": len(question.gold),
        "supported_markers": supported,
        "markers": total,
        "unresolvable": unresolvable,
        "duration_s": meta.get("duration_s", 0.0),
        "provider_calls": meta.get("provider_calls", 0),
        "iterations": meta.get("iterations", 0),
        "stop_reason": (report or {}).get("stop_reason"),
    }


def _summary(name: str, tier: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    loop = sum(r["loop_hit"] for r in rows) / n if n else 0.0
    base = sum(r["baseline_hit"] for r in rows) / n if n else 0.0
    markers = sum(r["markers"] for r in rows)
    stops: dict[str, int] = {}
    for r in rows:
        stops[str(r["stop_reason"])] = stops.get(str(r["stop_reason"]), 0) + 1
    return {
        "dataset": name,
        "tier": tier,
        "questions": n,
        "completed": sum(r["status"] == "completed" for r in rows),
        "all_gold_cited_loop": round(loop, 4),
        "all_gold_cited_single_bm25": round(base, 4),
        "ratio": round(loop / base, 3) if base else None,
        "gold_recall_loop": round(sum(r["loop_gold_found"] for r in rows) / max(1, sum(r["gold"] for r in rows)), 4),
        "gold_recall_single_bm25": round(
            sum(r["baseline_gold_found"] for r in rows) / max(1, sum(r["gold"] for r in rows)), 4
        ),
        "mean_sources_cited": round(statistics.fmean(r["cited"] for r in rows), 2) if n else 0.0,
        "citation_precision": round(sum(r["supported_markers"] for r in rows) / markers, 4) if markers else None,
        "unresolvable_citations": sum(r["unresolvable"] for r in rows),
        "seconds_per_question": round(statistics.fmean(r["duration_s"] for r in rows), 3) if n else 0.0,
        "provider_calls_per_question": round(statistics.fmean(r["provider_calls"] for r in rows), 2) if n else 0.0,
        "iterations_per_question": round(statistics.fmean(r["iterations"] for r in rows), 2) if n else 0.0,
        "stop_reasons": stops,
    }


def render_table(results: list[dict[str, Any]]) -> str:
    head = (
        "dataset",
        "tier",
        "n",
        "loop all-gold",
        "1×BM25 all-gold",
        "ratio",
        "loop recall",
        "BM25 recall",
        "cited",
        "cite precision",
        "unresolvable",
        "s/question",
        "calls/question",
    )
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for r in results:
        lines.append(
            " | ".join(
                str(x)
                for x in (
                    r["dataset"],
                    r["tier"],
                    r["questions"],
                    r["all_gold_cited_loop"],
                    r["all_gold_cited_single_bm25"],
                    r["ratio"],
                    r["gold_recall_loop"],
                    r["gold_recall_single_bm25"],
                    r["mean_sources_cited"],
                    r["citation_precision"],
                    r["unresolvable_citations"],
                    r["seconds_per_question"],
                    r["provider_calls_per_question"],
                )
            )
        )
    return "\n".join(lines)


async def run(
    eval_dir: Path,
    work_dir: Path,
    datasets: list[str],
    tiers: list[str],
    limit: int | None,
    semantic: bool = False,
) -> list[dict[str, Any]]:
    results = []
    for name in datasets:
        folder_name, loader = LOADERS[name]
        folder = eval_dir / folder_name
        if not folder.is_dir():
            print(f"skipped {name}: no data in {folder}", file=sys.stderr)
            continue
        dataset = loader(folder)
        for tier in tiers:
            results.append(await evaluate(dataset, work_dir, tier, limit=limit, semantic=semantic))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m research_tool.eval.multihop")
    parser.add_argument("--eval-dir", type=Path, default=DEFAULT_EVAL_DIR)
    parser.add_argument("--work-dir", type=Path, default=Path("data/eval"))
    parser.add_argument("--datasets", default="hotpotqa,musique")
    parser.add_argument("--tiers", default="simple,standard")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--semantic", action="store_true", help="index with vectors and mix them (semantic extra)")
    args = parser.parse_args(argv)
    configure_logging("console", "WARNING")
    results = asyncio.run(
        run(args.eval_dir, args.work_dir, args.datasets.split(","), args.tiers.split(","), args.limit, args.semantic)
    )
    print(render_table(results))
    out = args.work_dir / "multihop_results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
