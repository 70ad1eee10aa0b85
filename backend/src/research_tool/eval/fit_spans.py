"""Fit the short-answer span ranker and its gate (`engines/text/short_answer_weights.json`), and measure them.

`python -m research_tool.eval.fit_spans --fit-pools FIT.json [--test-pools TEST.json] [--write] [--ablate]`

The pools are the sources the real runner gave the answer selection (`python -m research_tool.eval.answers
--sets squad --part fit --capture FIT.json`), so the leads are the runner's own.

1. Span ranker (listwise softmax, L2): on every SQuAD fit-part question (articles 24-35), the sentence of
   its gold paragraph that holds the gold answer, and the lead of every runner fit question that holds it.
   A span is positive when it holds the gold answer and is tight: at most `TIGHT_EXTRA` words longer than the
   shortest gold answer (and at most 8 words, the runner's limit).
2. Gate (logistic, L2): on the leads the runner gives the fit part's answerable questions, the probability
   that the lead's best span holds the gold answer in at most 8 words (the runner's measure).
3. Threshold: the lowest gate probability whose 5-fold cross-validated precision on the fit part is at least
   `TARGET_PRECISION` (the target 0.70 with a margin), which gives the most coverage at that precision.
4. Figures: short-answer precision (gold contained, among those given) and coverage (given among the
   answerable questions) on the fit part and, with `--test-pools`, the test part; as `eval.answers` counts
   them (yes/no verdicts and choice options count as given short answers, as the runner gives them). With
   `--ablate`: everything refitted without each feature, the threshold chosen again on the fit part.
5. The operating point's spread (`fit_cv_margin`): for target precisions 0.70-0.80, the threshold each gives
   on the cross-validated fit leads and how often a runner-sized read (`TEST_SIZE` questions from 12
   articles drawn with replacement from the fit part's) reaches precision 0.70. `--target` sets the one used.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from research_tool.engines.base import NumberedSource
from research_tool.engines.text.answering import RULES, asked_for, select_answer
from research_tool.engines.text.question_intent import classify_question
from research_tool.engines.text.sentences import split_sentences
from research_tool.engines.text.short_answers import (
    GATE_FEATURES,
    SPAN_FEATURES,
    SPAN_WORDS,
    WEIGHTS_FILE,
    AskedFor,
    SpanCandidate,
    candidate_spans,
    gate_features,
)
from research_tool.eval.answers import Item, contains_gold, squad_questions, word_count
from research_tool.eval.fit_ranker import logistic
from research_tool.eval.multihop import DEFAULT_EVAL_DIR

TIGHT_EXTRA = 2
TARGET_PRECISION = 0.75
BOOTSTRAP = 1000  # resamples of the fit part's articles for the operating point's spread
TEST_SIZE = 200  # answerable SQuAD questions in a runner read of one part
L2_RANK = 0.01
L2_GATE = 0.01
FOLDS = 5
ARTICLE_FOLDS = 4
SEED = 7
VALUE_TYPES = ("date", "number")
NAME_TYPES = ("person", "place", "organization")


@dataclass
class SpanRows:
    """One sentence's candidate spans: their features, texts, tight labels and the runner's measure."""

    x: np.ndarray
    texts: list[str]
    tight: np.ndarray
    right: np.ndarray  # holds the gold in at most 8 words
    asks: str = ""  # the question's answer type
    article: str = ""  # the SQuAD article of its question ("s24")


@dataclass
class Lead:
    """One answerable question: a fixed short answer (yes/no, choice) or the lead's spans."""

    fixed: str | None  # a short answer the span ranker does not decide
    fixed_right: bool
    spans: SpanRows | None  # None when the question is not answered or has no span
    asked: AskedFor | None = None
    share: float = 0.0
    confidence: float = 0.0
    article: str = ""  # the gold paragraph's article ("s24")


def span_rows(asked: AskedFor, statement: str, answers: Sequence[str]) -> SpanRows | None:
    spans = candidate_spans(asked, statement)
    if not spans:
        return None
    shortest = min(word_count(a) for a in answers)
    texts = [s.text.strip(" ,.;:") for s in spans]
    right = [contains_gold(t, answers) and word_count(t) <= SPAN_WORDS for t in texts]
    tight = [r and word_count(t) <= shortest + TIGHT_EXTRA for r, t in zip(right, texts, strict=True)]
    x = np.array([[s.features[f] for f in SPAN_FEATURES] for s in spans], dtype=float)
    return SpanRows(x, texts, np.array(tight, dtype=float), np.array(right, dtype=float), asked.answer_type)


def gold_sentence_rows(eval_dir: Path) -> list[SpanRows]:
    """The fit part's questions: the sentence of the gold paragraph holding the gold answer."""
    documents, parts = squad_questions(eval_dir / "squad_dev_part2")
    texts = {d["id"]: d["text"] for d in documents}
    out = []
    for item in parts["fit"]:
        intent = classify_question(item.question)
        if intent.answer_type in ("yes_no", "howto"):
            continue
        doc = next(iter(item.gold_docs))
        sentence = next((s.text for s in split_sentences(texts[doc]) if contains_gold(s.text, item.answers)), None)
        if sentence is None:
            continue
        rows = span_rows(asked_for(intent), " ".join(sentence.split()), item.answers)
        if rows is not None and rows.tight.any():
            rows.article = doc[:3]
            out.append(rows)
    return out


def runner_leads(eval_dir: Path, path: Path, part: str) -> list[Lead]:
    """The runner's answerable questions of `part` in its captured pools, with their leads' spans."""
    captured = json.loads(path.read_text(encoding="utf-8"))
    _, parts = squad_questions(eval_dir / "squad_dev_part2")
    return [
        lead_of(item, [NumberedSource.model_validate(s) for s in captured[item.question]])
        for item in parts[part]
        if item.question in captured
    ]


def index_leads(eval_dir: Path, cache: Path, skip: set[str]) -> list[Lead]:
    """More fit-part leads: `fit_ranker`'s sample of SQuAD fit questions with their top paragraphs from the
    local index (the runner's source budget), questions in `skip` (the runner's own) left out."""
    from research_tool.eval import fit_ranker

    qs = [q for q in fit_ranker.questions(eval_dir) if q.set == "squad" and q.part == "fit" and q.item.answers]
    qs = [q for q in qs if q.item.question not in skip]
    sources = fit_ranker.pools(qs, eval_dir, cache)
    return [lead_of(q.item, sources[q.item.id]) for q in qs]


def lead_of(item: Item, sources: list[NumberedSource]) -> Lead:
    sel = select_answer(item.question, sources, rules=RULES - {"short_answer"})
    article = next(iter(item.gold_docs), "")[:3]
    if sel.short_answer:
        short = sel.short_answer
        right = contains_gold(short, item.answers) and word_count(short) <= SPAN_WORDS
        return Lead(short, right, None, article=article)
    if not sel.answered or not sel.sentences:
        return Lead(None, False, None, article=article)
    intent = classify_question(item.question)
    lead = sel.sentences[0]
    asked = asked_for(intent)
    rows = span_rows(asked, lead.statement, item.answers)
    return Lead(None, False, rows, asked, lead.share, lead.confidence, article)


# --- fitting ---------------------------------------------------------------------------------------------


def fit_listwise(rows: Sequence[SpanRows], keep: Sequence[int], steps: int = 300, rate: float = 0.05) -> np.ndarray:
    """Weights maximising the softmax probability of each sentence's tight spans (Adam steps, L2), all
    sentences at once (their spans stacked, `np.add.reduceat` per sentence)."""
    x = np.vstack([r.x[:, keep] for r in rows])
    y = np.concatenate([r.tight for r in rows])
    starts = np.cumsum([0] + [len(r.texts) for r in rows[:-1]])
    owner = np.repeat(np.arange(len(rows)), [len(r.texts) for r in rows])
    w = np.zeros(len(keep))
    m = np.zeros_like(w)
    v = np.zeros_like(w)
    for t in range(1, steps + 1):
        s = x @ w
        e = np.exp(s - np.maximum.reduceat(s, starts)[owner])
        p = e / np.add.reduceat(e, starts)[owner]
        q = p * y
        q = q / np.add.reduceat(q, starts)[owner]
        grad = L2_RANK * w - (q - p) @ x / len(rows)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad**2
        w -= rate * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return w


def gate_logistic(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """The gate's logistic regression: `fit_ranker.logistic` with the L2 of the mean loss (`L2_GATE`)."""
    return logistic(x, y, l2=L2_GATE * len(y))


def best(rows: SpanRows, weights: np.ndarray, keep: Sequence[int]) -> tuple[int, float, float]:
    """The engine's pick: the highest-scoring span (the shorter text on a tie), its softmax probability and
    its score."""
    s = rows.x[:, keep] @ weights
    p = np.exp(s - s.max())
    p /= p.sum()
    k = max(range(len(p)), key=lambda i: (round(float(p[i]), 12), -len(rows.texts[i])))
    return k, float(p[k]), float(s[k])


def gate_x(
    lead: Lead, rows: SpanRows, k: int, prob: float, score: float, keep: Sequence[int], gate_keep: Sequence[str]
) -> list[float]:
    """The engine's gate features (`short_answers.gate_features`) for the span picked; features left out of
    the ranker read 0."""
    assert lead.asked is not None
    f = {name: float(rows.x[k, j]) if j in keep else 0.0 for j, name in enumerate(SPAN_FEATURES)}
    values = gate_features(lead.asked, SpanCandidate(rows.texts[k], f), prob, score, lead.share, lead.confidence)
    return [values[g] for g in gate_keep]


@dataclass
class Fitted:
    keep: list[int]
    gate_keep: list[str]
    rank: np.ndarray
    gate: np.ndarray
    bias: float
    threshold: float


def gate_data(
    leads: Sequence[Lead], fitted_rank: np.ndarray, keep: Sequence[int], gate_keep: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    xs, ys, where = [], [], []
    for i, lead in enumerate(leads):
        if lead.spans is None:
            continue
        k, prob, score = best(lead.spans, fitted_rank, keep)
        xs.append(gate_x(lead, lead.spans, k, prob, score, keep, gate_keep))
        ys.append(lead.spans.right[k])
        where.append(i)
    return np.array(xs, dtype=float).reshape(len(xs), len(gate_keep)), np.array(ys, dtype=float), where


def figures_at(
    leads: Sequence[Lead], probs: dict[int, float], right: dict[int, bool], at: float
) -> tuple[float, float]:
    """Precision and coverage over the answerable questions, fixed short answers counted as given."""
    given = right_given = 0
    for i, lead in enumerate(leads):
        if lead.fixed is not None:
            given += 1
            right_given += lead.fixed_right
        elif i in probs and probs[i] >= at:
            given += 1
            right_given += right[i]
    return (right_given / given if given else 0.0), given / max(1, len(leads))


def choose_threshold(
    leads: Sequence[Lead], probs: dict[int, float], right: dict[int, bool], target: float | None = None
) -> float:
    """The lowest threshold whose precision reaches `target` (default TARGET_PRECISION; most coverage), else
    the most precise."""
    target = TARGET_PRECISION if target is None else target
    grid = sorted(set(probs.values()))
    ok = [t for t in grid if figures_at(leads, probs, right, t)[0] >= target]
    if ok:
        return min(ok)
    return max(grid, key=lambda t: figures_at(leads, probs, right, t)[0]) if grid else 0.5


def margin_table(leads: Sequence[Lead], probs: dict[int, float], right: dict[int, bool]) -> list[str]:
    """For each target precision: the threshold it gives on the cross-validated fit leads, its precision and
    coverage there, how often a runner-sized read (TEST_SIZE questions drawn from 12 articles drawn with
    replacement from the fit part's) has precision >= 0.70, and that precision's 10th / 50th / 90th
    percentiles: the spread a single test read has at each operating point."""
    articles: dict[str, list[int]] = {}
    for i, lead in enumerate(leads):
        articles.setdefault(lead.article, []).append(i)
    names = sorted(articles)
    rng = random.Random(SEED)
    draws = []
    for _ in range(BOOTSTRAP):
        pool = [i for a in rng.choices(names, k=12) for i in articles[a]]
        draws.append(rng.choices(pool, k=TEST_SIZE))
    out = []
    for target in (0.70, 0.72, 0.75, 0.78, 0.80):
        at = choose_threshold(leads, probs, right, target)
        given = [lead.fixed is not None or probs.get(i, -1.0) >= at for i, lead in enumerate(leads)]
        good = [
            g and (lead.fixed_right if lead.fixed is not None else right[i])
            for i, (g, lead) in enumerate(zip(given, leads, strict=True))
        ]
        precisions = []
        for draw in draws:
            n = sum(given[i] for i in draw)
            precisions.append(sum(good[i] for i in draw) / n if n else 0.0)
        q = np.quantile(precisions, [0.1, 0.5, 0.9])
        p, c = figures_at(leads, probs, right, at)
        reach = float(np.mean([x >= 0.70 for x in precisions]))
        out.append(
            f"target {target:.2f}: threshold {at:.3f}, cv precision {p:.3f} coverage {c:.3f}; "
            f"P(read >= 0.70) {reach:.2f}; read precision p10 {q[0]:.3f} p50 {q[1]:.3f} p90 {q[2]:.3f}"
        )
    return out


def cross_validated(
    leads: Sequence[Lead], rank: np.ndarray, keep: Sequence[int], gate_keep: Sequence[str]
) -> tuple[dict[int, float], dict[int, bool]]:
    """Each fit lead's gate probability from a gate fitted on the other folds."""
    x, y, where = gate_data(leads, rank, keep, gate_keep)
    order = list(range(len(where)))
    random.Random(SEED).shuffle(order)
    probs: dict[int, float] = {}
    for f in range(FOLDS):
        held = set(order[f::FOLDS])
        train = [j for j in range(len(where)) if j not in held]
        w, b = gate_logistic(x[train], y[train])
        for j in held:
            probs[where[j]] = float(1 / (1 + np.exp(-(x[j] @ w + b))))
    return probs, {where[j]: bool(y[j]) for j in range(len(where))}


def fold_of(article: str) -> int:
    """The article fold of a SQuAD article id ("s24" -> 24 % ARTICLE_FOLDS)."""
    return int(article[1:]) % ARTICLE_FOLDS


def article_cross_validated(
    sentences: Sequence[SpanRows], leads: Sequence[Lead], keep: Sequence[int], gate_keep: Sequence[str]
) -> tuple[dict[int, float], dict[int, bool], float]:
    """Nested cross-validation by article (`ARTICLE_FOLDS` folds, article number modulo the folds): the span
    ranker and the gate are fitted on the other folds' articles (their gold sentences and leads) and read on
    the held-out articles' leads; also the held-out gold sentences' span accuracy. No question's gold sentence
    helps fit the ranker that reads its lead, which the lead-level folds of `cross_validated` allow."""
    probs: dict[int, float] = {}
    right: dict[int, bool] = {}
    hits: list[float] = []
    for f in range(ARTICLE_FOLDS):
        train = [lead for lead in leads if lead.article and fold_of(lead.article) != f]
        own = [lead.spans for lead in train if lead.spans is not None and lead.spans.tight.any()]
        rank = fit_listwise([*(r for r in sentences if fold_of(r.article) != f), *own], keep)
        hits += [r.right[best(r, rank, keep)[0]] for r in sentences if fold_of(r.article) == f]
        x, y, _ = gate_data(train, rank, keep, gate_keep)
        weights, bias = gate_logistic(x, y)
        held = [i for i, lead in enumerate(leads) if lead.article and fold_of(lead.article) == f]
        x2, y2, where = gate_data([leads[i] for i in held], rank, keep, gate_keep)
        for j, i in enumerate(where):
            probs[held[i]] = float(1 / (1 + np.exp(-(x2[j] @ weights + bias))))
            right[held[i]] = bool(y2[j])
    return probs, right, float(np.mean(hits))


def fit_all(
    sentences: Sequence[SpanRows], fit: Sequence[Lead], keep: list[int], gate_keep: list[str]
) -> tuple[Fitted, dict[int, float], dict[int, bool]]:
    own = [lead.spans for lead in fit if lead.spans is not None and lead.spans.tight.any()]
    rank = fit_listwise([*sentences, *own], keep)
    cv, right = cross_validated(fit, rank, keep, gate_keep)
    threshold = choose_threshold(fit, cv, right)
    x, y, _ = gate_data(fit, rank, keep, gate_keep)
    gate, bias = gate_logistic(x, y)
    return Fitted(keep, gate_keep, rank, gate, bias, threshold), cv, right


def read(leads: Sequence[Lead], fitted: Fitted) -> tuple[float, float]:
    """Precision and coverage with the fitted ranker, gate and threshold."""
    x, y, where = gate_data(leads, fitted.rank, fitted.keep, fitted.gate_keep)
    probs = {i: float(1 / (1 + np.exp(-(x[j] @ fitted.gate + fitted.bias)))) for j, i in enumerate(where)}
    right = {i: bool(y[j]) for j, i in enumerate(where)}
    return figures_at(leads, probs, right, fitted.threshold)


def curve(leads: Sequence[Lead], probs: dict[int, float], right: dict[int, bool]) -> list[str]:
    out = []
    for t in (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8):
        p, c = figures_at(leads, probs, right, t)
        out.append(f"{t:.2f}: precision {p:.3f} coverage {c:.3f}")
    return out


def span_accuracy(sentences: Sequence[SpanRows], leads: Sequence[Lead], fitted: Fitted) -> dict[str, float]:
    """How often the ranker's best span holds the gold: on the gold sentences (its training set), and on the
    leads that have a span holding it."""
    spans = [lead.spans for lead in leads if lead.spans is not None]
    holding = [r for r in spans if r.right.any()]
    return {
        "gold_sentences": round(float(np.mean([r.right[best(r, fitted.rank, fitted.keep)[0]] for r in sentences])), 3),
        "leads": float(len(spans)),
        "leads_with_a_right_span": float(len(holding)),
        "best_span_right": float(sum(r.right[best(r, fitted.rank, fitted.keep)[0]] for r in holding)),
    }


def write(fitted: Fitted, provenance: dict[str, Any]) -> None:
    data = {
        "rank": {SPAN_FEATURES[k]: round(float(w), 4) for k, w in zip(fitted.keep, fitted.rank, strict=True)},
        "gate": {g: round(float(w), 4) for g, w in zip(fitted.gate_keep, fitted.gate, strict=True)},
        "gate_bias": round(fitted.bias, 4),
        "threshold": round(fitted.threshold, 4),
        "fit": provenance,
    }
    WEIGHTS_FILE.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    global TIGHT_EXTRA, TARGET_PRECISION
    parser = argparse.ArgumentParser(prog="python -m research_tool.eval.fit_spans")
    parser.add_argument("--eval-dir", type=Path, default=DEFAULT_EVAL_DIR)
    parser.add_argument("--fit-pools", type=Path, required=True, help="answers --sets squad --part fit --capture")
    parser.add_argument("--index-cache", type=Path, help="also fit the gate on fit_ranker's index pools (cached here)")
    parser.add_argument("--test-pools", type=Path, help="answers --sets squad --part test --capture (read once)")
    parser.add_argument("--tight-extra", type=int, default=TIGHT_EXTRA)
    parser.add_argument("--target", type=float, default=TARGET_PRECISION, help="CV precision the threshold needs")
    parser.add_argument("--without", default="", help="comma-separated features left out (span or gate)")
    parser.add_argument("--write", action="store_true", help="write the weights beside the module")
    parser.add_argument("--ablate", action="store_true", help="refit without each feature (needs --test-pools)")
    parser.add_argument("--by-article", action="store_true", help="also the nested cross-validation by article")
    args = parser.parse_args(argv)
    TIGHT_EXTRA = args.tight_extra
    TARGET_PRECISION = args.target
    sentences = gold_sentence_rows(args.eval_dir)
    runner_fit = runner_leads(args.eval_dir, args.fit_pools, "fit")
    captured = set(json.loads(args.fit_pools.read_text(encoding="utf-8")))
    extra = index_leads(args.eval_dir, args.index_cache, captured) if args.index_cache else []
    fit = [*runner_fit, *extra]
    test = runner_leads(args.eval_dir, args.test_pools, "test") if args.test_pools else None
    left_out = set(filter(None, args.without.split(",")))
    keep = [k for k, name in enumerate(SPAN_FEATURES) if name not in left_out]
    gate_keep = [g for g in GATE_FEATURES if g not in left_out]
    fitted, cv, right = fit_all(sentences, fit, keep, gate_keep)
    runner_cv = {i: p for i, p in cv.items() if i < len(runner_fit)}
    report: dict[str, Any] = {
        "sentences": len(sentences),
        "fit_questions": [len(runner_fit), len(extra)],
        "rank": {SPAN_FEATURES[k]: round(float(w), 3) for k, w in zip(keep, fitted.rank, strict=True)},
        "gate": {g: round(float(w), 3) for g, w in zip(gate_keep, fitted.gate, strict=True)},
        "gate_bias": round(fitted.bias, 3),
        "threshold": round(fitted.threshold, 4),
        "fit_cv_curve": curve(fit, cv, right),
        "runner_fit_cv_curve": curve(runner_fit, runner_cv, right),
        "fit_cv_at_threshold": figures_at(fit, cv, right, fitted.threshold),
        "runner_fit_cv_at_threshold": figures_at(runner_fit, runner_cv, right, fitted.threshold),
        "fit_cv_margin": margin_table(fit, cv, right),
        "runner_fit": read(runner_fit, fitted),
        "span_right": span_accuracy(sentences, runner_fit, fitted),
    }
    if args.by_article:
        nested, nested_right, accuracy = article_cross_validated(sentences, fit, keep, gate_keep)
        at = choose_threshold(fit, nested, nested_right)
        report["by_article"] = {
            "held_out_gold_sentence_span_right": round(accuracy, 3),
            "threshold": round(at, 4),
            "at_threshold": figures_at(fit, nested, nested_right, at),
            "curve": curve(fit, nested, nested_right),
            "margin": margin_table(fit, nested, nested_right),
        }
    if test is not None:
        report["test"] = read(test, fitted)
        report["test_questions"] = len(test)
    if args.ablate and test is not None:
        rows = []
        for name in [*(SPAN_FEATURES[k] for k in keep), *gate_keep]:
            k2 = [k for k in keep if SPAN_FEATURES[k] != name]
            g2 = [g for g in gate_keep if g != name]
            without, _, _ = fit_all(sentences, fit, k2, g2)
            rows.append({"without": name, "runner_fit": read(runner_fit, without), "test": read(test, without)})
        report["ablation"] = rows
    print(json.dumps(report, indent=1))
    if args.write:
        write(
            fitted,
            {
                "script": "python -m research_tool.eval.fit_spans",
                "data": "SQuAD part 2 fit part (articles 24-35): gold sentences, the runner's captured fit pools"
                + (" and fit_ranker's index pools" if extra else ""),
                "target_precision": TARGET_PRECISION,
                "tight_extra": TIGHT_EXTRA,
            },
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
