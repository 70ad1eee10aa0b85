"""The answer-sentence ranker: a logistic model over a few features, its weights fitted, not hand-set.

Every citable sentence is a candidate. Each feature says what it measures (all in [0, 1]):

- `bm25`: BM25 (k1 1.2, b 0.75) of the sentence against the question's stemmed content words, statistics
  from the candidate pool, divided by the pool's best score.
- `coverage`: the IDF-weighted share of the question's terms the sentence itself states (names weigh more;
  a term matches its inflections: "investigat" ~ "investigation").
- `context`: the share found only around it: its page's title, or the sentence before when it refers back
  ("It", "this notion").
- `names`: the share of the names the question mentions that the sentence, its title, the sentence it refers
  back to or its chain link states (a question about something no source names is not answered).
- `neighbours`: the share found only in the sentence before or after it (a question often paraphrases two
  adjacent sentences and the answer sits in one of them).
- `proximity`: the share of the question's adjacent term pairs the sentence keeps within two words.
- `type_value`: the question asks for a date or a number and the sentence carries one the question does not
  already name; `type_name`: the same for a person, place or organisation.
- `source_rank`: the source's place in the caller's ranking (1 for [1] down to near 0 for the last).
- `title`: the share of the question's terms its page's title holds.
- `opening`: the sentence opens its page (pages define their subject first).
- `link`: when a good sentence of another page names this one's page (the second hop of a chain question),
  the share of the question's terms the two sentences state together; 0 otherwise.
- `bridge`: the sentence is such a link itself (it names another page of the pool, where the answer may be):
  its `bm25`, else 0.

With a sentence similarity (the `semantic` extra's encoder, passed in as a `SentenceSimilarity`: engines load
no model themselves) two more, for the lexical ranker's top `SEMANTIC_CANDIDATES` sentences only (the
encoder's cost), 0 for the rest:

- `semantic`: the cosine between the question and the sentence (below 0 counts as 0).
- `semantic_best`: that cosine over the best one among the encoded sentences.

There are two weight sets: `lexical` (the default engine, no encoder, no numpy) and `semantic` (used when a
similarity is given), each fitted on the fit split with its own confidence model and threshold.

`score` is the fitted linear combination (a listwise ranker: the weights maximise the probability the
softmax over a question's candidates gives to the sentences holding the answer). `confidence` is a second
fitted logistic model over the same features and the score: the probability that the sources answer the
question given its lead (the top sentence), fitted on the leads of the fit split's answerable and
unanswerable SQuAD questions as the real runner's retrieval gives them (`fit_ranker --runner-pools`).
Ranking compares sentences of one question; confidence compares questions, so it
leans on the absolute features (how much of the question the sentence states) where the ranker leans on the
relative ones. The weights and the `answered` threshold live in
`ranker_weights.json` beside this module, written by `python -m research_tool.eval.fit_ranker`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from pathlib import Path

from research_tool.engines.text.tokens import content_stems

FEATURES: tuple[str, ...] = (
    "bm25",
    "coverage",
    "context",
    "names",
    "neighbours",
    "proximity",
    "type_value",
    "type_name",
    "source_rank",
    "title",
    "opening",
    "link",
    "bridge",
)
SEMANTIC_FEATURES: tuple[str, ...] = ("semantic", "semantic_best")
SEMANTIC_CANDIDATES = 6  # sentences encoded per question: the lexical ranker's best ones (the encoder's cost)
SentenceSimilarity = Callable[[str, Sequence[str]], Sequence[float]]
"""(question, sentences) -> the cosine of the question with each sentence, in order."""
K1 = 1.2
B = 0.75
PAIR_WINDOW = 2  # content words apart, at most, for a question pair to count as kept together
WEIGHTS_FILE = Path(__file__).with_name("ranker_weights.json")


@dataclass(frozen=True)
class Model:
    """Fitted weights (one per feature), the calibration, and the confidence above which a lead answers."""

    weights: dict[str, float]
    calibration: dict[str, float]  # per feature, and "score"
    offset: float
    answered_at: float

    def score(self, features: dict[str, float]) -> float:
        return sum(w * features.get(name, 0.0) for name, w in self.weights.items())

    def confidence(self, features: dict[str, float], score: float) -> float:
        linear = self.offset + self.calibration.get("score", 0.0) * score
        return sigmoid(linear + sum(w * features.get(name, 0.0) for name, w in self.calibration.items()))


@lru_cache(maxsize=2)
def load_model(semantic: bool = False) -> Model:
    """The lexical weight set, or the lexical+semantic one (`semantic`; the lexical one when none is stored)."""
    stored = json.loads(WEIGHTS_FILE.read_text(encoding="utf-8"))
    data = stored.get("semantic", stored) if semantic else stored
    names = (*FEATURES, *SEMANTIC_FEATURES) if semantic else FEATURES
    return Model(
        weights={k: float(data["weights"].get(k, 0.0)) for k in names},
        calibration={k: float(v) for k, v in data["calibration"].items()},
        offset=float(data["offset"]),
        answered_at=float(data["answered_at"]),
    )


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, x))))


@dataclass(frozen=True)
class Sentence:
    """What the ranker reads of one candidate."""

    terms: tuple[str, ...]  # stemmed content words in order
    context: frozenset[str]  # title stems, and the previous sentence's when this one refers back
    neighbours: frozenset[str]  # the stems of the sentences before and after it
    title: frozenset[str]
    source_rank: float
    opening: bool
    typed: str | None  # "value" or "name": carries a value of the expected type the question does not name
    bridge: bool  # names another page of the pool (by its title)
    link: frozenset[str]  # the words of another page's good sentence that names this one's page (and its title)


def bm25_scores(question: Sequence[str], pool: Sequence[Sequence[str]]) -> list[float]:
    """BM25 of each pool sentence against the question's terms (each counted once), pool statistics."""
    n = len(pool)
    if not n:
        return []
    average = sum(len(s) for s in pool) / n or 1.0
    terms = list(dict.fromkeys(question))
    df = {t: sum(1 for s in pool if t in s) for t in terms}
    idf = {t: math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    out = []
    for s in pool:
        norm = K1 * (1.0 - B + B * len(s) / average)
        score = 0.0
        for t in terms:
            tf = s.count(t)
            if tf:
                score += idf[t] * tf * (K1 + 1.0) / (tf + norm)
        out.append(score)
    return out


def idf_weights(question: dict[str, float], pool: Sequence[Sequence[str]]) -> dict[str, float]:
    """A question term's weight: its own (names weigh more) times its inverse frequency in the pool."""
    n = len(pool)
    return {t: w * (math.log((n + 1) / (1 + sum(1 for s in pool if t in s))) + 1.0) for t, w in question.items()}


def share(found: frozenset[str] | set[str], weights: dict[str, float]) -> float:
    total = sum(weights.values())
    return sum(weights[t] for t in found if t in weights) / total if total else 0.0


def question_pairs(question_text: str, terms: frozenset[str]) -> tuple[tuple[str, str], ...]:
    seq = [s for s in content_stems(question_text) if s in terms]
    return tuple(dict.fromkeys((a, b) for a, b in pairwise(seq) if a != b))


def proximity(pairs: Sequence[tuple[str, str]], terms: Sequence[str]) -> float:
    if not pairs:
        return 0.0
    at: dict[str, list[int]] = {}
    for i, t in enumerate(terms):
        at.setdefault(t, []).append(i)
    hit = sum(1 for a, b in pairs if any(abs(i - j) <= PAIR_WINDOW for i in at.get(a, ()) for j in at.get(b, ())))
    return hit / len(pairs)


def features(
    question_text: str,
    question: dict[str, float],
    names: frozenset[str],
    sentences: Sequence[Sentence],
) -> list[dict[str, float]]:
    """The feature values of every candidate (see the module docstring), in the order given."""
    pool = [s.terms for s in sentences]
    bm25 = bm25_scores(list(question), pool)
    best = max(bm25, default=0.0) or 1.0
    weights = idf_weights(question, pool)
    pairs = question_pairs(question_text, frozenset(question))
    qset = frozenset(question)
    out = []
    for s, b in zip(sentences, bm25, strict=True):
        own = matched(qset, frozenset(s.terms))
        around = matched(qset - own, s.context)
        near = matched(qset - own - around, s.neighbours)
        chained = share(matched(qset, frozenset(s.terms) | s.link), weights) if s.link else 0.0
        out.append(
            {
                "bm25": b / best,
                "coverage": share(own, weights),
                "context": share(around, weights),
                "names": len(matched(names, frozenset(s.terms) | s.context | s.link)) / len(names) if names else 1.0,
                "neighbours": share(near, weights),
                "proximity": proximity(pairs, s.terms),
                "type_value": float(s.typed == "value"),
                "type_name": float(s.typed == "name"),
                "source_rank": s.source_rank,
                "title": share(qset & s.title, weights),
                "opening": float(s.opening),
                "link": chained,
                "bridge": b / best if s.bridge else 0.0,
            }
        )
    return out


def encoded_candidates(lexical_scores: Sequence[float], limit: int = SEMANTIC_CANDIDATES) -> list[int]:
    """The positions of the sentences worth encoding: the lexical ranker's best `limit` (ties: earlier first)."""
    return sorted(range(len(lexical_scores)), key=lambda i: (-lexical_scores[i], i))[:limit]


def semantic_features(cosines: dict[int, float], size: int) -> list[dict[str, float]]:
    """`semantic` and `semantic_best` of each of `size` candidates from the cosines of the encoded ones."""
    best = max((max(0.0, c) for c in cosines.values()), default=0.0) or 1.0
    out = []
    for i in range(size):
        cosine = max(0.0, cosines.get(i, 0.0))
        out.append({"semantic": cosine, "semantic_best": cosine / best})
    return out


MIN_PREFIX = 5
SHARED_PREFIX = 8  # long words sharing this many letters are one word misspelt or inflected


def matched(terms: Iterable[str], stems: frozenset[str]) -> frozenset[str]:
    """The question terms found among `stems`: the same stem, or one the prefix of the other (the light
    stemmer leaves "investigation"/"investigat" and "christian"/"christianity" apart)."""
    out = set()
    for term in terms:
        if term in stems or (
            len(term) >= MIN_PREFIX
            and any(
                s.startswith(term)
                or (len(s) >= MIN_PREFIX and term.startswith(s))
                or (len(s) >= SHARED_PREFIX and s[:SHARED_PREFIX] == term[:SHARED_PREFIX])
                for s in stems
            )
        ):
            out.add(term)
    return frozenset(out)
