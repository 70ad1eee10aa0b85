"""How the answer reader's probability and the lexical ranker's score are combined, and when the answer is refused.

Fitted by `python -m research_tool.eval.fit_reader_mix` on the runner's captured fit pools (owndocs fit folders,
SQuAD fit articles) and stored beside this module in `reader_mix.json`: the mix's two weights (a read candidate's
score is `reader * logit(probability) + lexical * lexical score`), how many of the lexical ranker's best the reader
reads, the reader probability below which the sources do not answer, and the one below which a yes/no question is
not decided.

The refusal threshold may differ by the kind of collection the sources come from (`answered_at_by_kind`, fitted per
kind on the fit folds): "passages", where most sources are one block of prose each (an encyclopedia's paragraphs,
records of a JSONL collection, search snippets), and "documents", where most are whole files with headings,
paragraphs or tables (a user's folder, web pages). The kind is read from the sources' text alone
(`collection_kind`); a kind without a fitted threshold takes `answered_at`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

MIX_FILE = Path(__file__).with_name("reader_mix.json")
KINDS = ("passages", "documents")
_STRUCTURE = re.compile(r"\n\s*\n|^\s*(?:#|\|)", re.MULTILINE)  # a blank line, a heading, a table row


def is_passage(text: str) -> bool:
    """One block of prose: no blank line, heading or table row inside it."""
    return _STRUCTURE.search(text.strip()) is None


def collection_kind(texts: Sequence[str]) -> str:
    """ "passages" when at least half the sources are one block of prose each, else "documents"."""
    passages = sum(is_passage(t) for t in texts)
    return "passages" if texts and 2 * passages >= len(texts) else "documents"


@dataclass(frozen=True)
class ReaderMix:
    reader: float
    lexical: float
    read_top: int
    answered_at: float
    yes_no_at: float
    answered_at_by_kind: Mapping[str, float] = field(default_factory=dict)

    def refusal_threshold(self, kind: str) -> float:
        """The lead's reader probability below which sources of this kind of collection do not answer."""
        return self.answered_at_by_kind.get(kind, self.answered_at)

    def score(self, probability: float, lexical_score: float) -> float:
        return mixed_score(probability, lexical_score, self.lexical, self.reader)


def mixed_score(probability: float, lexical_score: float, lexical: float, reader: float = 1.0) -> float:
    """`reader * logit(probability) + lexical * lexical_score` (the probability kept off 0 and 1)."""
    p = min(1.0 - 1e-6, max(1e-6, probability))
    return reader * math.log(p / (1.0 - p)) + lexical * lexical_score


@lru_cache(maxsize=1)
def load_mix() -> ReaderMix:
    data = json.loads(MIX_FILE.read_text(encoding="utf-8"))
    return ReaderMix(
        reader=float(data["reader"]),
        lexical=float(data["lexical"]),
        read_top=int(data["read_top"]),
        answered_at=float(data["answered_at"]),
        yes_no_at=float(data["yes_no_at"]),
        answered_at_by_kind={k: float(v) for k, v in data.get("answered_at_by_kind", {}).items() if k in KINDS},
    )
