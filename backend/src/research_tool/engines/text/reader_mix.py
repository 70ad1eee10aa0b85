"""How the answer reader's probability and the lexical ranker's score are combined, and when the answer is refused.

Fitted by `python -m research_tool.eval.fit_reader_mix` on the runner's captured fit pools (owndocs fit folders,
SQuAD fit articles) and stored beside this module in `reader_mix.json`: the mix's two weights (a read candidate's
score is `reader * logit(probability) + lexical * lexical score`), how many of the lexical ranker's best the reader
reads, the reader probability below which the sources do not answer, and the one below which a yes/no question is
not decided.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

MIX_FILE = Path(__file__).with_name("reader_mix.json")


@dataclass(frozen=True)
class ReaderMix:
    reader: float
    lexical: float
    read_top: int
    answered_at: float
    yes_no_at: float

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
    )
