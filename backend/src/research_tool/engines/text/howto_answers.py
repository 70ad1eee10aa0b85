"""How-to answers: the call signature of the API page that best covers the question leads, then sentences that
state what it leaves unsaid; the short answer is the API call. Also the API-name matching the source ranking
uses (`api_title_match`): an identifier's dotted and camel-case parts spell question terms.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from research_tool.engines.text.candidates import Candidate, SourceDoc
from research_tool.engines.text.howto_queries import actions
from research_tool.engines.text.question_intent import QuestionIntent, classify_question, coverage, idf_weights
from research_tool.engines.text.ranker import matched
from research_tool.engines.text.tokens import stem, stem_set

MIN_IDENTIFIER_PART = 3  # "csv", "log", "dict": shorter parts ("re", "os") match nothing on their own
API_TITLE_MIN_MATCH = 0.5  # an API page without facts is admitted when its name covers this much of the question
ACTION_NAME_BONUS = 0.3  # how-to: an API whose own name (its last part) is the action the question asks for
CODE_BONUS = 0.25  # how-to: a sentence with a code-like span
ANSWERED_MIN_COVERAGE = 0.5  # how-to: the chosen sentences cover this much of the question
# how-to: the API call is given as the short answer only when its own page (its name and every sentence) states every
# term of the question, as a factoid's short answer needs a lead stating every term; otherwise the answer still leads
# with the call but states no short answer. On the fit how-to questions no page below 0.75 was the right API (19
# wrong calls were given at 0.3-0.7); held out, 5 of the 7 calls given at 0.75 were wrong; at 1.0 the fit part keeps 2
# calls, both right.
SHORT_ANSWER_MIN_PAGE = 1.0
_API_NAME_RE = re.compile(r"^\s*([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+|[A-Za-z_]\w*\()")
CODE_SPAN_RE = re.compile(
    r"`[^`\n]+`|\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b|\b\w+\(|\b[a-z_]+=|\b[A-Z][a-z]+(?:[A-Z][a-z0-9]+)+\b"
)


@dataclass(frozen=True)
class HowtoAnswer:
    """A how-to answer, which `select_answer` turns into its `AnswerSelection`."""

    sentences: list[Candidate]  # in answer order; when not answered, the closest
    api: str | None  # the API call, the short answer
    answered: bool


def identifier_matched(terms: Iterable[str], identifier: str) -> frozenset[str]:
    """The question terms an API name spells out: its dotted and camel-case parts match a term they
    abbreviate or contain ("dict" ~ "dictionary", "reader" ~ "read", "fromisoformat" ~ "iso"), besides the
    usual stem match."""
    parts = stem_set(identifier)
    pieces = {p for p in parts if len(p) >= MIN_IDENTIFIER_PART and "." not in p}
    terms = list(terms)
    out = set(matched(terms, parts))
    for term in terms:
        if len(term) >= MIN_IDENTIFIER_PART and any(term.startswith(p) or term in p for p in pieces):
            out.add(term)
    return frozenset(out)


def api_name(title: str) -> str | None:
    """The code identifier a page's title names ("csv.DictReader — ..." -> "csv.DictReader"), if any."""
    match = _API_NAME_RE.match(title)
    return match.group(1).rstrip("(") if match else None


@lru_cache(maxsize=64)
def _cached_intent(question: str) -> QuestionIntent:
    return classify_question(question)


def api_title_match(question: str, title: str) -> float:
    """For a how-to question: the weighted share of the question's terms that an API page's name spells
    out (0 for any other question, or a title that names no API)."""
    name = api_name(title)
    if name is None:
        return 0.0
    intent = _cached_intent(question)
    if intent.answer_type != "howto" or name is None or not intent.weights:
        return 0.0
    found = identifier_matched(intent.weights, name)
    return sum(intent.weights[k] for k in found) / sum(intent.weights.values())


def action_name_bonus(intent: QuestionIntent, name: str, said: frozenset[str]) -> float:
    """How-to: a bonus for an API named for the question's action ("split a command string" -> `shlex.split`,
    "write rows to a CSV file" -> `csv.writer`), judged on the name's last part, the function itself, when
    its page (`said`: its name's and sentences' stems) also names something the action is done to."""
    verbs = {stem(v) for v in actions(intent.text)}
    last = name.rsplit(".", 1)[-1]
    if not verbs or not identifier_matched(verbs, last) or not _names_the_act(verbs, last):
        return 0.0
    objects = [k for k in intent.weights if k not in verbs]
    return ACTION_NAME_BONUS if matched(objects, said) or identifier_matched(objects, name) else 0.0


def _names_the_act(verbs: Iterable[str], last: str) -> bool:
    """A part of the name opens with the action ("cancel", "split", "writer"), and is no state or progress
    of it: `cancelled()` and `cancelling()` ask about the act, `uncancel()` undoes it."""
    pieces = [p for p in re.split(r"_|(?<=[a-z])(?=[A-Z])", last) if p]
    return any(
        piece.casefold().startswith(v) and not piece.casefold().endswith(("ed", "ing"))
        for v in verbs
        for piece in pieces
    )


def howto_answer(
    intent: QuestionIntent, docs: Sequence[SourceDoc], pool: list[Candidate], max_sentences: int, floor: float
) -> HowtoAnswer:
    """Lead with the call signature of the page that best covers the question, then sentences that state the
    rest of it (after the lead, only from the leading page or with a ranker share of at least `floor`);
    answered when the chosen sentences (and the API's name) state enough of the question."""
    weights = idf_weights(intent, pool)
    lead_doc = _lead_page(intent, docs, weights)
    chosen = [lead_doc.signature] if lead_doc is not None and lead_doc.signature is not None else []
    # the question terms the leading API's name spells out ("logkit.log_message": log, message)
    named = _said_by_name(intent, chosen[0], lead_doc) if chosen else frozenset()
    chosen += _explaining_sentences(intent, pool, weights, chosen, named, lead_doc, max_sentences, floor)
    if len(chosen) == 1 and chosen[0].signature and lead_doc is not None:
        # its name said it all: the page's own best sentence explains the call
        own = max((c for c in pool if c.n == lead_doc.n and not c.signature), key=lambda c: c.score, default=None)
        chosen += [own] if own is not None else []
    if not chosen:
        return HowtoAnswer([], None, False)
    if not _states_the_question(intent, chosen, named):
        return HowtoAnswer(chosen[:2], None, False)
    sure = lead_doc is not None and page_states(lead_doc, weights) >= SHORT_ANSWER_MIN_PAGE - 1e-9
    return HowtoAnswer(chosen, _api_name(chosen[0], lead_doc, intent) if sure else None, True)


def page_states(doc: SourceDoc, weights: dict[str, float]) -> float:
    """The weighted share of the question's terms an API page states: its name's parts and all its sentences."""
    said = frozenset().union(*(c.stems for c in doc.candidates))
    name = api_name(doc.title)
    found = matched(weights, said | stem_set(doc.title)) | (identifier_matched(weights, name) if name else frozenset())
    return sum(weights[k] for k in found) / max(1e-9, sum(weights.values()))


def _lead_page(intent: QuestionIntent, docs: Sequence[SourceDoc], weights: dict[str, float]) -> SourceDoc | None:
    """The page whose call signature leads: of the pages with one, the best by `_page_score`."""
    with_signature = [d for d in docs if d.signature is not None]
    return max(with_signature, key=lambda d: _page_score(intent, d, weights), default=None)


def _page_score(intent: QuestionIntent, doc: SourceDoc, weights: dict[str, float]) -> float:
    """How well a page answers a how-to question: its best sentence's coverage, or the share of the question
    its API name (and signature's parameters) spell out, plus the action-name bonus."""
    best = max((c.coverage for c in doc.candidates), default=0.0)
    name = api_name(doc.title)
    if name is None:
        title = coverage(
            stem_set(doc.title) | (doc.signature.stems if doc.signature else frozenset()), frozenset(), weights
        )
        return best + title
    # an API page answers through its name or through its prose (its title's summary is prose too):
    # a page holding only a signature and a member list, whose name spells the question out, competes
    # with one that explains more but whose name says less
    named = identifier_matched(weights, name)
    if doc.signature is not None:  # its parameters name what it does too ("default_factory")
        named |= matched(weights, doc.signature.stems)
    title = sum(weights[k] for k in named) / max(1e-9, sum(weights.values()))
    said = frozenset().union(*(c.stems for c in doc.candidates))
    return max(best, title) + action_name_bonus(intent, name, said)


def _explaining_sentences(
    intent: QuestionIntent,
    pool: list[Candidate],
    weights: dict[str, float],
    chosen: list[Candidate],
    named: frozenset[str],
    lead_doc: SourceDoc | None,
    max_sentences: int,
    floor: float,
) -> list[Candidate]:
    """Sentences that state what the answer so far does not, one at a time: the best by its coverage of the
    question's terms not yet stated and a code span. Once the answer has its lead, a sentence from another
    page than the leading API's must have a ranker share of at least `floor` (the body's relevance floor:
    "takewhile ... as long as" is no answer to "how long a function takes")."""
    # stated by prose sentences (a signature names parameters; it explains nothing), and by the leading API's
    # own name: the next sentence need not say again what the name says (`log_message` for "log messages")
    covered: set[str] = set(named)
    added: list[Candidate] = []
    terms = frozenset(intent.weights)
    while len(chosen) + len(added) < max_sentences:
        missing = terms - matched(terms, frozenset(covered))
        if not missing:
            break
        missing_weights = {k: weights.get(k, 1.0) for k in missing}
        led = bool(chosen or added)
        best = max(
            (
                c
                for c in pool
                if c not in chosen
                and c not in added
                and (not led or c.share >= floor or (lead_doc is not None and c.n == lead_doc.n))
            ),
            key=lambda c: coverage(c.stems, c.context, missing_weights) + (CODE_BONUS if c.filler else 0.0),
            default=None,
        )
        if best is None or coverage(best.stems, best.context, missing_weights) <= 0:
            break  # nothing more in the sources for what is missing
        added.append(best)
        covered |= best.stems
    return added


def _states_the_question(intent: QuestionIntent, chosen: Sequence[Candidate], named: frozenset[str]) -> bool:
    """The chosen sentences, their pages' titles and the API names (`named`: what the leading page's name
    spells out) state at least `ANSWERED_MIN_COVERAGE` of the question's weighted terms."""
    covered: set[str] = set(named)
    for c in chosen:
        covered |= c.stems | c.context  # a page's title (the API's name) is part of what it says
    found = matched(intent.weights, frozenset(covered))
    for c in chosen:
        name = api_name(c.statement) if c.signature else None
        found |= identifier_matched(intent.weights, name) if name else frozenset()
    share = sum(intent.weights[k] for k in found) / max(1e-9, sum(intent.weights.values()))
    return share >= ANSWERED_MIN_COVERAGE


def _said_by_name(intent: QuestionIntent, lead: Candidate, doc: SourceDoc | None) -> frozenset[str]:
    """The question terms the leading API's name spells ("logkit.log_message" -> log, message)."""
    name = api_name(doc.title) if lead.signature and doc is not None else None
    return identifier_matched(intent.weights, name) if name else frozenset()


def _api_name(lead: Candidate, doc: SourceDoc | None, intent: QuestionIntent | None = None) -> str | None:
    """The API call: a signature shortened to its name (a module page's function named with its module:
    "urllib.request.urlopen") and the parameters the question asks about."""
    if lead.signature:
        name, _, params = lead.statement.partition("(")
        module = api_name(doc.title) if doc is not None else None
        if module is not None and "." not in name and not name.startswith("class "):
            name = f"{module}.{name.strip()}"
        asked = [
            p.split("=")[0].strip(" *")
            for p in params.rstrip(")").split(",")
            if intent is not None and stem_set(p.split("=")[0].replace("_", " ")) & intent.stems
        ]
        return f"{name.removeprefix('class ').strip()}({', '.join(f'{a}=...' for a in asked[:2]) or '...'})"
    spans = [m.group(0).strip("`(") for m in CODE_SPAN_RE.finditer(lead.statement)]
    return spans[0] if spans else (doc.title if doc else None)
