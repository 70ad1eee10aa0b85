"""Domain detection from keywords, and the ambiguity test that decides whether clarify asks anything.

The domain is the one whose keywords (models/domain.py DOMAINS) the query hits most; no hit means
"general". Clarification is for queries that are genuinely ambiguous: a one- or two-word query made
of a word with several well-known senses, or a bare acronym. Anything longer carries its own context
and is not questioned. At most two questions are asked.
"""

from __future__ import annotations

import re

from research_tool.engines.text.tokens import content_words, stem, words
from research_tool.models.domain import DOMAINS, DomainName

MAX_QUESTIONS = 2

# word -> a few of its well-known senses (shown to the user as examples)
AMBIGUOUS_TERMS: dict[str, tuple[str, ...]] = {
    "python": ("the programming language", "the snake", "Monty Python"),
    "java": ("the programming language", "the Indonesian island", "coffee"),
    "mercury": ("the planet", "the chemical element", "the Roman god"),
    "apple": ("the company", "the fruit"),
    "amazon": ("the company", "the river", "the rainforest"),
    "jaguar": ("the animal", "the car maker"),
    "mars": ("the planet", "the Roman god", "the confectionery company"),
    "rust": ("the programming language", "iron oxide", "the plant disease"),
    "ruby": ("the programming language", "the gemstone"),
    "swift": ("the programming language", "the bird", "Taylor Swift"),
    "go": ("the programming language", "the board game"),
    "shell": ("the command-line shell", "the oil company", "a seashell"),
    "spring": ("the Java framework", "the season", "a water spring"),
    "delta": ("the airline", "a river delta", "the Greek letter", "a mathematical difference"),
    "oracle": ("the database company", "a prophet"),
    "corona": ("the virus", "the beer", "the solar corona"),
    "bass": ("the fish", "the instrument"),
    "cell": ("the biological cell", "a battery cell", "a mobile phone"),
    "virus": ("a biological virus", "a computer virus"),
    "kernel": ("the operating-system kernel", "a kernel method", "a seed kernel"),
    "transformer": ("the neural-network architecture", "the electrical device", "the toy franchise"),
    "bank": ("a financial institution", "a river bank"),
    "pitch": ("musical pitch", "a sales pitch", "a sports field"),
    "crane": ("the bird", "the machine"),
    "phoenix": ("the city", "the mythical bird", "the Apache Phoenix project"),
    "saturn": ("the planet", "the rocket", "the car brand"),
    "docker": ("the container platform", "a dock worker"),
    "titan": ("Saturn's moon", "the Greek deity", "the Nvidia GPU line"),
}

_ACRONYM_RE = re.compile(r"^[A-Z][A-Z0-9&]{1,5}s?$")
# acronyms with one meaning nobody needs to be asked about
UNAMBIGUOUS_ACRONYMS = frozenset(
    """
    NASA NATO UNESCO HTML HTTP HTTPS JSON SQL USA UK EU FBI CIA DNA RNA COVID FIFA
    """.split()
)


def detect_domain(query: str, hint: DomainName | None = None) -> DomainName:
    """The caller's hint if given, else the domain whose keywords the query hits most (ties: general)."""
    if hint is not None:
        return hint
    stems = {stem(w) for w in words(query)}
    lowered = {w.casefold() for w in words(query)}
    best: DomainName = "general"
    best_hits = 0
    for config in DOMAINS.values():
        hits = sum(1 for k in config.keywords if k in lowered or stem(k) in stems)
        if hits > best_hits:
            best, best_hits = config.domain, hits
    return best


def ambiguity_questions(query: str) -> list[str]:
    """Questions to ask before researching `query`; empty when the query is clear enough (the usual case)."""
    tokens = content_words(query)
    if not tokens or len(words(query)) > 3 or len(tokens) > 2:
        return []
    questions: list[str] = []
    for token in tokens:
        senses = AMBIGUOUS_TERMS.get(token.casefold())
        if senses and not _context_disambiguates(token, tokens):
            examples = ", ".join(senses)
            questions.append(f'Which meaning of "{token}" do you mean (for example {examples})?')
        elif _ACRONYM_RE.match(token) and token.rstrip("s") not in UNAMBIGUOUS_ACRONYMS:
            questions.append(f'What does "{token}" stand for in your question, and in which field?')
    if questions and len(questions) < MAX_QUESTIONS:
        questions.append(
            "What do you want to know about it (a definition, how it works, a comparison, recent developments)?"
        )
    return questions[:MAX_QUESTIONS]


def _context_disambiguates(token: str, tokens: list[str]) -> bool:
    """A second word that is a domain keyword ("python decorators") settles the sense."""
    others = [t.casefold() for t in tokens if t is not token]
    keywords = {k for config in DOMAINS.values() for k in config.keywords}
    return any(o in keywords or len(o) > 3 for o in others)
