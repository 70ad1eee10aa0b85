"""Web pages: does ranking a long page's passages with the sentence encoder keep more evidence for extraction?

A fetched page longer than what extraction reads loses text: the LLM engine shows the model the page's first
`LLMLimits.max_source_chars` (6,000) characters, and the offline engine keeps the page's 8 most relevant
sentences by word overlap (`engines/text/facts.extract_facts`). Ranking the page's passages by similarity to the
question, and keeping the best ones up to a budget, changes what extraction sees. This script measures whether
that pays, on simulated fetched pages:

- one page per question: its context paragraphs (HotpotQA: 10, 2 of them gold; MuSiQue: 20, 2 to 4 supporting)
  joined by blank lines in the data set's order, titled by its first paragraph's title;
- evidence = HotpotQA's supporting-fact sentences, MuSiQue's supporting paragraphs (their character spans);
- passages = engines/text/passages.cut_passages: the page's paragraphs (lines), one above 120 words cut into
  windows of whole sentences (what graph/nodes/page_focus.py ships);
- evidence recall = the share of evidence units that survive into what extraction keeps. For the LLM budget a
  unit counts the share of its characters inside the kept text; for the offline engine a HotpotQA sentence
  survives when a kept fact quotes it, a MuSiQue paragraph when a kept fact quotes any sentence of it.

Methods: the current selection (positional cut for the LLM, the whole page for the offline engine), BM25 over the
page's passages, the encoder's cosine, and their z-score mix (weight fitted). Questions at even positions of each
file fit any weight or budget; odd positions test. Encodings are cached under `--cache` (EVAL_CACHE_DIR, default
data/eval-cache).

    python -m research_tool.eval.web_passages [--datasets hotpotqa musique] [--cache DIR] [--cost-pages 20]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from research_tool.engines.llm import LLMLimits
from research_tool.engines.prompt_templates import truncate
from research_tool.engines.text import ranker
from research_tool.engines.text.facts import extract_facts
from research_tool.engines.text.passages import Span, best_within, cut_passages
from research_tool.engines.text.tokens import content_stems
from research_tool.models.entities import SourceResult
from research_tool.providers.local_corpus.embeddings import load_encoder
from research_tool.providers.local_corpus.vectors import zscores

DEFAULT_EVAL_DIR = Path(__file__).resolve().parents[4].parent / "shared" / "eval"
LLM_BUDGET = LLMLimits().max_source_chars
OFFLINE_BUDGETS = (1500, 3000, 4500, 6000)
WEIGHTS = tuple(round(0.1 * i, 1) for i in range(11))
MIX_GRID = (0.3, 0.5, 0.7, 0.9)
SHUFFLES = 20


@dataclass
class Page:
    question: str
    title: str
    text: str
    units: list[Span]  # evidence spans in `text`
    sentence_units: bool  # HotpotQA (sentences) or MuSiQue (paragraphs)
    blocks: list[Span]  # the paragraphs' spans, in page order


def block_spans(spans: Sequence[Sequence[Span]]) -> list[Span]:
    return [(block[0][0], block[-1][1]) for block in spans]


# --- pages -------------------------------------------------------------------------------------------------------


def _join(blocks: Sequence[Sequence[str]]) -> tuple[str, list[list[Span]]]:
    """Blocks of sentences -> page text (sentences joined by a space, blocks by a blank line) and sentence spans."""
    text, spans = "", []
    for block in blocks:
        if text:
            text += "\n\n"
        block_spans = []
        for i, sentence in enumerate(s.strip() for s in block):
            if i:
                text += " "
            block_spans.append((len(text), len(text) + len(sentence)))
            text += sentence
        spans.append(block_spans)
    return text, spans


def hotpotqa_pages(folder: Path) -> list[Page]:
    raw = json.loads((folder / "hipporag_hotpotqa_train100.json").read_text(encoding="utf-8"))
    pages = []
    for q in raw:
        text, spans = _join([sentences for _, sentences in q["context"]])
        where = {title: i for i, (title, _) in enumerate(q["context"])}
        units = [
            spans[where[title]][index]
            for title, index in q["supporting_facts"]
            if title in where and index < len(spans[where[title]])
        ]
        pages.append(Page(q["question"], q["context"][0][0], text, units, True, block_spans(spans)))
    return pages


def musique_pages(folder: Path) -> list[Page]:
    raw = json.loads((folder / "hipporag_musique_train100.json").read_text(encoding="utf-8"))
    pages = []
    for q in raw:
        text, spans = _join([[" ".join(p["paragraph_text"].split())] for p in q["paragraphs"]])
        units = [spans[i][0] for i, p in enumerate(q["paragraphs"]) if p["is_supporting"]]
        pages.append(Page(q["question"], q["paragraphs"][0]["title"], text, units, False, block_spans(spans)))
    return pages


LOADERS: dict[str, tuple[str, Callable[[Path], list[Page]]]] = {
    "hotpotqa": ("hotpotqa_train100", hotpotqa_pages),
    "musique": ("musique_train100", musique_pages),
}


# --- passages and their scores ---------------------------------------------------------------------------------


def bm25_scores(question: str, passages: Sequence[str]) -> npt.NDArray[np.float64]:
    """BM25 of each passage for the question, with document frequencies over the page's own passages (the
    answer ranker's BM25, ranker.bm25_scores)."""
    return np.asarray(ranker.bm25_scores(content_stems(question), [content_stems(p) for p in passages]))


# --- evidence recall -------------------------------------------------------------------------------------------


def overlap(a: Span, b: Span) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def char_recall(units: Sequence[Span], kept: Sequence[Span]) -> list[float]:
    return [sum(overlap(u, k) for k in kept) / max(1, u[1] - u[0]) for u in units]


def positional_kept(text: str, budget: int) -> list[Span]:
    cut = truncate(text, budget)
    return [(0, len(cut.removesuffix(" …")))]


def shuffled_positional(page: Page, budget: int, rounds: int = SHUFFLES) -> list[float]:
    """The first `budget` characters' recall averaged over random orders of the page's paragraphs (the data set's
    one order puts the evidence early or late by chance; this is the positional cut's expected recall)."""
    rng = random.Random(page.question)
    home = [next(i for i, b in enumerate(page.blocks) if b[0] <= u[0] < b[1]) for u in page.units]
    totals = [0.0] * len(page.units)
    for _ in range(rounds):
        order = rng.sample(range(len(page.blocks)), len(page.blocks))
        starts, at = {}, 0
        for i in order:
            starts[i] = at
            at += page.blocks[i][1] - page.blocks[i][0] + 2
        text = "\n\n".join(page.text[page.blocks[i][0] : page.blocks[i][1]] for i in order)
        moved = [
            (starts[b] + u[0] - page.blocks[b][0], starts[b] + u[1] - page.blocks[b][0])
            for u, b in zip(page.units, home, strict=True)
        ]
        for k, value in enumerate(char_recall(moved, positional_kept(text, budget))):
            totals[k] += value
    return [total / rounds for total in totals]


def joined(text: str, spans: Sequence[Span]) -> tuple[str, list[tuple[int, int]]]:
    """The kept passages as one text (blank lines between) and, for each, (offset in it, offset in the page)."""
    parts, offsets, at = [], [], 0
    for s, e in spans:
        offsets.append((at, s))
        parts.append(text[s:e])
        at += e - s + 2
    return "\n\n".join(parts), offsets


def offline_recall(page: Page, spans: Sequence[Span] | None) -> list[float]:
    """Extract facts (offline engine) from the page, or from its kept passages; which evidence units they quote."""
    text, offsets = joined(page.text, spans) if spans is not None else (page.text, [(0, 0)])
    source = SourceResult(url="https://example.org/page", title=page.title, source_name="web", full_content=text)
    quoted: list[Span] = []
    for fact in extract_facts(page.question, source, 1):
        for evidence in fact.evidence:
            at = text.find(evidence.quote)
            if at < 0:
                continue
            base = max((o for o in offsets if o[0] <= at), key=lambda o: o[0])
            start = base[1] + at - base[0]
            quoted.append((start, start + len(evidence.quote)))
    if page.sentence_units:
        return [float(any(overlap(u, q) >= 0.5 * (u[1] - u[0]) for q in quoted)) for u in page.units]
    return [float(any(overlap(u, q) > 0 for q in quoted)) for u in page.units]


# --- encoder with a cache --------------------------------------------------------------------------------------


class CachedEncoder:
    def __init__(self, cache_dir: Path) -> None:
        self.encoder = load_encoder(allow_download=False)
        digest = hashlib.sha1(self.encoder.model_key.encode()).hexdigest()[:12]
        cache_dir.mkdir(parents=True, exist_ok=True)
        self.path = cache_dir / f"vectors-{digest}.npz"
        self.vectors: dict[str, npt.NDArray[np.float32]] = {}
        if self.path.exists():
            with np.load(self.path) as data:
                self.vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()

    def ensure(self, texts: Sequence[str]) -> None:
        missing = sorted({t for t in texts if self.key(t) not in self.vectors})
        if not missing:
            return
        print(f"encoding {len(missing)} texts ...", flush=True)
        for text, vector in zip(missing, self.encoder.encode(missing), strict=True):
            self.vectors[self.key(text)] = vector
        keys = sorted(self.vectors)
        np.savez(self.path, keys=np.array(keys), vectors=np.stack([self.vectors[k] for k in keys]))

    def __call__(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.stack([self.vectors[self.key(t)] for t in texts])


# --- the run ---------------------------------------------------------------------------------------------------


@dataclass
class Scored:
    page: Page
    passages: list[Span]
    bm25: npt.NDArray[np.float64]
    cosine: npt.NDArray[np.float64]

    def mixed(self, weight: float) -> npt.NDArray[np.float64]:
        return (1 - weight) * np.asarray(zscores(list(self.bm25))) + weight * np.asarray(zscores(list(self.cosine)))


def score_pages(pages: Sequence[Page], encoder: CachedEncoder) -> list[Scored]:
    cut = [cut_passages(p.text) for p in pages]
    texts = [p.text[s:e] for p, spans in zip(pages, cut, strict=True) for s, e in spans]
    encoder.ensure([p.question for p in pages] + texts)
    scored = []
    for page, spans in zip(pages, cut, strict=True):
        passages = [page.text[s:e] for s, e in spans]
        cosine = (encoder(passages) @ encoder([page.question])[0]).astype(np.float64)
        scored.append(Scored(page, spans, bm25_scores(page.question, passages), cosine))
    return scored


Method = Callable[[Scored], list[float]]


def share(items: Sequence[Scored], method: Method) -> tuple[float, list[tuple[float, int]]]:
    """Micro share of evidence units kept, and per question (units kept, units) for the bootstrap."""
    per_question = []
    for item in items:
        values = method(item)
        per_question.append((sum(values), len(values)))
    kept, total = sum(k for k, _ in per_question), sum(n for _, n in per_question)
    return kept / max(1, total), per_question


def bootstrap_delta(a: list[tuple[float, int]], b: list[tuple[float, int]], rounds: int = 2000) -> tuple[float, float]:
    rng = random.Random(7)
    deltas = []
    for _ in range(rounds):
        picks = [rng.randrange(len(a)) for _ in a]
        total = sum(a[i][1] for i in picks) or 1
        deltas.append((sum(b[i][0] for i in picks) - sum(a[i][0] for i in picks)) / total)
    deltas.sort()
    return deltas[int(0.025 * rounds)], deltas[int(0.975 * rounds)]


def llm_methods(weight: float) -> dict[str, Method]:
    def ranked(scores: Callable[[Scored], npt.NDArray[np.float64]]) -> Method:
        def run(s: Scored) -> list[float]:
            if len(s.page.text) <= LLM_BUDGET:
                return char_recall(s.page.units, [(0, len(s.page.text))])
            return char_recall(s.page.units, best_within(s.passages, scores(s).tolist(), LLM_BUDGET))

        return run

    return {
        "first 6,000 characters (current)": lambda s: char_recall(
            s.page.units, positional_kept(s.page.text, LLM_BUDGET)
        ),
        f"first 6,000 characters, mean of {SHUFFLES} paragraph orders": lambda s: shuffled_positional(
            s.page, LLM_BUDGET
        ),
        "BM25 passages": ranked(lambda s: s.bm25),
        "encoder passages": ranked(lambda s: s.cosine),
        f"z-mix passages (w {weight})": ranked(lambda s: s.mixed(weight)),
    }


def offline_method(scores: Callable[[Scored], npt.NDArray[np.float64]], budget: int) -> Method:
    def run(s: Scored) -> list[float]:
        if len(s.page.text) <= budget:
            return offline_recall(s.page, None)
        return offline_recall(s.page, best_within(s.passages, scores(s).tolist(), budget))

    return run


Splits = dict[str, tuple[list[Scored], list[Scored]]]  # data set -> (fit half, test half)


def pooled(splits: Splits, half: int) -> list[Scored]:
    return [item for parts in splits.values() for item in parts[half]]


def ratio(per_question: Sequence[tuple[float, int]]) -> float:
    return sum(k for k, _ in per_question) / max(1, sum(n for _, n in per_question))


def delta_text(base: list[tuple[float, int]], other: list[tuple[float, int]]) -> str:
    low, high = bootstrap_delta(base, other)
    return f"{ratio(other) - ratio(base):+.3f} [{low:+.3f}, {high:+.3f}]"


def report(title: str, splits: Splits, rows: dict[str, Method], free: set[str], bases: int = 1) -> None:
    """Each row's recall on each data set's fit and test half and on both halves' questions pooled, and its change
    on the test half against each of the first `bases` rows (the current selection, first) with a 95% bootstrap
    interval; rows in `free` fit nothing, so their change is also shown over all questions (both halves)."""
    names = list(rows)[:bases]
    print(f"\n{title}: evidence recall fit / test; Δ test against {' and '.join(map(repr, names))} [95% bootstrap]")
    groups = {**splits, "both": (pooled(splits, 0), pooled(splits, 1))}
    for group, (fit, test) in groups.items():
        print(f"  {group} ({len(fit)} + {len(test)} questions)")
        base_test = [share(test, rows[name])[1] for name in names]
        base_all = [share([*fit, *test], rows[name])[1] for name in names]
        for label, method in rows.items():
            f, _ = share(fit, method)
            t, per_test = share(test, method)
            line = f"    {label:<52} {f:.3f} / {t:.3f}"
            if label not in names:
                line += "  Δ " + ", ".join(delta_text(base, per_test) for base in base_test)
                if label in free:
                    per_all = share([*fit, *test], method)[1]
                    line += "; all questions Δ " + ", ".join(delta_text(base, per_all) for base in base_all)
            print(line)


def run_llm(splits: Splits) -> None:
    """The LLM engine's source block: the page's first 6,000 characters, or its best passages up to 6,000."""
    fit = pooled(splits, 0)
    by_weight = {w: share(fit, llm_methods(w)[f"z-mix passages (w {w})"])[0] for w in WEIGHTS}
    print("\nLLM budget: mix weight on the fit halves:", {w: round(v, 3) for w, v in by_weight.items()})
    weight = max(WEIGHTS, key=lambda w: by_weight[w])
    methods = llm_methods(weight)
    report(f"LLM engine ({LLM_BUDGET}-character source block)", splits, methods, set(list(methods)[2:4]), bases=2)


def run_offline(splits: Splits) -> None:
    """The offline engine: 8 facts from the whole page, or from its best passages up to a budget (fitted)."""
    fit = pooled(splits, 0)
    rows: dict[str, Method] = {"whole page, 8 facts (current)": lambda s: offline_recall(s.page, None)}
    for label, scores in (("BM25", bm25_of), ("encoder", cosine_of)):
        budgets = {b: offline_method(scores, b) for b in OFFLINE_BUDGETS}
        fitted = {b: share(fit, method)[0] for b, method in budgets.items()}
        print(f"offline {label} passages, budget on the fit halves:", {b: round(v, 3) for b, v in fitted.items()})
        best = max(OFFLINE_BUDGETS, key=lambda b: fitted[b])
        rows[f"{label} passages to {best} chars, 8 facts"] = budgets[best]
    grid = {(w, b): offline_method(mixed_of(w), b) for w in MIX_GRID for b in OFFLINE_BUDGETS}
    fit_shares = {key: share(fit, method)[0] for key, method in grid.items()}
    w, b = max(fit_shares, key=lambda key: fit_shares[key])
    print(
        "offline mix (weight, budget) on the fit halves, best 5:",
        [(key, round(v, 3)) for key, v in sorted(fit_shares.items(), key=lambda kv: -kv[1])[:5]],
    )
    rows[f"z-mix (w {w}) passages to {b} chars, 8 facts"] = grid[(w, b)]
    report("Offline engine (8 facts a page)", splits, rows, set())


def bm25_of(s: Scored) -> npt.NDArray[np.float64]:
    return s.bm25


def cosine_of(s: Scored) -> npt.NDArray[np.float64]:
    return s.cosine


def mixed_of(weight: float) -> Callable[[Scored], npt.NDArray[np.float64]]:
    return lambda s: s.mixed(weight)


def measure_cost(pages: Sequence[Page], count: int) -> None:
    """CPU time to encode a page's passages and the question afresh (no cache), per page and per 1,000 chars."""
    encoder = load_encoder(allow_download=False)
    sample = list(pages[:: max(1, len(pages) // count)])[:count]
    encoder.encode(["warm up the encoder"])
    seconds, chars, tokens = [], 0, 0
    for page in sample:
        texts = [page.question] + [page.text[s:e] for s, e in cut_passages(page.text)]
        started = time.process_time()
        encoder.encode(texts)
        seconds.append(time.process_time() - started)
        chars += len(page.text)
        tokens += sum(encoder.token_counts(texts))
    total = sum(seconds)
    started = time.process_time()
    for page in sample:
        extract_facts(
            page.question,
            SourceResult(url="https://example.org/p", title=page.title, source_name="web", full_content=page.text),
            1,
        )
    extraction = time.process_time() - started
    print(
        f"\ncost: {len(sample)} pages, {total / len(sample) * 1000:.0f} CPU-ms a page to encode (median "
        f"{statistics.median(seconds) * 1000:.0f}), {total / chars * 1e6:.0f} CPU-ms per 1,000 chars, "
        f"{total / tokens * 1e6:.0f} CPU-ms per 1,000 tokens; mean page {chars / len(sample):.0f} chars; the offline "
        f"engine's extraction of the whole page: {extraction / len(sample) * 1000:.0f} CPU-ms a page"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval-dir", type=Path, default=DEFAULT_EVAL_DIR)
    parser.add_argument("--datasets", nargs="+", default=list(LOADERS), choices=list(LOADERS))
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("EVAL_CACHE_DIR", "data/eval-cache")))
    parser.add_argument("--llm-only", action="store_true", help="skip the offline engine's (slower) rows")
    parser.add_argument("--cost-pages", type=int, default=0, help="also time this many pages encoded afresh")
    args = parser.parse_args(argv)
    encoder = CachedEncoder(args.cache)
    all_pages: list[Page] = []
    splits: Splits = {}
    for name in args.datasets:
        folder, loader = LOADERS[name]
        pages = loader(args.eval_dir / folder)
        all_pages += pages
        started = time.process_time()
        scored = score_pages(pages, encoder)
        print(
            f"{name}: {len(pages)} pages, median {statistics.median(len(p.text) for p in pages):.0f} chars, "
            f"{statistics.fmean(len(s.passages) for s in scored):.1f} passages a page, "
            f"{sum(len(p.text) > LLM_BUDGET for p in pages)} above {LLM_BUDGET} chars; "
            f"{sum(len(p.units) for p in pages)} evidence units (scored in {time.process_time() - started:.1f} CPU-s)"
        )
        splits[name] = (scored[0::2], scored[1::2])
    run_llm(splits)
    if not args.llm_only:
        run_offline(splits)
    if args.cost_pages:
        measure_cost(all_pages, args.cost_pages)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
