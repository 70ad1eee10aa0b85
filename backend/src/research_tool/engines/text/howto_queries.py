"""Search queries for how-to questions: the action paired with each thing it acts on.

A how-to question strings several things together ("log messages to a file with timestamps"); the whole
question as one BM25 query ranks first the pages that repeat its commonest pair of words, and rephrasing it
("how ... works", "... definition") finds the same pages again. An API page's name and synopsis are short:
they name the action and one thing it acts on ("a handler class which writes ... to disk files"). So a how-to
question is also searched as its action paired with each run of words it acts on: "log messages",
"log file", "log timestamps"; and, for a question of several parts ("match a string ... and extract groups"),
each part's own action with its objects, the parts taken in turn.
"""

from __future__ import annotations

import re

from research_tool.engines.text.keyphrases import build_query, content_runs
from research_tool.engines.text.tokens import words

HOWTO_RE = re.compile(r"^\s*(?:how\s+(?:do|can|could|should|would)\s+(?:i|you|we|one)|how\s+to)\b", re.IGNORECASE)
_PART_SPLIT_RE = re.compile(r",\s*(?:and\s+)?|\s+and\s+(?:then\s+)?|\s+then\s+", re.IGNORECASE)
# words that name no API: the language itself and filler nouns
_GENERIC = frozenset(["python", "way", "program", "code", "thing", "something"])
MAX_RUN_WORDS = 3


def is_howto(question: str) -> bool:
    """ "How do I ...?" / "How to ...?": a question asking for a procedure."""
    return HOWTO_RE.match(question) is not None


def _parts(question: str) -> list[str]:
    """A how-to question's parts after "How do I": "match X and extract Y" -> two; [] for any other question."""
    if not is_howto(question):
        return []
    body = HOWTO_RE.sub("", " ".join(question.split())).strip(" ?.!")
    return _PART_SPLIT_RE.split(body)


def _runs(part: str) -> list[list[str]]:
    """Runs of content words (stopwords and generic words cut them), in order."""
    return content_runs(part, _GENERIC)


def _opens_with(part: str, word: str) -> bool:
    first = words(part)[:1]
    return bool(first) and first[0] == word


def actions(question: str) -> list[str]:
    """The verbs a how-to question asks to perform, one per part ("match ... and extract ..." -> match,
    extract); a part opening with a word the question words set aside ("get", "find") has none."""
    out: list[str] = []
    for part in _parts(question):
        runs = _runs(part)
        if runs and _opens_with(part, runs[0][0]):
            out.append(runs[0][0])
    return out


def action_pairs(question: str) -> list[str]:
    """For a how-to question, its action paired with each run of words it acts on, the question's parts
    interleaved ("match a string against a regular expression and extract groups" -> "match string",
    "extract groups", "match regular expression"); [] for any other question."""
    per_part: list[list[str]] = []
    for part in _parts(question):
        runs = _runs(part)
        if not runs:
            continue
        if _opens_with(part, runs[0][0]):
            head, *first_objects = runs[0]
            objects = ([first_objects] if first_objects else []) + runs[1:]
        else:  # a generic verb ("get", "find") opens the part: its first run of words is what it is about
            head = " ".join(runs[0][:MAX_RUN_WORDS])
            objects = runs if len(runs) == 1 else runs[1:]
        pairs = [build_query(head, " ".join(run[:MAX_RUN_WORDS]), max_words=MAX_RUN_WORDS + 1) for run in objects]
        per_part.append([p for p in pairs if len(p.split()) >= 2])
    out: list[str] = []
    for rank in range(max((len(p) for p in per_part), default=0)):
        out += [pairs[rank] for pairs in per_part if rank < len(pairs)]
    return out
