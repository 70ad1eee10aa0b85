"""Whether what the answer is about to state is what the question asks (issue 41): a wrong statement costs a user
more than a missing one, so a short answer or a verdict is given only when its sentence says it about the asked
subject, and otherwise the answer says less.

- `unstated_terms`: the question's terms that a sentence does not state, neither in its own words, its antecedent,
  its page's title nor the sentence before it ("Is there a sauna?" and a sentence about the lido: "sauna").
- `span_answers`: a short answer fits the question: a value of the asked kind (a price for "how much does it cost",
  a count for "how many", a date or time for "when", a name for "who"), from a lead that states every term of the
  question, and from the clause that the question's distinguishing words are about when the lead holds two values
  of that kind ("28 pounds for an adult and 14 for a child": "child" picks the clause).
- `names_no_source_mentions`: the names a question gives of which no source says a word ("Dr Felix Arkwell"): the
  sources are about something else, and the answer says so.
- `decided_verdict`: a yes/no verdict from one deciding sentence that states the asked predicate about the asked
  subject: "No" when it negates it or names an exclusive alternative ("diesel only" for "oil?", "Wednesday to
  Sunday" for "Monday?"), else "Yes"; None when the sentence does not state the question's terms (the files do not
  say).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence

from research_tool.engines.text.candidates import Candidate, SourceDoc
from research_tool.engines.text.entities import find_mentions
from research_tool.engines.text.question_intent import QuestionIntent
from research_tool.engines.text.ranker import matched
from research_tool.engines.text.tokens import content_stems, stem, stem_set
from research_tool.engines.text.verdicts import is_negated, polarity_verdict

_MONEY_RE = re.compile(
    r"[£$€]\s?\d|\d(?:[\d,.]*\d)?\s*(?:pounds?|pence|p\b|dollars?|euros?|cents?|usd|eur|gbp)\b|\bfree\b",
    re.IGNORECASE,
)
_COST_WORDS = frozenset(stem(w) for w in "cost costs price pay paid charge charged fee fees spend rent extra".split())
_HOW_MUCH_PRICE_RE = re.compile(r"^how much\s+(?:is|are|was|were|does|do|did|will|would|extra|more|money|to)\b")
_MEASURE_RE = re.compile(
    r"\b(?:time|notice|longer|weigh|weighs|heavy|long|far|space|room|memory|disk|data|water|sugar|salt|flour|"
    r"milk|rain|snow|per cent|percent)\b"
)
TIME_RE = re.compile(
    r"\b\d{1,2}[:.]\d{2}\b|\b\d{1,2}\s?(?:am|pm|a\.m\.|p\.m\.)|\b(?:noon|midday|midnight)\b"
    r"|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekends?|weekdays?)s?\b"
    r"|\b(?:january|february|march|april|may|june|july|august|september|october|november|december)\b"
    r"|\b(?:spring|summer|autumn|winter)\b|\b(?:1\d{3}|20\d{2})s?\b|\b\d{1,2}(?:st|nd|rd|th)\b",
    re.IGNORECASE,
)
NUMBER_RE = re.compile(
    r"\d|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred|"
    r"thousand|million|dozen|half|a couple)\b",
    re.IGNORECASE,
)
_CLAUSE_BREAK_RE = re.compile(r"[,;:()\[\]–—]|\s-\s|\b(?:and|or|but|while|whereas|than|unless|except)\b")
_HOW_MANY_RE = re.compile(
    r"\bhow many\s+((?:[\w'’-]+\s+){0,3}?)([\w'’-]+)\s+(?:is|are|was|were|do|does|did|has|have|had|will|can|could|"
    r"would|should|on|in|at|for|of|there)\b",
    re.IGNORECASE,
)


def unstated_terms(intent: QuestionIntent, candidate: Candidate, *, before: bool = True) -> frozenset[str]:
    """The question's terms the sentence does not state: not in its words, its antecedent's, its page's title or
    (with `before`) the sentence before it (a heading, a lead-in)."""
    have = candidate.joint | candidate.context | (stem_set(candidate.before) if before else frozenset())
    return frozenset(intent.weights) - matched(intent.weights, have)


def asks_price(intent: QuestionIntent) -> bool:
    """ "How much does it cost?", "How much is a croissant?", "What is the fee?": the answer is an amount of money
    ("How much notice ...?", "How much does it weigh?" ask for another quantity)."""
    lowered = intent.text.casefold()
    if _MEASURE_RE.search(lowered):
        return False
    if _HOW_MUCH_PRICE_RE.match(lowered):
        return True
    return bool(intent.stems & _COST_WORDS) and intent.answer_type in ("number", "thing")


def _value_kind(intent: QuestionIntent) -> str | None:
    if asks_price(intent):
        return "money"
    if intent.answer_type == "date":
        return "date"
    if intent.answer_type == "number":
        return "count" if intent.text.casefold().lstrip().startswith("how many") else "number"
    if intent.answer_type in ("person", "organization"):
        return "name"
    return None


def _is_kind(kind: str, text: str) -> bool:
    if kind == "money":
        return _MONEY_RE.search(text) is not None
    if kind == "date":
        return TIME_RE.search(text) is not None or any(m.entity_type == "date" for m in find_mentions(text))
    if kind == "count":  # a count of things: not an amount of money, a share ("45%") or a clock time ("11:00")
        money_or_share = re.search(r"[£$€%]|\bper\s?cent\b|\b\d{1,2}[:.]\d{2}\b", text, re.IGNORECASE)
        return NUMBER_RE.search(text) is not None and not money_or_share
    if kind == "number":
        return NUMBER_RE.search(text) is not None
    if kind == "name":
        words = [w for w in re.findall(r"[\w'’.-]+", text) if w.casefold() not in ("of", "the", "and", "de", "&")]
        named = bool(words) and all(w[:1].isupper() for w in words)
        return named and not all(TIME_RE.fullmatch(w) for w in words)  # "Thursday" names a day, not who
    return True


def _clauses(statement: str) -> list[tuple[int, int]]:
    """The sentence's clauses as (start, end) offsets, cut at punctuation and at conjunctions."""
    cuts = [0, *(m.start() for m in _CLAUSE_BREAK_RE.finditer(statement)), len(statement)]
    return [(a, b) for a, b in itertools.pairwise(cuts) if statement[a:b].strip(" ,;:()–—-")]


def _values(kind: str, statement: str) -> list[tuple[int, int]]:
    """Offsets of the values of `kind` in the sentence (money, dates and times, numbers, names)."""
    if kind == "money":
        return [(m.start(), m.end()) for m in _MONEY_RE.finditer(statement)]
    if kind == "date":
        return [(m.start(), m.end()) for m in TIME_RE.finditer(statement)]
    if kind in ("count", "number"):
        return [(m.start(), m.end()) for m in NUMBER_RE.finditer(statement)]
    return [
        (m.start, m.end)
        for m in find_mentions(statement)
        if m.entity_type in ("person", "organization", "other", "place")
    ]


def _clause_of(clauses: list[tuple[int, int]], at: int) -> int:
    return next((i for i, (a, b) in enumerate(clauses) if a <= at < b), len(clauses) - 1)


def _terms_in(intent: QuestionIntent, text: str) -> frozenset[str]:
    return matched(intent.weights, frozenset(content_stems(text)))


def contrasted(intent: QuestionIntent, statement: str, span: str, kind: str | None) -> bool:
    """The lead holds another value of the asked kind (any other clause, for a question of no value kind) in another
    clause, and a question term stands only in a clause other than the span's: the span may be the other subject's
    value ("28 pounds" for the child's ticket, the network's name for the Wi-Fi password)."""
    at = statement.find(span)
    if at < 0:
        return False
    clauses = _clauses(statement)
    own = _clause_of(clauses, at)
    values = _values(kind, statement) if kind is not None else clauses
    others = {_clause_of(clauses, a) for a, _ in values} - {own}
    if not others:
        return False
    in_own = _terms_in(intent, statement[clauses[own][0] : clauses[own][1]])
    elsewhere = _terms_in(intent, " ".join(statement[a:b] for i, (a, b) in enumerate(clauses) if i != own))
    return bool(elsewhere - in_own)


def _counted_noun(intent: QuestionIntent) -> str | None:
    """ "How many keepers' logbooks does ...": the stem of the counted noun ("logbook")."""
    match = _HOW_MANY_RE.search(intent.text)
    if match is None:
        return None
    stems = content_stems(match.group(2))
    return stems[-1] if stems else None


def _counts_other_noun(intent: QuestionIntent, statement: str, span: str) -> bool:
    """A count the sentence puts right before the counted noun ("212 logbooks") exists and the span is not it."""
    noun = _counted_noun(intent)
    if noun is None:
        return False
    words = re.findall(r"[£$€]?\d[\d,.]*|[\w'’-]+", statement)
    counted = [
        word
        for i, word in enumerate(words)
        if NUMBER_RE.fullmatch(word) or word[:1].isdigit()
        if any(matched([noun], frozenset(content_stems(w))) for w in words[i + 1 : i + 3])
    ]
    return bool(counted) and not any(c in span for c in counted)


_CORRECTION_RE = re.compile(
    r"\b(?:correct(?:ed|ion|s)|recount(?:ed)?|revised|actually|in fact|instead|replac(?:ed|es|ing)|in place of|"
    r"originally|was to have|had been (?:due|planned|expected)|no longer|cancell?ed|postponed|rather than|erratum|"
    r"mistaken(?:ly)?|wrongly|misprint(?:ed)?|typo)\b",
    re.IGNORECASE,
)


def corrected(lead: Candidate, after: str) -> bool:
    """The lead, or the sentence after it in its page, corrects or replaces a value ("212 logbooks ... A recount
    found 214", "Dr Pask will give the talk, replacing Dr Marsh"): which value stands is a reading the span
    cannot make, so the lead is quoted and no short answer is given."""
    return _CORRECTION_RE.search(lead.statement) is not None or _CORRECTION_RE.search(after) is not None


_LOCATIVE_BEFORE_RE = re.compile(r"\b(?:in|at|near|outside|inside|around|towards|via)\s+(?:the\s+)?$", re.IGNORECASE)


def _in_clock_time(statement: str, span: str) -> bool:
    """The span is (part of) a clock time in the sentence ("9" of "from 9:30 to 11:00"): a time, not a count."""
    at = statement.find(span)
    return at >= 0 and any(m.start() <= at < m.end() for m in re.finditer(r"\b\d{1,2}[:.]\d{2}\b", statement))


def span_answers(intent: QuestionIntent, lead: Candidate, span: str) -> bool:
    """The short answer fits the question: of the asked kind, from a lead stating every question term, not the
    value of another subject the lead contrasts, and for "how many" the count of the asked noun."""
    if intent.answer_type in ("definition", "reason", "howto"):
        return False  # what a thing is and why: a sentence, not a span
    if unstated_terms(intent, lead, before=False):  # the sentence before may be about another thing
        return False
    own = lead.stems | stem_set(lead.title)  # a name the question gives is the lead's own, or its page's
    if matched(intent.name_stems, own) != intent.name_stems:
        return False
    kind = _value_kind(intent)
    if kind is None:
        return not contrasted(intent, lead.statement, span, None)
    if not _is_kind(kind, span):
        return False
    if intent.answer_type == "person" and _LOCATIVE_BEFORE_RE.search(
        lead.statement[: max(lead.statement.find(span), 0)]
    ):
        return False  # "... held at Tollbridge": a place, not who
    if kind == "count" and (_counts_other_noun(intent, lead.statement, span) or _in_clock_time(lead.statement, span)):
        return False
    return not contrasted(intent, lead.statement, span, kind)


# --- names the sources do not mention ---------------------------------------------------------------------

_NOT_NAMES = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday january february march april may june july august "
    "september october november december".split()
)


def names_no_source_mentions(intent: QuestionIntent, docs: Sequence[SourceDoc]) -> list[str]:
    """The names the question gives ("Dr Felix Arkwell", "PyPI") of which some word is in no source: the sources
    are about something else, and the answer says so rather than answer from a near miss. Not for a how-to
    question, whose names are often the values it works on ("New York local time", "a .tar.gz archive"); an
    acronym is mentioned by a title or name it abbreviates ("TRA", Tolt River Authority); a nationality before a noun
    ("Which Norwegian sculptor ...") describes, it does not name what is asked about."""
    if intent.answer_type == "howto":
        return []
    said = frozenset().union(*(stem_set(d.title) for d in docs), *(c.stems for d in docs for c in d.candidates))
    initials = _initials(docs) if any(w.isupper() for n in intent.names for w in n.split()) else frozenset()
    missing = []
    for name in intent.names:
        if " " not in name and re.search(rf"\b{re.escape(name)}\s+[a-z]", intent.text):
            continue  # a word before a noun describes it ("Filipino students", "Norwegian sculptor")
        unsaid = [
            word
            for word in re.findall(r"[\w'’.-]+", name)
            if (stems := _name_stems(word, intent))
            and matched(stems, said) != stems
            and not (word.isupper() and (len(word) <= 2 or word.casefold() in initials))  # "NYC", "CA"
        ]
        if unsaid:
            missing.append(name)
    return missing


def _name_stems(word: str, intent: QuestionIntent) -> frozenset[str]:
    return frozenset(k for k in stem_set(word) if k in intent.name_stems and not k.isdigit()) - _NOT_NAMES


_CAPITALISED_RUN_RE = re.compile(r"(?:\b[A-Z][\w'’-]*(?:\s+(?:of|the|and|for|&)\s+|\s+)?){2,}")


def _initials(docs: Sequence[SourceDoc]) -> frozenset[str]:
    """The initials of the sources' titles and capitalised runs of words ("Tolt River Authority": "tra")."""
    texts = [d.title for d in docs] + [c.statement for d in docs for c in d.candidates]
    out: set[str] = set()
    for text in texts:
        for run in _CAPITALISED_RUN_RE.finditer(text):
            letters = [w[0] for w in run.group(0).split() if w[:1].isupper()]
            out.update(  # every run of two words or more within it ("New York City" of "WJZ of New York City")
                "".join(letters[a:b]).casefold() for a in range(len(letters)) for b in range(a + 2, len(letters) + 1)
            )
    return frozenset(out)


def title_stems(docs: Sequence[SourceDoc]) -> frozenset[str]:
    """The words of the sources' titles (the folder's subject: "hotel", the library's name)."""
    return frozenset().union(*(stem_set(d.title) for d in docs))


# --- yes/no from one deciding sentence ------------------------------------------------------------------

_EXCLUSIVE_RE = re.compile(r"\b(?:only|exclusively|solely|just)\b", re.IGNORECASE)
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY_RANGE_RE = re.compile(
    r"\b(" + "|".join(_DAYS) + r")s?\s*(?:to|-|–|until|through|thru)\s*(" + "|".join(_DAYS) + r")s?\b",
    re.IGNORECASE,
)


def _days_named(text: str) -> set[str]:
    """The weekdays a text names, a range ("Wednesday to Sunday") read as every day in it."""
    lowered = text.casefold()
    days: set[str] = set()
    for match in _DAY_RANGE_RE.finditer(lowered):
        a, b = _DAYS.index(match.group(1)), _DAYS.index(match.group(2))
        days.update(_DAYS[(a + k) % 7] for k in range(((b - a) % 7) + 1))
    days.update(d for d in _DAYS if re.search(rf"\b{d}s?\b", lowered))
    return days


def _excluded(asked: Iterable[str], statement: str) -> bool:
    """The sentence names weekdays and the asked one is not among them ("Wednesday to Sunday" for a Monday)."""
    wanted = {d for d in _DAYS if d in asked}
    named = _days_named(statement)
    return bool(wanted) and bool(named) and not wanted & named


# Words a yes/no question may use that its deciding sentence need not repeat: light verbs and adverbs ("Can I
# still ...", "Will I be able to ...", "Can I take ..."), stems.
LIGHT_WORDS: frozenset[str] = frozenset(
    stem(w)
    for w in """
    take put get go goes going make able still already ever allowed allow need use come give correct right really visit
    also again someone anyone something anything anybody somebody one way
    """.split()
)
# A sentence that says the opposite of the question's verb ("keeps everything ... and loses it when the process
# exits" for "Does it keep entries after the process exits?"): each word's stem and its opposites' stems.
_OPPOSITES: dict[str, frozenset[str]] = {
    stem(a): frozenset(stem(b) for b in bs.split())
    for a, bs in {
        "keep": "lose loses lost deleted discarded",
        "open": "closed shut",
        "allowed": "banned forbidden prohibited",
        "free": "charge charged costs",
        "included": "extra excluded",
        "accept": "refuse refused",
    }.items()
}


# The reader's probability from which a yes/no question's deciding sentence may leave light words, the sources' title
# words and one more of the question's terms unsaid (a paraphrase: "bike" for "bicycles"). Chosen on the owndocs fit
# folders (30 yes/no questions): every term stated, 13 right and none wrong; from 0.5 with one term unsaid 16 and none;
# from 0.3, 17 and none; from 0.3 with two unsaid, 18 and one wrong.
SURE_READING = 0.3
UNSAID_WHEN_SURE = 1


def decided_verdict(
    intent: QuestionIntent, deciding: Candidate, titles: frozenset[str], reading: float | None
) -> str | None:
    """ "Yes" / "No" when the deciding sentence states the question's terms (with its context; when the reader's
    probability `reading` is at least `SURE_READING`, light words, the sources' title words and one more term may be
    unsaid), "No" too when it names an exclusive alternative to the few terms it lacks or says the opposite of the
    question's verb; None when it does not state what is asked (the files do not say). `reading` None: no reader
    (every term must be stated)."""
    question_words = {w.casefold() for w in re.findall(r"[A-Za-z]+", intent.text)}
    if _excluded(question_words, deciding.statement):
        return "No"
    sure = reading is not None and reading >= SURE_READING
    missing = unstated_terms(intent, deciding) - {stem(d) for d in _days_named(deciding.statement)}  # in a range
    lacking = missing - LIGHT_WORDS - titles if sure else missing
    if lacking:
        few = len(lacking) <= 2 and 2 * len(lacking) <= len(intent.weights)
        if sure and few and _EXCLUSIVE_RE.search(deciding.statement) and not is_negated(deciding.statement):
            return "No"  # "The engines burn diesel only" for "Do they run on oil?"
        asked = frozenset(intent.weights) - LIGHT_WORDS - titles  # what the question asks of its subject
        if not (sure and len(lacking) <= UNSAID_WHEN_SURE and 2 * len(lacking) < len(asked)):
            return None
    said = polarity_verdict(intent.text, deciding.statement)
    if _says_opposite(intent, deciding):
        return "No" if said == "Yes" else "Yes"
    return said


def _says_opposite(intent: QuestionIntent, deciding: Candidate) -> bool:
    """The sentence holds an opposite of one of the question's words (and is not already negated)."""
    if is_negated(deciding.statement):
        return False
    return any(_OPPOSITES.get(term, frozenset()) & deciding.stems for term in intent.stems)
