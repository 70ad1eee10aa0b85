"""Word tokens, stopwords and a light stemmer: the normalization every text module shares.

Matching is done on stems so that "portrayed" meets "portrays", "positions" meets "position", "came" meets
"comes" and "Temüjin" meets "Temujin".
The stemmer is deliberately light (suffix stripping in the spirit of Porter's step 1 plus a few
derivational endings): it must be consistent, not linguistically perfect.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from research_tool.core.stopwords import STOPWORDS

WORD_RE = re.compile(r"[^\W_](?:[\w'’.-]*[^\W_])?", re.UNICODE)

# Words that shape a question but carry no topic: removed when a question becomes a search query.
QUESTION_WORDS: frozenset[str] = frozenset(
    """
    what which who whom whose when where why how many much is are was were does do did can could should would will
    tell explain describe give list name find show know please the a an kind type sort
    """.split()
)

NEGATIONS: frozenset[str] = frozenset({"not", "no", "never", "none", "nor", "neither", "cannot", "without"})


def words(text: str) -> list[str]:
    """Word tokens in order, original case; keeps inner dots and hyphens (`os.path`, `3.11`, `well-known`)."""
    return [m.group(0).rstrip(".") for m in WORD_RE.finditer(text)]


def is_stopword(word: str) -> bool:
    return word.casefold().replace("’", "'") in STOPWORDS


def has_negation(text: str) -> bool:
    lowered = text.casefold().replace("’", "'")
    return any(w in NEGATIONS or w.endswith("n't") for w in words(lowered))


_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("ization", "ize"),
    ("isation", "ize"),
    ("ation", "ate"),
    ("ities", "ity"),
    ("ments", "ment"),
    ("nesses", "ness"),
    ("ically", "ic"),
    ("ingly", ""),
    ("edly", ""),
    ("ies", "y"),
    ("ied", "y"),
    ("ing", ""),
    ("ed", ""),
    ("ly", ""),
    ("es", ""),
    ("s", ""),
)


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Light stem of one word (case-folded). Numbers and dotted identifiers are kept whole."""
    w = word.casefold().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    if not w.isascii():  # "Temüjin" meets "Temujin", "Céloron" meets "Celeron"
        w = "".join(c for c in unicodedata.normalize("NFKD", w) if not unicodedata.combining(c))
    w = _IRREGULAR.get(w, w)  # "came" meets "come", "led" meets "leads"
    if not w.isalpha() or len(w) <= 3:
        return w
    return _drop_final_e(_strip_suffix(w))


# Irregular past forms of common verbs (not those that are also names or other words: "rose", "drew", "found",
# "left", "saw", "felt", "fell")
_IRREGULAR: dict[str, str] = {
    past: base
    for base, forms in {
        "become": "became", "begin": "began begun", "break": "broke broken", "bring": "brought", "build": "built",
        "buy": "bought", "choose": "chose chosen", "come": "came", "drive": "drove driven",
        "eat": "eaten", "fight": "fought", "fly": "flew flown", "forget": "forgot forgotten", "give": "gave given",
        "go": "went gone", "grow": "grew grown", "hold": "held", "keep": "kept", "know": "knew known",
        "lead": "led", "lose": "lost", "make": "made", "meet": "met", "pay": "paid", "ride": "rode ridden",
        "run": "ran", "say": "said", "sell": "sold", "send": "sent", "show": "shown",
        "sing": "sang sung", "sink": "sank sunk", "shrink": "shrank shrunk", "swim": "swam swum",
        "drink": "drank drunk", "dig": "dug", "freeze": "froze frozen", "wake": "woke woken", "speak": "spoke spoken",
        "spend": "spent", "stand": "stood", "steal": "stole stolen",
        "strike": "struck stricken", "take": "took taken", "teach": "taught", "tell": "told", "think": "thought",
        "throw": "threw thrown", "understand": "understood", "wear": "wore worn", "win": "won",
        "write": "wrote written",
    }.items()
    for past in forms.split()
}  # fmt: skip


def _strip_suffix(w: str) -> str:
    for suffix, replacement in _SUFFIXES:
        if not w.endswith(suffix):
            continue
        root = w[: -len(suffix)]
        if suffix == "s" and w.endswith(("ss", "us", "is")):
            return w
        if suffix == "es" and not re.search(r"(ss|sh|ch|x|z)es$", w):
            root, replacement = w[:-1], ""  # "types" -> "type": strip only the s
        if suffix in ("ing", "ed") and len(root) == 2 and re.search(r"[aeiouy]", root):
            return root + "e"  # "used", "using" -> "use"
        if len(root) < 3 or not re.search(r"[aeiouy]", root):
            continue
        base = root + replacement
        if suffix in ("ing", "ed") and len(base) > 3 and base[-1] == base[-2] and base[-1] not in "lsz":
            base = base[:-1]  # "running" -> "run", "stopped" -> "stop"
        return base
    return w


def _drop_final_e(w: str) -> str:
    """ "bake" and "baked" meet at "bak", "rise" and "rises" at "ris" (a four-letter word too)."""
    return w[:-1] if len(w) > 3 and w.endswith("e") and not w.endswith("ee") else w


def content_words(text: str) -> list[str]:
    """Words that carry meaning: not stopwords, not lone punctuation, at least 2 characters (or a digit)."""
    return [w for w in words(text) if not is_stopword(w) and (len(w) > 1 or w.isdigit())]


def content_stems(text: str) -> list[str]:
    """Stems of the content words, in order (with repeats)."""
    return list(_content_stems(text))


IDENTIFIER_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def identifier_parts(word: str) -> list[str]:
    """`capture_output` -> capture, output; `TimeoutExpired` -> Timeout, Expired; plain words -> []."""
    parts = [p for chunk in word.split("_") for p in IDENTIFIER_PART.findall(chunk)]
    return parts if len(parts) > 1 else []


@lru_cache(maxsize=16384)
def _content_stems(text: str) -> tuple[str, ...]:
    """Stems of the content words; a code identifier also contributes the stems of its parts,
    so `capture_output=True` meets "capture the output"."""
    out: list[str] = []
    for word in content_words(text):
        out.append(stem(word))
        out += [stem(p) for p in identifier_parts(word) if len(p) > 1 and not is_stopword(p)]
    return tuple(out)


@lru_cache(maxsize=16384)
def stem_set(text: str) -> frozenset[str]:
    return frozenset(_content_stems(text))
