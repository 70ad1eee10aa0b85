"""Fit the answer-sentence ranker (`engines/text/ranker_weights.json`) and measure it, with its ablation.

`python -m research_tool.eval.fit_ranker --cache DIR [--write]`

1. Candidate pools: every question's top paragraphs from the local index (as many as its tier's source budget:
   SQuAD 5, HotpotQA 15, how-to 5), saved under DIR so later runs skip retrieval.
2. Features: every candidate sentence's ranker features (`engines/text/ranker.py`) and its label (the sentence
   holds a gold answer), saved under DIR.
3. Fit: L2-regularised logistic regression (numpy, Newton steps) on the **fit** part only: SQuAD articles 24-35
   (with their held-out articles' questions as unanswerable pools, every sentence a negative) and the even
   HotpotQA questions. The `answered` threshold is the confidence that keeps answerable fit questions
   wrongly unanswered at most ANSWERABLE_FALSE_MAX while refusing as many unanswerable ones as it can.
4. Measure on fit and test parts, the BM25-over-sentences baseline beside each figure; then the ablation:
   refit without each feature, and run the whole selection (`select_answer`) without each kept rule.

`--semantic`: the same for the lexical+semantic weight set (the `semantic` extra's encoder: every candidate's
cosine with its question is computed once and cached under DIR); it is written beside the lexical one.
`--cv [--semantic]`: choose between variants inside the fit part: fit on all but one fold (SQuAD by article,
HotpotQA and MuSiQue by question; CV_FOLDS), read the top sentence on the fold left out; all features, then
without each. MuSiQue train100 (even questions fit, odd test; candidates its index's top 15 paragraphs, a
sentence gold when it holds the answer or an alias) is read in every fit and CV but trained on only when
`--fit-sets` names it (the packaged weights: FIT_SETS).
The test part is neither fitted nor read.
`--captured FILE [--semantic]`: `select_answer` on the runner's captured pools (`answers --capture FILE`), by
part, with the BM25 baseline on the same sources and how often the gold sentence is among the candidates.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from research_tool.engines.base import NumberedSource
from research_tool.engines.text import ranker
from research_tool.engines.text.answering import RULES, AnswerSelection, rank_candidates, select_answer
from research_tool.engines.text.candidates import build_candidates
from research_tool.engines.text.question_intent import classify_question
from research_tool.engines.text.ranker import FEATURES, SEMANTIC_FEATURES, Model
from research_tool.eval.answers import (
    SQUAD_HELD_OUT_EVERY,
    Item,
    bm25_top_sentence,
    contains_gold,
    hit_sources,
    load_howto,
    musique_items,
    squad_questions,
)
from research_tool.eval.multihop import DEFAULT_EVAL_DIR, load_hotpotqa, load_musique
from research_tool.providers.local_corpus.index import CorpusIndex

PER_PART = 1000  # answerable SQuAD questions per part (a fixed sample; the parts hold about 2,000 each)
PER_PART_UNANSWERABLE = 250
SOURCES = {"squad": 5, "hotpotqa": 15, "musique": 15, "howto": 5}
FIT_SETS = ("squad", "hotpotqa")  # the sets the packaged weights are fitted on (`--fit-sets` to try others)
L2 = 0.001
SET_WEIGHT = 5.0
STEPS = 300
RATE = 0.1
ANSWERABLE_FALSE_MAX = 0.05  # on the fit part; the target on the test part is 0.07
RUNNER_FALSE_MAX = (
    0.04  # on the runner's fit pools: the runner's test pools ran about 0.03 above its fit pools at one threshold
)
SEED = 7
CV_FOLDS = 4  # folds of the fit part for choosing between variants: SQuAD by article, HotpotQA by question


@dataclass
class Question:
    set: str
    part: str  # fit | test
    item: Item


def questions(eval_dir: Path) -> list[Question]:
    out: list[Question] = []
    _, parts = squad_questions(eval_dir / "squad_dev_part2")
    rng = random.Random(SEED)
    for part in ("fit", "test"):
        out += [Question("squad", part, i) for i in rng.sample(parts[part], PER_PART)]
        out += [Question("squad", part, i) for i in rng.sample(parts[f"{part}_unanswerable"], PER_PART_UNANSWERABLE)]
    hotpot = load_hotpotqa(eval_dir / "hotpotqa_train100")
    raw = {
        q["_id"]: q
        for q in json.loads((eval_dir / "hotpotqa_train100" / "hipporag_hotpotqa_train100.json").read_text())
    }
    for k, q in enumerate(hotpot.questions):
        answer = raw[q.id]["answer"]
        kind = "yes_no" if answer.casefold() in ("yes", "no") else "factoid"
        out.append(Question("hotpotqa", "fit" if k % 2 == 0 else "test", Item(q.id, q.text, [answer], kind, q.gold)))
    if (eval_dir / "musique_train100").is_dir():
        for k, item in enumerate(musique_items(eval_dir / "musique_train100")):
            out.append(Question("musique", "fit" if k % 2 == 0 else "test", item))
    return out


def fitted_on(qs: Sequence[Question], fit_sets: Sequence[str]) -> list[Question]:
    """The questions a fit trains on: the fit part of the chosen sets."""
    return [q for q in qs if q.part == "fit" and q.set in fit_sets]


def corpora(eval_dir: Path, cache: Path) -> dict[str, tuple[CorpusIndex, Path]]:
    """Each set's corpus folder, indexed under the cache."""
    from research_tool.eval.answers import _write_corpus

    documents, _ = squad_questions(eval_dir / "squad_dev_part2")
    squad = _write_corpus(documents, cache / "squad" / "corpus")
    hotpot = _write_corpus(load_hotpotqa(eval_dir / "hotpotqa_train100").documents, cache / "hotpotqa" / "corpus")
    howto = load_howto(eval_dir / "howto_pydoc" / "dev.jsonl", cache / "howto" / "demo_corpus").corpus
    folders = [("squad", squad), ("hotpotqa", hotpot), ("howto", howto)]
    if (eval_dir / "musique_train100").is_dir():
        musique = load_musique(eval_dir / "musique_train100").documents
        folders.append(("musique", _write_corpus(musique, cache / "musique" / "corpus")))
    out = {}
    for name, folder in folders:
        index = CorpusIndex(cache / f"{name}_index.db")
        index.index_folder_sync(folder)
        out[name] = (index, folder)
    return out


def pools(qs: Sequence[Question], eval_dir: Path, cache: Path) -> dict[str, list[NumberedSource]]:
    """Every question's candidate sources (cached as the hits' fields)."""
    path = cache / "pools.json"
    stored: dict[str, list[dict[str, str]]] = json.loads(path.read_text()) if path.exists() else {}
    missing = [q for q in qs if q.item.id not in stored]
    if missing:
        indexes = corpora(eval_dir, cache)
        for q in missing:
            index, folder = indexes[q.set]
            hits = index.search_sync(q.item.question, roots=[folder], limit=SOURCES[q.set])
            stored[q.item.id] = [{"url": h.url, "title": h.title, "text": h.text, "snippet": h.snippet} for h in hits]
        path.write_text(json.dumps(stored))
    from research_tool.models.entities import SourceResult

    return {
        q.item.id: [
            NumberedSource(
                n=i,
                source=SourceResult(
                    url=h["url"], title=h["title"], snippet=h["snippet"], source_name="local", full_content=h["text"]
                ),
            )
            for i, h in enumerate(stored[q.item.id], start=1)
        ]
        for q in qs
    }


ZERO = Model(weights=dict.fromkeys(FEATURES, 0.0), calibration={}, offset=0.0, answered_at=0.5)


def feature_rows(qs: Sequence[Question], sources: dict[str, list[NumberedSource]], cache: Path) -> dict[str, Any]:
    """Per question: the candidates' feature matrix, labels, and the BM25 baseline's pick holds the gold."""
    path = cache / "features.json"
    rows: dict[str, Any] = {}
    if path.exists():
        stored = json.loads(path.read_text())
        if stored.get("features") == list(FEATURES):
            rows = stored["rows"]
            if all(q.item.id in rows for q in qs):
                return rows
    for q in qs:
        if q.item.id in rows:
            continue
        intent = classify_question(q.item.question)
        pool = rank_candidates(intent, build_candidates(sources[q.item.id]), ZERO)
        rows[q.item.id] = {
            "x": [[c.features[f] for f in FEATURES] for c in pool],
            "y": [int(contains_gold(c.statement, q.item.answers)) if q.item.answers else 0 for c in pool],
            "base": bool(q.item.answers)
            and contains_gold(bm25_top_sentence(q.item.question, sources[q.item.id]), q.item.answers),
        }
    path.write_text(json.dumps({"features": list(FEATURES), "rows": rows}))
    return rows


def cosines(qs: Sequence[Question], sources: dict[str, list[NumberedSource]], cache: Path) -> dict[str, list[float]]:
    """Per question: the encoder's cosine of the question with every candidate (in the feature rows' order),
    cached under DIR. Each distinct text is encoded once."""
    path = cache / "cosines.json"
    stored: dict[str, list[float]] = json.loads(path.read_text()) if path.exists() else {}
    missing = [q for q in qs if q.item.id not in stored]
    if missing:
        from research_tool.providers.local_corpus.embeddings import load_encoder

        encoder = load_encoder(allow_download=False)
        statements = {
            q.item.id: [c.statement for d in build_candidates(sources[q.item.id]) for c in d.candidates]
            for q in missing
        }
        texts = list(dict.fromkeys([q.item.question for q in missing] + [t for v in statements.values() for t in v]))
        started = time.perf_counter()
        vectors = dict(zip(texts, encoder.encode(texts), strict=True))
        print(f"encoded {len(texts)} texts in {time.perf_counter() - started:.1f} s")
        for q in missing:
            question = vectors[q.item.question]
            stored[q.item.id] = [round(float(vectors[t] @ question), 5) for t in statements[q.item.id]]
        path.write_text(json.dumps(stored))
    return stored


def with_semantic(qs: Sequence[Question], rows: dict[str, Any], cos: dict[str, list[float]]) -> dict[str, Any]:
    """The feature rows with the semantic columns (SEMANTIC_FEATURES) appended, as the engine computes them:
    cosines for the packaged lexical ranker's top `SEMANTIC_CANDIDATES` sentences only."""
    lexical = ranker.load_model()
    w = np.array([lexical.weights[f] for f in FEATURES])
    out = {}
    for q in qs:
        row = rows[q.item.id]
        x = np.asarray(row["x"], dtype=float).reshape(-1, len(FEATURES))
        chosen = ranker.encoded_candidates(list(x @ w))
        extra = ranker.semantic_features({i: cos[q.item.id][i] for i in chosen}, len(x))
        columns = np.array([[e[f] for f in SEMANTIC_FEATURES] for e in extra]).reshape(-1, len(SEMANTIC_FEATURES))
        out[q.item.id] = {**row, "x": np.hstack([x, columns]).tolist()}
    return out


@dataclass
class Fitted:
    weights: np.ndarray  # one per kept feature
    calibration: np.ndarray  # one per kept feature, then one for the score
    offset: float
    answered_at: float


def set_weights(qs: Sequence[Question]) -> dict[str, float]:
    """Each set weighs as much in total as SQuAD does, but a question at most SET_WEIGHT times a SQuAD one
    (HotpotQA's 50 fit questions would drown otherwise, and would be over-fitted if weighed in full)."""
    counts: dict[str, int] = {}
    for q in qs:
        counts[q.set] = counts.get(q.set, 0) + 1
    top = max(counts.values())
    return {name: min(SET_WEIGHT, top / n) for name, n in counts.items()}


def fit_listwise(qs: Sequence[Question], rows: dict[str, Any], keep: Sequence[int]) -> np.ndarray:
    """Weights maximising the softmax probability of a question's answer sentences (Adam, L2)."""
    kept = [q for q in qs if rows[q.item.id]["x"] and any(rows[q.item.id]["y"])]
    per_set = set_weights(kept)
    data = [
        (np.asarray(rows[q.item.id]["x"], dtype=float)[:, keep], np.asarray(rows[q.item.id]["y"], dtype=float))
        for q in kept
    ]
    qw = np.array([per_set[q.set] for q in kept])
    qw /= qw.sum()
    w = np.zeros(len(keep))
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for step in range(1, STEPS + 1):
        grad = L2 * w
        for (x, y), a in zip(data, qw, strict=True):
            s = x @ w
            p = np.exp(s - s.max())
            grad += a * (x.T @ (p / p.sum() - y / y.sum()))
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        w -= RATE * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return w


def logistic(x: np.ndarray, labels: np.ndarray, l2: float = 1.0) -> tuple[np.ndarray, float]:
    """Logistic regression (L2 on the weights, not the offset) by Newton's method."""
    x = np.hstack([x, np.ones((len(x), 1))])
    theta = np.zeros(x.shape[1])
    penalty = np.full(x.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-np.clip(x @ theta, -30, 30)))
        hess = (x * (p * (1 - p))[:, None]).T @ x + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hess, x.T @ (p - labels) + penalty * theta)
        theta -= step
        if np.abs(step).max() < 1e-9:
            break
    return theta[:-1], float(theta[-1])


def lead_rows(
    qs: Sequence[Question], rows: dict[str, Any], w: np.ndarray, keep: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Each question's lead: its features and score, and whether the question is answerable."""
    xs, ys = [], []
    for q in qs:
        if rows[q.item.id]["x"]:
            x = np.asarray(rows[q.item.id]["x"], dtype=float)[:, keep]
            s = x @ w
            i = int(np.argmax(s))
            xs.append(np.append(x[i], s[i]))
            ys.append(float(bool(q.item.answers)))
    return np.array(xs), np.array(ys)


def leads(
    qs: Sequence[Question], rows: dict[str, Any], fitted: Fitted, keep: Sequence[int]
) -> list[tuple[Question, float, bool]]:
    """(question, the lead's confidence, the lead holds the gold) for each question."""
    out = []
    for q in qs:
        x = np.asarray(rows[q.item.id]["x"], dtype=float)
        if not len(x):
            out.append((q, 0.0, False))
            continue
        s = x[:, keep] @ fitted.weights
        i = int(np.argmax(s))
        z = float(np.append(x[i, keep], s[i]) @ fitted.calibration + fitted.offset)
        out.append((q, float(1 / (1 + np.exp(-z))), bool(rows[q.item.id]["y"][i])))
    return out


def fit_model(
    qs: Sequence[Question], rows: dict[str, Any], keep: Sequence[int], fit_sets: Sequence[str] = FIT_SETS
) -> Fitted:
    """Ranker weights (on the fit part of `fit_sets`), the confidence model (on the leads: do the sources
    answer the question?) and the threshold, all from the fit part."""
    fit_qs = fitted_on(qs, fit_sets)
    w = fit_listwise(fit_qs, rows, keep)
    calibration, offset = logistic(*lead_rows([q for q in fit_qs if q.set == "squad"], rows, w, keep))
    fitted = Fitted(w, calibration, offset, 0.5)
    squad = [t for t in leads(fit_qs, rows, fitted, keep) if t[0].set == "squad"]
    answerable = sorted(c for q, c, _ in squad if q.item.answers)
    fitted.answered_at = answerable[int(ANSWERABLE_FALSE_MAX * len(answerable))] if answerable else 0.5
    return fitted


def figures(tops: Sequence[tuple[Question, float, bool]], rows: dict[str, Any], at: float) -> dict[str, float]:
    answerable = [(q, c, ok) for q, c, ok in tops if q.item.answers and q.item.kind != "yes_no"]
    unanswerable = [(q, c) for q, c, _ in tops if not q.item.answers]
    out = {
        "first": _mean(ok for _, _, ok in answerable),
        "baseline": _mean(rows[q.item.id]["base"] for q, _, _ in answerable),
        "questions": float(len(answerable)),
    }
    if unanswerable:
        out["unanswerable_not_answered"] = _mean(c < at for _, c in unanswerable)
        out["answerable_wrongly_not_answered"] = _mean(c < at for _, c, _ in answerable)
    return out


def _mean(values: Any) -> float:
    values = [float(v) for v in values]
    return round(sum(values) / len(values), 3) if values else float("nan")


def report(qs: Sequence[Question], rows: dict[str, Any], keep: Sequence[int], fitted: Fitted) -> dict[str, Any]:
    out = {}
    for name in ("squad", "hotpotqa", "musique"):
        for part in ("fit", "test"):
            sub = [q for q in qs if q.set == name and q.part == part]
            out[f"{name}/{part}"] = figures(leads(sub, rows, fitted, keep), rows, fitted.answered_at)
    return out


# --- choosing inside the fit part: cross-validation by article ------------------------------------------


def fold(q: Question, position: int) -> int:
    """A fit question's fold: a SQuAD question's article (from its gold paragraph, "s07p012" -> 7), so no
    article is in two folds; a HotpotQA or MuSiQue question by its position. Unanswerable questions train no
    ranking."""
    if q.set == "squad" and q.item.gold_docs:
        return int(next(iter(q.item.gold_docs))[1:3]) % CV_FOLDS
    return position % CV_FOLDS


def cross_validate(
    qs: Sequence[Question], rows: dict[str, Any], keep: Sequence[int], fit_sets: Sequence[str] = FIT_SETS
) -> dict[str, float]:
    """Fit on all folds of the fit part but one (the questions of `fit_sets` only), read the top sentence on
    the one left out, for each fold: the held-out SQuAD, HotpotQA and MuSiQue first-sentence figures, every
    set's held-out questions read whether or not its set was fitted (the test part is not touched)."""
    fit_qs = [q for q in qs if q.part == "fit"]
    folds = {q.item.id: fold(q, k) for k, q in enumerate(fit_qs)}
    hits: dict[str, list[bool]] = {name: [] for name in dict.fromkeys(q.set for q in fit_qs)}
    for f in range(CV_FOLDS):
        fitted = fit_listwise([q for q in fit_qs if folds[q.item.id] != f and q.set in fit_sets], rows, keep)
        for q in fit_qs:
            row = rows[q.item.id]
            if folds[q.item.id] != f or not q.item.answers or q.item.kind == "yes_no":
                continue
            if not row["x"]:
                hits[q.set].append(False)
                continue
            scores = np.asarray(row["x"], dtype=float)[:, keep] @ fitted
            hits[q.set].append(bool(row["y"][int(np.argmax(scores))]))
    return {f"{name}_cv_first": _mean(v) for name, v in hits.items() if v}


# --- the whole selection, rule by rule -----------------------------------------------------------------


def selection_figures(
    qs: Sequence[Question],
    sources: dict[str, list[NumberedSource]],
    rules: frozenset[str],
    similarity: ranker.SentenceSimilarity | None = None,
) -> dict[str, float]:
    """The full `select_answer` on the questions: first sentence holds the gold, short answers, answered,
    yes/no verdicts, and the engine time per question."""
    first, anywhere, short_given, short_right, answered_un, answered_ok, verdicts, seconds = ([] for _ in range(8))
    for q in qs:
        started = time.perf_counter()
        sel = select_answer(q.item.question, sources[q.item.id], rules=rules, similarity=similarity)
        seconds.append(time.perf_counter() - started)
        if not q.item.answers:
            answered_un.append(sel.answered)
            continue
        if q.item.kind == "yes_no":
            verdicts.append((sel.verdict or "").casefold() == q.item.answers[0].casefold())
            continue
        answered_ok.append(sel.answered)
        first.append(bool(sel.answered and sel.sentences and contains_gold(_lead(sel), q.item.answers)))
        anywhere.append(sel.answered and any(contains_gold(c.statement, q.item.answers) for c in sel.sentences))
        short_given.append(bool(sel.short_answer))
        if sel.short_answer:
            short_right.append(contains_gold(sel.short_answer, q.item.answers))
    return {
        "first": _mean(first),
        "anywhere": _mean(anywhere),
        "short_precision": _mean(short_right),
        "short_coverage": _mean(short_given),
        "unanswerable_not_answered": _mean(not a for a in answered_un),
        "answerable_wrongly_not_answered": _mean(not a for a in answered_ok),
        "yes_no": _mean(verdicts),
        "seconds": round(sum(seconds) / max(1, len(seconds)), 4),
    }


def _lead(sel: AnswerSelection) -> str:
    return sel.sentences[0].statement


def howto_figures(eval_dir: Path, cache: Path, rules: frozenset[str], part: str) -> dict[str, float]:
    answer_set = load_howto(eval_dir / "howto_pydoc" / "dev.jsonl", cache / "howto" / "demo_corpus")
    index = CorpusIndex(cache / "howto_index.db")
    index.index_folder_sync(answer_set.corpus)
    items = answer_set.items[0::2] if part == "fit" else answer_set.items[1::2]
    ok = []
    for item in items:
        hits = index.search_sync(item.question, roots=[answer_set.corpus], limit=SOURCES["howto"])
        sel = select_answer(item.question, hit_sources(hits), rules=rules)
        text = " ".join(c.statement for c in sel.sentences[:2]) if sel.answered else ""
        ok.append(any(a in text for a in item.answers))
    return {"howto_first_two": _mean(ok)}


# --- `answered` calibrated on the runner's own pools ------------------------------------------------------


@dataclass
class RunnerLead:
    answerable: bool
    x: np.ndarray  # the lead's features, then its score
    fixed: bool | None  # answered whatever the threshold (True/False), or None when the threshold decides


def runner_leads(
    qs: Sequence[Question],
    captured: dict[str, list[dict[str, Any]]],
    similarity: ranker.SentenceSimilarity | None = None,
) -> list[RunnerLead]:
    """Each captured SQuAD question's lead as the runner's sources give it (`answers --capture`): its
    features and score under the packaged ranker (the lexical+semantic one with a `similarity`), and whether
    the threshold decides its `answered`."""
    model = ranker.load_model(semantic=similarity is not None)
    names = feature_names(similarity is not None)
    always = dataclasses.replace(model, answered_at=-1.0)
    never = dataclasses.replace(model, answered_at=2.0)
    out = []
    for q in qs:
        if q.item.question not in captured:
            continue
        sources = [NumberedSource.model_validate(s) for s in captured[q.item.question]]
        low = select_answer(q.item.question, sources, model=always, similarity=similarity).answered
        high = select_answer(q.item.question, sources, model=never, similarity=similarity).answered
        pool = rank_candidates(classify_question(q.item.question), build_candidates(sources), model, similarity)
        if not pool:
            out.append(RunnerLead(bool(q.item.answers), np.zeros(len(names) + 1), False))
            continue
        lead = min(pool, key=lambda c: (-c.score, c.n, c.index))
        x = np.array([*(lead.features[f] for f in names), lead.score])
        out.append(RunnerLead(bool(q.item.answers), x, low if low == high else None))
    return out


def captured_figures(
    eval_dir: Path, path: Path, similarity: ranker.SentenceSimilarity | None
) -> dict[str, dict[str, float]]:
    """`select_answer` on the sources the runner gave it (`answers --capture FILE`), SQuAD questions by part:
    the runner's own answer, re-read under the packaged weights (with `similarity`: the semantic set). Beside
    it the BM25-over-sentences baseline on the same sources and how often the gold is among the candidates."""
    captured = json.loads(path.read_text(encoding="utf-8"))
    _, parts = squad_questions(eval_dir / "squad_dev_part2")
    out = {}
    for part in ("fit", "test"):
        items = [i for i in parts[part] + parts[f"{part}_unanswerable"] if i.question in captured]
        if not items:
            continue
        first, base, gold_there, wrongly, refused, seconds = ([] for _ in range(6))
        for item in items:
            sources = [NumberedSource.model_validate(s) for s in captured[item.question]]
            started = time.perf_counter()
            sel = select_answer(item.question, sources, similarity=similarity)
            seconds.append(time.perf_counter() - started)
            if not item.answers:
                refused.append(not sel.answered)
                continue
            wrongly.append(not sel.answered)
            first.append(bool(sel.answered and sel.sentences and contains_gold(_lead(sel), item.answers)))
            base.append(contains_gold(bm25_top_sentence(item.question, sources), item.answers))
            statements = [c.statement for d in build_candidates(sources) for c in d.candidates]
            gold_there.append(any(contains_gold(t, item.answers) for t in statements))
        out[part] = {
            "first": _mean(first),
            "baseline": _mean(base),
            "gold_in_candidates": _mean(gold_there),
            "unanswerable_not_answered": _mean(refused),
            "answerable_wrongly_not_answered": _mean(wrongly),
            "answerable": float(len(first)),
            "unanswerable": float(len(refused)),
            "seconds": round(sum(seconds) / len(seconds), 4),
        }
    return out


def feature_names(semantic: bool) -> list[str]:
    return [*FEATURES, *SEMANTIC_FEATURES] if semantic else list(FEATURES)


def capture_runner_pools(qs: Sequence[Question], eval_dir: Path, work: Path, path: Path) -> None:
    """Ask the real runner (`local` provider, the simple tier) the fit part's SQuAD questions, answerable and
    unanswerable, and save the sources it hands the answer selection, by question."""
    from research_tool.eval.answers import load_squad, run_reports

    answer_set = load_squad(eval_dir / "squad_dev_part2", work)
    items = [q.item for q in qs if q.set == "squad" and q.part == "fit"]
    captured: dict[str, list[dict[str, Any]]] = {}
    asyncio.run(run_reports(answer_set, items, work, 4, captured))
    path.write_text(json.dumps(captured, ensure_ascii=False), encoding="utf-8")


def runner_figures(leads_: Sequence[RunnerLead], calibration: np.ndarray, offset: float, at: float) -> dict[str, float]:
    def answered(r: RunnerLead) -> bool:
        if r.fixed is not None:
            return r.fixed
        return float(1 / (1 + np.exp(-(r.x @ calibration + offset)))) >= at

    return {
        "unanswerable_not_answered": _mean(not answered(r) for r in leads_ if not r.answerable),
        "answerable_wrongly_not_answered": _mean(not answered(r) for r in leads_ if r.answerable),
        "questions": float(len(leads_)),
    }


def runner_threshold(leads_: Sequence[RunnerLead], calibration: np.ndarray, offset: float) -> float:
    """The highest confidence that keeps answerable questions wrongly unanswered (the threshold's own and
    those no threshold answers) at most RUNNER_FALSE_MAX."""
    answerable = [r for r in leads_ if r.answerable]
    always_false = sum(1 for r in answerable if r.fixed is False)
    confidences = sorted(float(1 / (1 + np.exp(-(r.x @ calibration + offset)))) for r in answerable if r.fixed is None)
    allowed = max(0, int(RUNNER_FALSE_MAX * len(answerable)) - always_false)
    return confidences[min(allowed, len(confidences) - 1)] if confidences else 0.5


def calibrate_on_runner(
    qs: Sequence[Question], path: Path, refit: bool, similarity: ranker.SentenceSimilarity | None = None
) -> tuple[np.ndarray, float, float]:
    """The confidence model (refit on the runner's leads when `refit`) and its threshold, from the FIT part's
    captured pools only; prints the fit figures."""
    captured = json.loads(path.read_text(encoding="utf-8"))
    fit = runner_leads([q for q in qs if q.set == "squad" and q.part == "fit"], captured, similarity)
    model = ranker.load_model(semantic=similarity is not None)
    calibration = np.array([model.calibration.get(f, 0.0) for f in [*feature_names(similarity is not None), "score"]])
    offset = model.offset
    if refit:
        decided = [r for r in fit if r.fixed is None]
        calibration, offset = logistic(
            np.array([r.x for r in decided]), np.array([float(r.answerable) for r in decided])
        )
    at = runner_threshold(fit, calibration, offset)
    print("runner fit:", json.dumps(runner_figures(fit, calibration, offset, at)), "at", round(at, 4))
    return calibration, offset, at


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m research_tool.eval.fit_ranker")
    parser.add_argument("--eval-dir", type=Path, default=DEFAULT_EVAL_DIR)
    parser.add_argument("--cache", type=Path, default=Path("data/eval/ranker"))
    parser.add_argument("--write", action="store_true", help="write the fitted weights into the package")
    parser.add_argument("--ablate", action="store_true", help="refit without each feature (fit and test figures)")
    parser.add_argument(
        "--cv", action="store_true", help="cross-validate inside the fit part by article: all features, without each"
    )
    parser.add_argument("--rules", action="store_true", help="the whole selection with and without each rule")
    parser.add_argument(
        "--fit-sets",
        default=",".join(FIT_SETS),
        help="the sets whose fit part the ranking weights are fitted on (squad,hotpotqa,musique); "
        "the confidence model is SQuAD's in every case",
    )
    parser.add_argument(
        "--runner-pools",
        type=Path,
        help="calibrate `answered` on these runner pools (answers --part fit --capture) and write the threshold",
    )
    parser.add_argument("--refit-confidence", action="store_true", help="with --runner-pools: refit the model too")
    parser.add_argument(
        "--captured",
        type=Path,
        help="only score select_answer on these captured runner pools (answers --capture FILE), by part",
    )
    parser.add_argument(
        "--semantic",
        action="store_true",
        help="the lexical+semantic weight set (the `semantic` extra's encoder): fit, ablate, calibrate, write",
    )
    args = parser.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    names = feature_names(args.semantic)
    similarity = None
    if args.semantic:
        from research_tool.providers.local_corpus.similarity import EncoderSimilarity

        similarity = EncoderSimilarity()
    if args.captured:
        print(json.dumps(captured_figures(args.eval_dir, args.captured, similarity), indent=1))
        return 0
    if args.runner_pools:
        qs = questions(args.eval_dir)
        if not args.runner_pools.exists():
            capture_runner_pools(qs, args.eval_dir, args.cache / "runner", args.runner_pools)
        calibration, offset, at = calibrate_on_runner(qs, args.runner_pools, args.refit_confidence, similarity)
        if args.write:
            data = json.loads(ranker.WEIGHTS_FILE.read_text(encoding="utf-8"))
            target = data["semantic"] if args.semantic else data
            target["calibration"] = {f: round(float(v), 4) for f, v in zip([*names, "score"], calibration, strict=True)}
            target["offset"] = round(offset, 4)
            target["answered_at"] = round(at, 4)
            target["answered_on"] = (
                "the runner's own pools for the fit part's SQuAD questions (python -m research_tool.eval.answers "
                "--part fit --capture FILE; python -m research_tool.eval.fit_ranker --runner-pools FILE --write"
                + (" --semantic)" if args.semantic else ")")
            )
            write_weights(data)
        return 0
    qs = questions(args.eval_dir)
    sources = pools(qs, args.eval_dir, args.cache)
    rows = feature_rows(qs, sources, args.cache)
    if args.semantic:
        rows = with_semantic(qs, rows, cosines(qs, sources, args.cache))
    everything = list(range(len(names)))
    fit_sets = args.fit_sets.split(",")
    if args.cv:  # choosing inside the fit part: the test part is neither fitted nor read
        print("cv all:", json.dumps(cross_validate(qs, rows, everything, fit_sets)), flush=True)
        for k, name in enumerate(names):
            keep = [i for i in everything if i != k]
            print(f"cv without {name}:", json.dumps(cross_validate(qs, rows, keep, fit_sets)), flush=True)
        return 0
    fitted = fit_model(qs, rows, everything, fit_sets)
    print("weights:", {f: round(float(v), 3) for f, v in zip(names, fitted.weights, strict=True)})
    print("calibration:", np.round(fitted.calibration, 3), round(fitted.offset, 3), "at", round(fitted.answered_at, 4))
    print(json.dumps(report(qs, rows, everything, fitted), indent=1))
    if args.write:
        data = json.loads(ranker.WEIGHTS_FILE.read_text(encoding="utf-8"))
        fitted_set = {
            "weights": {f: round(float(v), 4) for f, v in zip(names, fitted.weights, strict=True)},
            "calibration": {f: round(float(v), 4) for f, v in zip([*names, "score"], fitted.calibration, strict=True)},
            "offset": round(fitted.offset, 4),
            "answered_at": round(fitted.answered_at, 4),
            "fitted_on": "SQuAD dev articles 24-35 (squad_dev_part2 articles 0-11, held-out "
            f"{[a for a in range(12) if a % SQUAD_HELD_OUT_EVERY == SQUAD_HELD_OUT_EVERY - 1]} as "
            "unanswerable) and the even HotpotQA train100 questions"
            + ("; the even MuSiQue train100 questions" if "musique" in fit_sets else "")
            + "; python -m research_tool.eval.fit_ranker --write"
            + (f" --fit-sets {args.fit_sets}" if fit_sets != list(FIT_SETS) else "")
            + (" --semantic" if args.semantic else ""),
        }
        if args.semantic:
            data["semantic"] = fitted_set
        else:
            data = {**fitted_set, **({"semantic": data["semantic"]} if "semantic" in data else {})}
        write_weights(data)
    if args.ablate:
        for k, name in enumerate(names):
            keep = [i for i in everything if i != k]
            r = report(qs, rows, keep, fit_model(qs, rows, keep, fit_sets))
            print(f"without {name}:", json.dumps({k2: v for k2, v in r.items() if k2.endswith("test")}))
    if args.rules:
        test: Callable[[str], list[Question]] = lambda s: [q for q in qs if q.set == s and q.part == "test"]  # noqa: E731
        for rule in ["all", *sorted(RULES)]:
            rules = RULES if rule == "all" else RULES - {rule}
            figs = {
                "squad": selection_figures(test("squad"), sources, rules, similarity),
                "hotpotqa": selection_figures(test("hotpotqa"), sources, rules, similarity),
                "howto": howto_figures(args.eval_dir, args.cache, rules, "test"),
            }
            print(f"rules without {rule}:", json.dumps(figs))
    return 0


def write_weights(data: dict[str, Any]) -> None:
    ranker.WEIGHTS_FILE.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    ranker.load_model.cache_clear()


if __name__ == "__main__":
    raise SystemExit(main())
