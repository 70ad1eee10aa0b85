"""Fit how the answer reader and the lexical ranker are combined, on the runner's captured fit pools only.

    python -m research_tool.eval.answers --sets owndocs,squad --part fit --capture data/eval/pools_fit.json
    python -m research_tool.eval.fit_reader_mix data/eval/pools_fit.json [--adapters PATH]

For every captured question of the fit parts (owndocs fit folders, SQuAD fit articles): the lexical ranker ranks
its pool as the engine does, the reader reads the best `read_top`, and each read candidate is labelled (it states
the gold sentence, or holds a gold answer). Chosen on those, with nothing of a test part read:
- the mix's lexical weight (reader logit weight 1), by top-1 accuracy averaged over the two sets (each set counts
  alike, so SQuAD's 200 questions do not drown the owndocs 56);
- `answered_at`: the lowest reader probability of the lead that still answers, the highest that keeps answerable
  questions wrongly refused at most `MAX_WRONGLY_REFUSED` on the fit part (averaged over the two sets);
- `yes_no_at`: the threshold that decides most owndocs fit yes/no questions right.
Prints each figure beside the lexical ranker alone and the reader alone, and writes `engines/text/reader_mix.json`.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from research_tool.engines.base import NumberedSource
from research_tool.engines.text.answering import rank_candidates
from research_tool.engines.text.candidates import build_candidates
from research_tool.engines.text.question_intent import classify_question
from research_tool.engines.text.reader_mix import KINDS, MIX_FILE, collection_kind, mixed_score
from research_tool.engines.text.verdicts import polarity_verdict
from research_tool.eval import owndocs
from research_tool.eval.answers import Item, contains_gold, load_owndocs, load_squad
from research_tool.eval.multihop import DEFAULT_EVAL_DIR
from research_tool.providers.local_corpus.reader import ADAPTERS, AnswerReader

READ_TOP = 16
MAX_WRONGLY_REFUSED = 0.08
LEXICAL_WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)


@dataclass
class Read:
    set: str
    kind: str
    question: str
    lexical: list[float]  # the read candidates' lexical scores, best first
    reading: list[float]
    labels: list[bool]
    statements: list[str]
    gold_verdict: str = ""
    collection: str = ""  # `reader_mix.collection_kind` of its sources


def labelled(item: Item, statement: str) -> bool:
    return (
        owndocs.sentence_matches(statement, item.sentence) if item.sentence else contains_gold(statement, item.answers)
    )


def read_pools(
    pools: dict[str, list[dict[str, Any]]], items: dict[str, tuple[str, Item]], reader: AnswerReader
) -> list[Read]:
    out = []
    for question, raw in pools.items():
        if question not in items:
            continue
        name, item = items[question]
        sources = [NumberedSource.model_validate(s) for s in raw]
        intent = classify_question(question)
        pool = rank_candidates(intent, build_candidates(sources))
        read = sorted(pool, key=lambda c: (-c.score, c.n, c.index))[:READ_TOP]
        if not read:
            continue
        probabilities = reader(question, [(c.statement, c.reader_context) for c in read])
        out.append(
            Read(
                name,
                item.kind,
                question,
                [c.score for c in read],
                list(probabilities),
                [labelled(item, c.statement) for c in read],
                [c.statement for c in read],
                item.answers[0].casefold() if item.kind == "yes_no" and item.answers else "",
                collection_kind([s.source.text() for s in sources]),
            )
        )
    return out


def in_articles(item: Item, first: int) -> bool:
    """A SQuAD fit question of article `first` or later (its gold paragraph's document id, `sAApPPP`); every
    unanswerable one (its article is not indexed)."""
    return not item.gold_docs or any(int(doc[1:3]) >= first for doc in item.gold_docs)


def lead(r: Read, lexical_weight: float, reader_weight: float = 1.0) -> int:
    scores = [mixed_score(p, s, lexical_weight, reader_weight) for p, s in zip(r.reading, r.lexical, strict=True)]
    return max(range(len(scores)), key=lambda i: (scores[i], -i))


def accuracy(reads: list[Read], name: str, lexical_weight: float, reader_weight: float = 1.0) -> float:
    rows = [r for r in reads if r.set == name and r.kind == "factoid"]
    return sum(r.labels[lead(r, lexical_weight, reader_weight)] for r in rows) / max(1, len(rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m research_tool.eval.fit_reader_mix")
    parser.add_argument("pools", type=Path, nargs="+", help="captured fit pools (eval.answers --capture)")
    parser.add_argument("--eval-dir", type=Path, default=DEFAULT_EVAL_DIR)
    parser.add_argument("--work-dir", type=Path, default=Path("data/eval"))
    parser.add_argument("--adapters", type=Path, default=ADAPTERS)
    parser.add_argument("--write", action="store_true", help=f"write {MIX_FILE.name}")
    parser.add_argument(
        "--folders", default="", help="only these owndocs fit folders (a fold's held-out ones), by comma"
    )
    parser.add_argument(
        "--squad-from", type=int, default=0, help="only SQuAD fit questions of this fit article on (a fold's)"
    )
    parser.add_argument(
        "--per-kind",
        action="store_true",
        help="write a refusal threshold per kind of collection (answered_at_by_kind) beside the shared one",
    )
    parser.add_argument("--dump", type=Path, help="write every read question (scores, labels) to this JSON file")
    args = parser.parse_args(argv)
    folders = {name for name in args.folders.split(",") if name}
    items: dict[str, tuple[str, Item]] = {}
    for answer_set in (
        load_owndocs(args.eval_dir / "owndocs", args.work_dir),
        load_squad(args.eval_dir / "squad_dev_part2", args.work_dir),
    ):
        for item in answer_set.items:  # the fit part only
            if folders and item.corpus is not None and item.corpus.name not in folders:
                continue
            if args.squad_from and answer_set.name == "squad" and not in_articles(item, args.squad_from):
                continue
            items[item.question] = (answer_set.name, item)
    pools: dict[str, list[dict[str, Any]]] = {}
    for path in args.pools:
        pools.update(json.loads(path.read_text(encoding="utf-8")))
    reader = AnswerReader(adapters=args.adapters)
    reads = read_pools(pools, items, reader)
    if args.dump is not None:
        args.dump.write_text(json.dumps([asdict(r) for r in reads]), encoding="utf-8")
    sets = ("owndocs", "squad")
    print("questions read:", {s: sum(r.set == s for r in reads) for s in sets})
    print(
        "gold among the read:",
        {
            s: round(
                sum(any(r.labels) for r in reads if r.set == s and r.kind == "factoid")
                / max(1, sum(r.set == s and r.kind == "factoid" for r in reads)),
                3,
            )
            for s in sets
        },
    )
    print("lexical alone:", {s: round(accuracy(reads, s, 1.0, 0.0), 3) for s in sets})
    print("reader alone:", {s: round(accuracy(reads, s, 0.0), 3) for s in sets})
    grid = {w: {s: accuracy(reads, s, w) for s in sets} for w in LEXICAL_WEIGHTS}
    for w, figures in grid.items():
        print(f"mix lexical weight {w}: " + ", ".join(f"{s} {v:.3f}" for s, v in figures.items()))
    best = max(LEXICAL_WEIGHTS, key=lambda w: (sum(grid[w].values()) / len(sets), -w))
    # answered: the lead's reader probability
    answerable = [r for r in reads if r.kind == "factoid"]
    unanswerable = [r for r in reads if r.kind == "unanswerable"]

    def lead_p(r: Read) -> float:
        return r.reading[lead(r, best)]

    candidates = sorted({round(lead_p(r), 4) for r in reads} | {0.0})
    answered_at = 0.0

    def wrongly_refused(t: float) -> float:
        """Answerable questions refused at `t`, averaged over the sets (each counts alike, as for the mix)."""
        shares = [
            sum(lead_p(r) < t for r in answerable if r.set == s) / max(1, sum(r.set == s for r in answerable))
            for s in sets
        ]
        return sum(shares) / len(shares)

    for t in candidates:
        if wrongly_refused(t) <= MAX_WRONGLY_REFUSED:
            answered_at = t
    refused = sum(lead_p(r) < answered_at for r in unanswerable) / max(1, len(unanswerable))
    wrongly = sum(lead_p(r) < answered_at for r in answerable) / max(1, len(answerable))
    print(f"answered_at {answered_at}: unanswerable refused {refused:.3f}, answerable wrongly refused {wrongly:.3f}")

    def refused_share(rows: list[Read], t: float) -> float:
        return sum(lead_p(r) < t for r in rows) / max(1, len(rows))

    for t in (answered_at, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5):
        curve = [
            f"{s} unanswerable refused {refused_share([r for r in unanswerable if r.set == s], t):.2f}"
            f" / answerable wrongly {refused_share([r for r in answerable if r.set == s], t):.3f}"
            for s in sets
        ]
        print(f"  at {t}: " + ", ".join(curve))
    yes_no = [r for r in reads if r.kind == "yes_no" and r.set == "owndocs"]

    def verdicts_right(t: float) -> int:
        return sum(
            lead_p(r) >= t and polarity_verdict(r.question, r.statements[lead(r, best)]).casefold() == r.gold_verdict
            for r in yes_no
        )

    yes_no_at = max(sorted({0.0, *(round(lead_p(r), 4) for r in yes_no)}), key=lambda t: (verdicts_right(t), -t))
    print(
        f"yes/no at {yes_no_at}: {verdicts_right(yes_no_at)} of {len(yes_no)} right (deciding sentence right for "
        f"{sum(r.labels[lead(r, best)] for r in yes_no)})"
    )
    by_kind: dict[str, float] = {}
    for kind in KINDS:  # the same rule within each kind of collection alone
        rows = [r for r in answerable if r.collection == kind]
        if not rows:
            continue
        by_kind[kind] = max(
            (t for t in candidates if sum(lead_p(r) < t for r in rows) / len(rows) <= MAX_WRONGLY_REFUSED), default=0.0
        )
        refused_kind = refused_share([r for r in unanswerable if r.collection == kind], by_kind[kind])
        print(
            f"{kind}: answered_at {by_kind[kind]}, unanswerable refused {refused_kind:.3f}, answerable wrongly "
            f"refused {refused_share(rows, by_kind[kind]):.3f} ({len(rows)} answerable)"
        )
    mix: dict[str, object] = {
        "reader": 1.0,
        "lexical": best,
        "read_top": READ_TOP,
        "answered_at": answered_at,
        "yes_no_at": yes_no_at,
    }
    if args.per_kind:
        mix["answered_at_by_kind"] = by_kind
    print("mix:", mix)
    if args.write:
        MIX_FILE.write_text(json.dumps(mix, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {MIX_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
