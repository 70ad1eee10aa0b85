"""Short answers: a span of the lead sentence, chosen by a fitted span ranker and given only when a fitted
gate says it is likely right (precise or null).

Candidates are generated generally from the lead: every run of at most `SPAN_WORDS` words inside one clause
(no comma, semicolon, colon, bracket, quote or dash inside it, except within a name or a date), made of
whole units (a name, a date, a number or a count in words the mention finder reads is one unit, never cut),
not opening or ending on a stopword, holding no function word but a noun phrase's connectors ("of", "and",
"or", an article right after them) and no word the question states (the question's head noun may close it:
"a progressive tax system"), not ending on a possessive ("Mara Holt's" of "Mara Holt's cousin" is no
answer), and holding at least one content word the question does not state. Complete spans only: no
"was built by", no "Tolt a new crop".

Span features (each says what it measures; all in [0, 1]):

- `type_value`: the question asks for a date or a number and the span holds one (a date, a year, a period
  such as "the 1960s", a figure, a count in words such as "eight").
- `type_name`: the question asks for a person, place or organisation and the span is a name (every content
  word capitalised); 1 when the mention finder types it as asked, 0.5 for another or no type (the finder
  often confuses people, places and organisations).
- `name` / `value`: the span is a name (every content word capitalised) / holds a figure, date or count
  word, whatever the question asks ("What Shakespeare scholar ...?" asks for a name without saying so).
- `whole`: the span is exactly one name or value the mention finder reads (complete, not a piece of one).
- `named`: the share of its words that are capitalised (not merely opening the sentence) or numeric.
- `in_question`: the share of its content words the question states.
- `near`: 1 / (1 + the content words between the span and the nearest question term in the sentence).
- `closeness`: how tightly question terms surround it: on its better side, the sum of 1 / (1 + words
  between) over the three nearest question terms, over 3.
- `same_clause`: the share of the question's terms its own clause (between breaks) states.
- `after_terms` / `before_terms`: the span starts right after / ends right before a question term (only
  function words between): answers sit at an edge of what the sentence restates of the question.
- `beside_head`: the span touches the question's head noun ("which toxin": "toxin called velorin"; "what
  system": "a progressive tax system").
- `after_prev` / `before_next` / `after_last`: the span follows the sentence's match of the question's term
  right before its wh-word ("... can become what?": after "become"), precedes the match of the term right
  after it ("Who approached the BBC?": before "approached"), follows the match of the question's last term
  ("What does the outside resemble?": after "resembles"); only function words between. The answer takes the
  wh-word's place in the sentence.
- `length`: its words over `SPAN_WORDS`.
- `one_common`: one lowercase word that is no value (rarely an answer).
- `cut`: a plain word at its edge (not a name or value, which the mention finder reads whole) has a content
  word the question does not state beside it in its clause (the span splits a phrase).

`rank`: the ranker's score is the fitted linear combination; the span probability is the softmax over the
lead's candidates (a listwise ranker: the weights maximise the probability given to the spans holding the
gold answer in at most two words more than it, on the SQuAD fit part's sentences that hold it).

Gate features (the probability that the best span is right, a logistic model fitted on the fit part's
SQuAD leads: those the real runner gives, and those of `fit_ranker`'s index pools for other fit questions):

- `span_prob`: the best span's softmax probability among the lead's candidates.
- `lead_share`: the ranker's probability that the lead holds the answer (softmax over the pool).
- `lead_confidence`: the confidence model's probability that the sources answer.
- `span_score`: its ranker score (the fitted combination of its features, before the softmax).
- `typed`: the question asks for a date, number, person, place or organisation and the span is of that type.
- `asks_value` / `asks_name` / `asks_thing`: the question asks for a date or number / a person, place or
  organisation / another thing (definitions, reasons and the rest: none of the three).

A short answer is given when the gate's probability reaches `threshold`: the lowest whose cross-validated
precision on the fit part reaches 0.75 (the issue's 0.70 with a margin); figures and the ablation in
docs/history/answer-selection.md. Weights in `short_answer_weights.json` beside this module, written by
`python -m research_tool.eval.fit_spans`; the engine path needs no numpy.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from research_tool.engines.text.entities import PERIOD_RE, find_mentions
from research_tool.engines.text.question_intent import VALUE_TYPES
from research_tool.engines.text.ranker import matched
from research_tool.engines.text.tokens import content_stems, is_stopword, stem

SPAN_WORDS = 8
SPAN_FEATURES: tuple[str, ...] = (
    "type_value",
    "type_name",
    "name",
    "value",
    "whole",
    "named",
    "in_question",
    "near",
    "closeness",
    "same_clause",
    "after_terms",
    "before_terms",
    "beside_head",
    "after_prev",
    "before_next",
    "after_last",
    "length",
    "one_common",
    "cut",
)
GATE_FEATURES: tuple[str, ...] = (
    "span_prob",
    "span_score",
    "lead_share",
    "lead_confidence",
    "typed",
    "asks_value",
    "asks_name",
    "asks_thing",
)
WEIGHTS_FILE = Path(__file__).with_name("short_answer_weights.json")

NAME_TYPES = frozenset(["person", "place", "organization"])

_TOKEN_RE = re.compile(r"[$€£]\d(?:[\d,.]*\d)?|\d(?:[\d,.]*\d)?%|\w[\w'’-]*(?:[.,]\d+)*")
_BREAK_RE = re.compile(r"[,;:()\[\]\"“”!?/]|[–—]|\s-\s")
_COUNT_WORD_RE = re.compile(
    r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|"
    r"thousand|million|billion|dozens?|hundreds?|thousands?|millions?)",
    re.IGNORECASE,
)
_POSSESSIVE = ("'s", "’s", "'", "’")
_CONNECTORS = frozenset(["of", "and", "or", "&"])  # function words a noun phrase may hold
_ARTICLES = frozenset(["the", "a", "an"])  # inside a phrase only after a connector


@dataclass(frozen=True)
class SpanModel:
    """The span ranker's weights, the gate's weights and bias, and the gate probability that gives a short answer."""

    rank: dict[str, float]
    gate: dict[str, float]
    gate_bias: float
    threshold: float

    def span_score(self, features: dict[str, float]) -> float:
        return sum(self.rank.get(k, 0.0) * v for k, v in features.items())

    def gate_probability(self, features: dict[str, float]) -> float:
        z = self.gate_bias + sum(self.gate.get(k, 0.0) * v for k, v in features.items())
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


@lru_cache(maxsize=1)
def load_span_model() -> SpanModel:
    stored = json.loads(WEIGHTS_FILE.read_text(encoding="utf-8"))
    return SpanModel(
        rank={k: float(stored["rank"].get(k, 0.0)) for k in SPAN_FEATURES},
        gate={k: float(stored["gate"].get(k, 0.0)) for k in GATE_FEATURES},
        gate_bias=float(stored["gate_bias"]),
        threshold=float(stored["threshold"]),
    )


@dataclass(frozen=True)
class AskedFor:
    """What the span ranker needs of the question: its asked type, weighted terms and head noun's stem."""

    answer_type: str
    terms: dict[str, float]
    head_noun: str | None = None
    question: str = ""

    @property
    def slots(self) -> tuple[str | None, str | None, str | None]:
        """The question's terms that frame its wh-word: the last term before it (when the wh-word does not
        open the question), the first term after it, and the question's last term."""
        return _slots(self.question, self.terms)


@dataclass(frozen=True)
class SpanCandidate:
    text: str
    features: dict[str, float]


@dataclass(frozen=True)
class ShortAnswer:
    """The lead's best span, its probability among the lead's spans and the gate's probability that it is right."""

    text: str
    span_prob: float
    probability: float
    features: dict[str, float]


@dataclass(frozen=True)
class _Unit:
    first: int  # token range [first, last)
    last: int
    kind: str | None  # the mention's type when a mention ("date", "number", "person", ...), else None


@dataclass(frozen=True)
class _Sentence:
    """The lead read against the question: its tokens and what each is."""

    text: str
    tokens: list[tuple[int, int, str]]  # (start, end, word)
    units: list[_Unit]
    in_question: list[bool]  # the word states a question term
    stop: list[bool]
    broken: list[bool]  # a clause break (comma, bracket, dash ...) just before the word
    anchors: list[int]  # content words stating a question term
    heads: list[int]  # anchors that are the question's head noun
    clause_share: list[float]  # per word: the share of the question's terms its clause states
    slot_at: list[list[int]]  # anchors matching each of `AskedFor.slots`


def _read(asked: AskedFor, statement: str) -> _Sentence:
    tokens = [(m.start(), m.end(), m.group(0)) for m in _TOKEN_RE.finditer(statement)]
    in_question = [bool(matched(asked.terms, frozenset(content_stems(t)))) for _, _, t in tokens]
    stop = [is_stopword(t) for _, _, t in tokens]
    anchors = [i for i, hit in enumerate(in_question) if hit and not stop[i]]
    broken = [False] + [
        bool(_BREAK_RE.search(statement[tokens[i - 1][1] : tokens[i][0]])) for i in range(1, len(tokens))
    ]
    return _Sentence(
        text=statement,
        tokens=tokens,
        units=_units(statement, tokens),
        in_question=in_question,
        stop=stop,
        broken=broken,
        anchors=anchors,
        heads=[i for i in anchors if asked.head_noun is not None and stem(tokens[i][2].casefold()) == asked.head_noun],
        clause_share=_clause_shares(asked, tokens, in_question, broken),
        slot_at=[
            [i for i in anchors if term is not None and matched([term], frozenset(content_stems(tokens[i][2])))]
            for term in asked.slots
        ],
    )


def candidate_spans(asked: AskedFor, statement: str) -> list[SpanCandidate]:
    """Every complete span of `statement` (see the module's docstring) with its features."""
    sentence = _read(asked, statement)
    tokens, units, stop = sentence.tokens, sentence.units, sentence.stop
    out = []
    for a, first_unit in enumerate(units):
        if first_unit.kind is None and stop[first_unit.first]:
            continue
        for b in range(a, len(units)):
            unit = units[b]
            if b > a and sentence.broken[unit.first]:
                break
            first, last = first_unit.first, unit.last
            if last - first > SPAN_WORDS:
                break
            if unit.kind is None and stop[last - 1]:
                continue
            if tokens[last - 1][2].endswith(_POSSESSIVE) or _possessive_follows(statement, tokens, last):
                continue
            inside = units[a : b + 1]
            if any(_clause_word(sentence, i, first, last, inside) for i in range(first, last)):
                continue  # a question word or a verb's particle inside: a clause fragment, not a phrase
            if all(sentence.in_question[i] or stop[i] for i in range(first, last)):
                continue
            text = statement[tokens[first][0] : tokens[last - 1][1]]
            out.append(SpanCandidate(text, _features(asked, sentence, inside, first, last)))
    return out


_WH_WORD_RE = re.compile(r"\b(?:what|which|who|whom|whose|when|where|why|how)\b", re.IGNORECASE)


@lru_cache(maxsize=1024)
def _question_slots(question: str, terms: frozenset[str]) -> tuple[str | None, str | None, str | None]:
    wh = _WH_WORD_RE.search(question)
    ordered = [(m.start(), k) for m in _TOKEN_RE.finditer(question) for k in content_stems(m.group(0)) if k in terms]
    if wh is None or not ordered:
        return None, None, None
    before = [k for at, k in ordered if at < wh.start()]
    after = [k for at, k in ordered if at > wh.start()]
    return (before[-1] if before else None, after[0] if after else None, ordered[-1][1])


def _slots(question: str, terms: dict[str, float]) -> tuple[str | None, str | None, str | None]:
    return _question_slots(question, frozenset(terms))


def _clause_shares(
    asked: AskedFor, tokens: list[tuple[int, int, str]], in_question: list[bool], broken: list[bool]
) -> list[float]:
    """For every token, the share of the question's terms its clause (between breaks) states."""
    out: list[float] = []
    start = 0
    for end in [*(i for i in range(1, len(tokens)) if broken[i]), len(tokens)]:
        stems = frozenset(k for i in range(start, end) if in_question[i] for k in content_stems(tokens[i][2]))
        share = len(matched(asked.terms, stems)) / max(1, len(asked.terms)) if stems else 0.0
        out += [share] * (end - start)
        start = end
    return out


def _units(statement: str, tokens: list[tuple[int, int, str]]) -> list[_Unit]:
    """Tokens grouped into units: a mention (name, date, number, period) is one unit, any other token one."""
    ranges: list[tuple[int, int, str]] = [(m.start, m.end, m.entity_type) for m in find_mentions(statement)]
    ranges += [(m.start(), m.end(), "date") for m in PERIOD_RE.finditer(statement)]
    owner: dict[int, tuple[int, int, str]] = {}
    for start, end, kind in sorted(ranges, key=lambda r: r[0] - r[1]):  # longest first
        inside = [i for i, (a, b, _) in enumerate(tokens) if a >= start and b <= end + 2 and a < end]
        if inside and not any(i in owner for i in inside):
            for i in inside:
                owner[i] = (inside[0], inside[-1] + 1, kind)
    units: list[_Unit] = []
    i = 0
    while i < len(tokens):
        if i in owner:
            first, last, kind = owner[i]
            units.append(_Unit(first, last, kind))
            i = last
        else:  # a count in words ("eight presidents") is a number of its own
            units.append(_Unit(i, i + 1, "number" if _COUNT_WORD_RE.fullmatch(tokens[i][2]) else None))
            i += 1
    return units


def _clause_word(sentence: _Sentence, i: int, first: int, last: int, units: Sequence[_Unit]) -> bool:
    """Token `i` makes the span a clause fragment: a function word other than a phrase's connector ("of",
    "and", "the" ...), or a word the question states (the answer is what the sentence adds to the question),
    save the question's head noun closing the span ("a progressive tax system") and words inside a name."""
    if any(u.kind is not None and u.first <= i < u.last for u in units):
        return False
    if sentence.stop[i]:
        word = sentence.tokens[i][2].casefold()
        if word in _ARTICLES:  # "the Bank of the West", not "Tolt a new crop"
            return sentence.tokens[i - 1][2].casefold() not in _CONNECTORS
        return word not in _CONNECTORS
    return sentence.in_question[i] and not (i == last - 1 and i in sentence.heads and i > first)


def _possessive_follows(statement: str, tokens: list[tuple[int, int, str]], last: int) -> bool:
    return statement[tokens[last - 1][1] : tokens[last - 1][1] + 2] in ("'s", "’s")


def _features(asked: AskedFor, sentence: _Sentence, units: Sequence[_Unit], first: int, last: int) -> dict[str, float]:
    """The span [first, last)'s features (see the module's docstring)."""
    tokens, stop, in_question, broken = sentence.tokens, sentence.stop, sentence.in_question, sentence.broken
    anchors, heads, slot_at = sentence.anchors, sentence.heads, sentence.slot_at
    words = [tokens[i][2] for i in range(first, last)]
    content = [i for i in range(first, last) if not stop[i]]
    kinds = {u.kind for u in units if u.kind is not None}
    numeric = [bool(_COUNT_WORD_RE.fullmatch(w)) or w[:1].isdigit() or w[:1] in "$€£" for w in words]
    capital = [
        (tokens[i][2][:1].isupper() and (i > 0 or any(c.isupper() for c in tokens[i][2][1:]))) or numeric[i - first]
        for i in range(first, last)
    ]
    name = all(tokens[i][2][:1].isupper() for i in content) and not any(numeric)

    type_value = 0.0
    if asked.answer_type == "date":
        type_value = float("date" in kinds or any(re.fullmatch(r"1\d{3}|20\d{2}", w) for w in words))
    elif asked.answer_type == "number":
        type_value = float("number" in kinds or any(numeric))
    type_name = 0.0
    if asked.answer_type in NAME_TYPES and name:
        type_name = 1.0 if asked.answer_type in kinds else 0.5

    def gap(lo: int, hi: int) -> int:
        return sum(1 for j in range(lo, hi) if not stop[j])

    before = sorted(gap(a + 1, first) for a in anchors if a < first)
    after = sorted(gap(last, a) for a in anchors if a >= last)
    nearest = min(before + after, default=None)
    closeness = max(sum(1.0 / (1 + g) for g in side[:3]) for side in (before, after)) / 3

    left = first - 1
    right = last
    plain_left, plain_right = units[0].kind is None, units[-1].kind is None  # a name or value edge is complete
    cut = (plain_left and left >= 0 and not broken[first] and not stop[left] and not in_question[left]) or (
        plain_right and right < len(tokens) and not broken[right] and not stop[right] and not in_question[right]
    )
    return {
        "type_value": type_value,
        "type_name": type_name,
        "name": float(name),
        "value": float(any(numeric) or bool(kinds & VALUE_TYPES)),
        "whole": float(len(units) == 1 and units[0].kind is not None),
        "named": sum(capital) / len(words),
        "in_question": sum(in_question[i] for i in content) / max(1, len(content)),
        "near": 0.0 if nearest is None else 1.0 / (1.0 + nearest),
        "closeness": closeness,
        "same_clause": sentence.clause_share[first],
        "after_terms": float(any(g == 0 for g in before)),
        "before_terms": float(any(g == 0 for g in after)),
        "beside_head": float(any(first - 1 <= h <= last for h in heads)),
        "after_prev": float(any(a < first and gap(a + 1, first) == 0 for a in slot_at[0])),
        "before_next": float(any(a >= last and gap(last, a) == 0 for a in slot_at[1])),
        "after_last": float(any(a < first and gap(a + 1, first) == 0 for a in slot_at[2])),
        "length": len(words) / SPAN_WORDS,
        "one_common": float(len(words) == 1 and not capital[0]),
        "cut": float(cut),
    }


def softmax(scores: Sequence[float]) -> list[float]:
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def gate_features(
    asked: AskedFor, best: SpanCandidate, span_prob: float, span_score: float, share: float, confidence: float
) -> dict[str, float]:
    """The gate's features for the lead's best span (see the module's docstring)."""
    typed_question = asked.answer_type in VALUE_TYPES | NAME_TYPES
    return {
        "span_prob": span_prob,
        "span_score": span_score,
        "lead_share": share,
        "lead_confidence": confidence,
        "typed": float(typed_question and (best.features["type_value"] > 0 or best.features["type_name"] > 0)),
        "asks_value": float(asked.answer_type in VALUE_TYPES),
        "asks_name": float(asked.answer_type in NAME_TYPES),
        "asks_thing": float(asked.answer_type == "thing"),
    }


def best_span(
    asked: AskedFor, statement: str, share: float, confidence: float, model: SpanModel | None = None
) -> ShortAnswer | None:
    """The lead's best span by the fitted ranker, with the gate's probability that it is right."""
    model = model or load_span_model()
    spans = candidate_spans(asked, statement)
    if not spans:
        return None
    scores = [model.span_score(s.features) for s in spans]
    probs = softmax(scores)
    k = max(range(len(spans)), key=lambda i: (round(probs[i], 12), -len(spans[i].text)))
    gate = gate_features(asked, spans[k], probs[k], scores[k], share, confidence)
    return ShortAnswer(spans[k].text.strip(" ,.;:"), probs[k], model.gate_probability(gate), gate)


def short_answer(
    asked: AskedFor, statement: str, share: float, confidence: float, model: SpanModel | None = None
) -> str | None:
    """The best span when the gate gives it at least the fitted threshold (precise or null)."""
    model = model or load_span_model()
    found = best_span(asked, statement, share, confidence, model)
    return found.text if found is not None and found.probability >= model.threshold else None
