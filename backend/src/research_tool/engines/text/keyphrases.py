"""Keyphrases (RAKE-style, names kept whole) and search-query building.

A question becomes a keyword query: question words and stopwords go, named phrases stay whole, every
word at most once (by stem). `query_signature` is the loop-safety key: two queries with the same set
of content stems are the same query, whatever their order, case or punctuation.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from research_tool.engines.text.entities import find_mentions
from research_tool.engines.text.tokens import QUESTION_WORDS, content_words, is_stopword, stem, words

_PHRASE_SPLIT_RE = re.compile(r"[,;:.!?()\[\]{}\"“”‘’'/\\|—–]+|\s-\s")
MAX_PHRASE_WORDS = 4


@dataclass(frozen=True)
class Keyphrase:
    phrase: str
    score: float
    stems: tuple[str, ...]
    is_name: bool = False


def content_runs(text: str, also_breaking: frozenset[str] = frozenset()) -> list[list[str]]:
    """Runs of content words, in order: stopwords, question words and `also_breaking` (casefolded) cut them."""
    runs: list[list[str]] = []
    run: list[str] = []
    for word in words(text):
        if is_stopword(word) or word.casefold() in QUESTION_WORDS or word.casefold() in also_breaking:
            if run:
                runs.append(run)
            run = []
        else:
            run.append(word)
    if run:
        runs.append(run)
    return runs


def keyphrases(text: str, limit: int = 10) -> list[Keyphrase]:
    """The text's keyphrases, best first: named phrases (entities) and RAKE candidates of content words."""
    names = [m for m in find_mentions(text) if m.entity_type not in ("date", "number")]
    candidates: list[list[str]] = []
    for chunk in _PHRASE_SPLIT_RE.split(text):
        candidates.extend(content_runs(chunk))
    candidates = [c[i : i + MAX_PHRASE_WORDS] for c in candidates for i in range(0, len(c), MAX_PHRASE_WORDS)]
    frequency: Counter[str] = Counter()
    degree: Counter[str] = Counter()
    for candidate in candidates:
        for word in candidate:
            frequency[stem(word)] += 1
            degree[stem(word)] += len(candidate)
    scored: dict[tuple[str, ...], Keyphrase] = {}
    for name in names:
        stems = tuple(stem(w) for w in content_words(name.text))
        if stems:
            score = sum(degree[s] / max(frequency[s], 1) for s in stems) + 2.0
            scored[stems] = Keyphrase(name.text, score, stems, is_name=True)
    for candidate in candidates:
        stems = tuple(stem(w) for w in candidate)
        if stems in scored or any(set(stems) <= set(k) for k in scored if scored[k].is_name):
            continue
        score = sum(degree[s] / frequency[s] for s in stems)
        scored[stems] = Keyphrase(" ".join(candidate), score, stems)
    ranked = sorted(scored.values(), key=lambda k: (-k.score, k.phrase))
    return ranked[:limit]


def query_words(text: str) -> list[str]:
    """Topic words of a question in order (original case), without question words, stopwords or repeats."""
    seen: set[str] = set()
    out: list[str] = []
    for index, word in enumerate(content_words(text)):
        key = stem(word)
        is_name_word = word[:1].isupper() and index > 0
        if (word.casefold() in QUESTION_WORDS and not is_name_word) or key in seen:
            continue
        seen.add(key)
        out.append(word)
    return out


def build_query(*parts: str, max_words: int = 10) -> str:
    """Join parts into one keyword query: topic words in order, each stem once, at most max_words words."""
    seen: set[str] = set()
    out: list[str] = []
    for part in parts:
        for word in query_words(part):
            key = stem(word)
            if key in seen:
                continue
            seen.add(key)
            out.append(word)
            if len(out) >= max_words:
                return " ".join(out)
    return " ".join(out)


def query_signature(query: str) -> str:
    """Order-, case- and inflection-insensitive identity of a query (loop safety)."""
    return " ".join(sorted({stem(w) for w in query_words(query)}))
