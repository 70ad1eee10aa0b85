"""Entity heuristics: names, titles, dates, quantities and code identifiers found in plain text.

No model: capitalized multi-word names (with "of", "de", "von"... inside), quoted titles, dates,
numbers with units, and code identifiers (`subprocess.run`, `CompletedProcess`, `check_output()`).
Types come from cue words (organization and place suffixes, honorifics, first names, the sentence
that defines a document's subject: "X was an American actress" makes X a person).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from research_tool.engines.text.tokens import is_stopword, stem
from research_tool.models.entities import Entity, EntityType, normalize_key

_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
)
_DATE_RE = re.compile(
    rf"\b(?:(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}"
    rf"|\d{{1,2}}\s+(?:{_MONTHS})\.?,?\s+\d{{4}}"
    rf"|(?:{_MONTHS})\.?\s+\d{{4}}"
    r"|\d{4}-\d{2}-\d{2}"
    r"|(?:1[0-9]|20)\d0s"
    r"|(?<![\d.,$€£])(?:1[0-9]|20)\d{2}(?![\d.,]\d|\s*(?:%|km|kg|mb|gb|m\b)))\b"
)
_UNITS = (
    r"%|percent|per cent|km|kilometres|kilometers|miles?|m|cm|mm|kg|g|mg|lbs?|pounds|tons?|tonnes|"
    r"hours?|minutes?|seconds?|ms|days?|weeks?|months?|years?|decades?|centuries|"
    r"bytes?|kb|mb|gb|tb|kib|mib|gib|hz|khz|mhz|ghz|°c|°f|degrees|people|inhabitants|residents|"
    r"employees|members|students|copies|episodes|seasons|games|goals|votes|users|times|"
    r"million|billion|trillion|thousand|hundred|dollars|euros|usd|eur"
)
_NUMBER_RE = re.compile(
    rf"(?:[$€£¥]\s?\d[\d,]*(?:\.\d+)?(?:\s+(?:million|billion|trillion|thousand))?"
    rf"|\b\d[\d,]*(?:\.\d+)?\s*(?:{_UNITS})\b"
    rf"|\b\d[\d,]*(?:\.\d+)?-(?:year|day|hour|minute|mile|storey|story|seat)\b)",
    re.IGNORECASE,
)
_CODE_RE = re.compile(
    r"`([^`\s][^`\n]{0,58}[^`\s])`"  # a code span: no space inside its quotes ("``a`` is, the ``b``")
    r"|\b([A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+)(?:\(\))?"
    r"|\b([a-z_]\w*\(\))"
    r"|\b([a-z]+_[a-z_0-9]+)\b"
    r"|\b([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+)\b"
)
_LOWER_WORD_RE = re.compile(r"\b[a-z][a-z]+\b")
_MID_SENTENCE_CAPITAL_RE = re.compile(r"(?<=[a-z0-9,;] )[A-Z][a-z]+\b")
PERIOD_RE = re.compile(r"\b\d{1,2}(?:st|nd|rd|th)[ -]century\b|\b(?:1\d|20)\d0s\b", re.IGNORECASE)
"""A time the date finder leaves out: "the 19th century", "the 1960s"."""
_QUOTED_RE = re.compile(r"[\"“]([A-Z0-9][^\"“”\n]{1,80}?)[\"”]")
_CAP_WORD = r"(?:(?:Mr|Mrs|Ms|Dr|St|Mt|Jr|Sr|Ft)\.|[A-Z]\.(?=\s?[A-Z])|[A-Z][\w'’\-]*)"
_CONNECTOR = r"(?:of|the|de|da|di|del|della|von|van|der|den|la|le|du|y|and|for|on|in|&)"
_NAME_RE = re.compile(rf"\b{_CAP_WORD}(?:\s+(?:{_CONNECTOR}\s+)*{_CAP_WORD})*")

_ORG_CUES = frozenset(
    """
    inc inc. corp corp. corporation company co. ltd ltd. llc plc university college institute school academy
    association party records airlines airline foundation agency bank group club society council committee
    department ministry press studios studio entertainment network league federation union army navy force brigade
    court parliament congress senate church orchestra band team fc publishers publishing magazine newspaper museum
    hospital laboratory laboratories labs systems technologies software
    """.split()
)
_PLACE_CUES = frozenset(
    """
    city county river island islands lake mountain mountains mount street avenue road state province district valley
    village town bay sea ocean airport station park kingdom republic region peninsula desert forest canyon square
    bridge harbor harbour coast beach hawaii ohio carolina texas california
    """.split()
)
_WORK_CUES = frozenset(
    """
    film movie song album novel book series show play opera symphony sonata game
    """.split()
)
_HONORIFICS = frozenset(
    """
    mr mrs ms dr prof sir dame lord lady king queen prince princess president senator governor general saint st pope
    bishop rev judge captain colonel
    """.split()
)
_PERSON_NOUNS = frozenset(
    """
    actor actress singer songwriter musician composer writer author novelist poet playwright director producer
    politician diplomat lawyer judge scientist physicist chemist biologist mathematician philosopher historian
    painter artist architect engineer inventor businessman businesswoman entrepreneur footballer player athlete
    boxer wrestler coach manager journalist rapper comedian dancer model priest bishop king queen emperor general
    officer soldier pilot astronaut economist psychologist physician surgeon professor teacher designer photographer
    born
    """.split()
)
_PLACE_NOUNS = frozenset(
    """
    city town village municipality county state country province region district island river lake mountain capital
    suburb neighborhood neighbourhood community borough airport park area
    """.split()
)
_ORG_NOUNS = frozenset(
    """
    company corporation organization organisation band group label publisher university college school party agency
    firm brand manufacturer airline team club network newspaper magazine studio
    """.split()
)
_WORK_NOUNS = frozenset(
    """
    film movie song single album novel book series sitcom show episode play musical opera game documentary magazine
    poem painting sonata symphony comic manga anime franchise
    """.split()
)
FIRST_NAMES = frozenset(
    """
    james john robert michael william david richard joseph thomas charles christopher daniel matthew anthony mark
    donald steven paul andrew joshua kenneth kevin brian george timothy ronald edward jason jeffrey ryan jacob gary
    nicholas eric jonathan stephen larry justin scott brandon benjamin samuel gregory alexander frank patrick
    raymond jack dennis jerry tyler aaron jose adam nathan henry douglas zachary peter kyle walter ethan jeremy
    harold keith christian roger noah gerald carl terry sean austin arthur lawrence jesse dylan bryan joe jordan
    billy bruce albert willie gabriel logan alan juan wayne roy ralph randy eugene vincent russell elijah louis
    bobby philip johnny mary patricia jennifer linda elizabeth barbara susan jessica sarah karen nancy lisa betty
    margaret sandra ashley kimberly emily donna michelle dorothy carol amanda melissa deborah stephanie rebecca
    sharon laura cynthia kathleen amy shirley angela helen anna brenda pamela nicole emma samantha katherine
    christine debra rachel catherine carolyn janet ruth maria heather diane virginia julie joyce victoria olivia
    kelly christina lauren joan evelyn judith megan cheryl andrea hannah martha jacqueline frances gloria ann teresa
    kathryn sara janice jean alice madison doris abigail julia judy grace denise amber marilyn beverly danielle
    theresa sophia marie diana brittany natalie isabella charlotte rose alexis kayla grace georg carl johann ludwig
    wolfgang franz friedrich karl hans pierre jean jacques louis marie giuseppe giovanni antonio carlos luis
    """.split()
)
_LEADING_DROP = frozenset(
    """
    the a an this that these those in on at by for from with as to of and but are is was were do does did who what
    which when where why how can could should would will has have had if after before during
    """.split()
)
_COMMON_SENTENCE_STARTERS = frozenset(
    """
    the a an this that these those it its he she they we you i his her their our in on at by for from with as to of
    and but or if when while after before during since although however also there here some many most all each both
    one two three first second then thus so yet not no what which who how where why return returns raise raises see
    use note new
    """.split()
)


@dataclass(frozen=True)
class Mention:
    text: str
    entity_type: EntityType
    start: int
    end: int


def find_mentions(text: str) -> list[Mention]:
    """Entity mentions in `text`, in order of appearance, overlapping spans resolved (longest wins)."""
    return list(_find_mentions(text))


@lru_cache(maxsize=8192)
def _find_mentions(text: str) -> tuple[Mention, ...]:
    found: list[Mention] = []
    for m in _DATE_RE.finditer(text):
        found.append(Mention(m.group(0), "date", m.start(), m.end()))
    for m in _NUMBER_RE.finditer(text):
        found.append(Mention(m.group(0).strip(), "number", m.start(), m.end()))
    for m in _QUOTED_RE.finditer(text):
        if 1 <= len(m.group(1).split()) <= 10:
            found.append(Mention(m.group(1).strip(), "work", m.start(1), m.end(1)))
    for m in _CODE_RE.finditer(text):
        group = next(i for i in range(1, 6) if m.group(i))
        value = m.group(group)
        if group == 2 and (re.fullmatch(r"(?:[A-Z]\.)+[A-Z]?", value + ".") or value.count(".") > 4):
            continue  # "U.S" is an abbreviation, not code
        found.append(Mention(value, "concept", m.start(group), m.end(group)))
    for m in _NAME_RE.finditer(text):
        for part_start, part in _split_conjoined(m.start(), m.group(0)):
            mention = _name_mention(text, part_start, part)
            if mention:
                found.append(mention)
    return tuple(_resolve_overlaps(found))


def _split_conjoined(start: int, raw: str) -> list[tuple[int, str]]:
    """ "<First> <Last> and <First> <Last>" is two names; "<Word> and <Word>" (one word each side) is one title."""
    pieces = re.split(r"(\s+(?:and|&)\s+)", raw)
    if len(pieces) == 1:
        return [(start, raw)]
    names = pieces[0::2]
    if not any(len(n.split()) >= 2 for n in names):
        return [(start, raw)]
    out: list[tuple[int, str]] = []
    offset = start
    for index, piece in enumerate(pieces):
        if index % 2 == 0:
            out.append((offset, piece))
        offset += len(piece)
    return out


def _name_mention(text: str, start: int, raw: str) -> Mention | None:
    tokens = raw.split()
    # drop leading words that are ordinary sentence starters ("The", "In") and trailing connectors
    while tokens and tokens[0].casefold().rstrip(".") in _LEADING_DROP:
        start += text[start:].index(tokens[0]) + len(tokens[0])
        start += len(text[start:]) - len(text[start:].lstrip())
        tokens = tokens[1:]
    while tokens and (re.fullmatch(_CONNECTOR, tokens[-1]) or tokens[-1].isdigit()):
        tokens = tokens[:-1]
    if not tokens:
        return None
    name = " ".join(tokens).rstrip(".,")
    if name.endswith(("'s", "’s")):
        name = name[:-2]
    if len(name) < 2 or name.isdigit():
        return None
    at_sentence_start = start == 0 or bool(
        re.search(r"(?:[.!?:]\s+|\n\s*|[\"“(]\s*)$", text[max(0, start - 4) : start])
    )
    if len(tokens) == 1 and at_sentence_start and tokens[0].casefold() in _COMMON_SENTENCE_STARTERS:
        return None
    if len(tokens) == 1 and tokens[0].casefold() in _COMMON_SENTENCE_STARTERS:
        return None
    end = start + len(name)
    return Mention(name, classify_name(name, text[max(0, start - 40) : end + 60]), start, end)


def classify_name(name: str, context: str = "") -> EntityType:
    """Type of a capitalized name from its own words and a little context around it."""
    lowered = [t.casefold().strip(".,") for t in name.split()]
    if any(t in _ORG_CUES for t in lowered):
        return "organization"
    if any(t in _PLACE_CUES for t in lowered):
        return "place"
    context_lower = context.casefold()
    before = context_lower[: max(0, context_lower.find(name.casefold()))] if name.casefold() in context_lower else ""
    if re.search(r"\b(?:" + "|".join(_HONORIFICS) + r")\.?\s*$", before):
        return "person"
    if lowered[0] in FIRST_NAMES and 2 <= len(lowered) <= 4:
        return "person"
    if re.search(r"\b(?:in|at|near|from|of)\s+$", before) and len(lowered) <= 3 and "," in context[:120]:
        return "place"
    return "other"


def classify_by_definition(name: str, defining_sentence: str) -> EntityType:
    """Type of a document's subject from the sentence that defines it ("X is a 1945 film", "X was a singer")."""
    match = re.search(
        r"\b(?:is|was|are|were)\s+(?:an?|the|one of the)\s+((?:[\w'’-]+[\s,]*){1,8})",
        defining_sentence,
    )
    nouns: list[str] = []
    if match:
        nouns = [w.casefold().strip(",") for w in match.group(1).split()]
    for noun in nouns:
        if noun in _PERSON_NOUNS:
            return "person"
        if noun in _WORK_NOUNS:
            return "work"
        if noun in _ORG_NOUNS:
            return "organization"
        if noun in _PLACE_NOUNS:
            return "place"
    if re.search(r"\(\s*(?:born|b\.)\s", defining_sentence) or re.search(
        r"\(\s*\w+\s+\d{1,2},\s+\d{4}\s+[–-]", defining_sentence
    ):
        return "person"
    return classify_name(name, defining_sentence)


def _resolve_overlaps(mentions: list[Mention]) -> list[Mention]:
    priority = {"date": 0, "number": 1, "work": 2, "concept": 3}
    ordered = sorted(mentions, key=lambda m: (-(m.end - m.start), priority.get(m.entity_type, 4), m.start))
    kept: list[Mention] = []
    for mention in ordered:
        if all(mention.end <= k.start or mention.start >= k.end for k in kept):
            kept.append(mention)
    return sorted(kept, key=lambda m: m.start)


def clean_title(title: str) -> str:
    """A document title without its disambiguation suffix: "<Title> (1945 film)" -> "<Title>"."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", title).strip() or title.strip()


_LITERALS = frozenset(["true", "false", "none", "null", "nan", "yes", "no", "ok"])
_CODE_LITERALS = frozenset(["true", "false", "none", "null", "nan"])
_FUNCTION_WORDS = frozenset(["like", "unlike", "via", "per", "despite", "unless", "whether", "otherwise"])
_ABBREVIATION_RE = re.compile(r"^(?:[a-z]\.)+[a-z]?\.?$|^(?:etc|viz|vs|cf|ibid)\.?$", re.IGNORECASE)


def is_entity_name(text: str) -> bool:
    """A mention worth listing as an entity: not a stopword ("Like"), a literal ("True", "None") or a phrase
    holding a code literal ("Return True"), a Latin abbreviation ("e.g", "i.e") or a fragment opening with
    punctuation ("(a")."""
    stripped = text.strip()
    if len(stripped) < 2 or not stripped[0].isalnum():
        return False
    key = stripped.casefold()
    if key in _LITERALS or (_ABBREVIATION_RE.match(stripped) and not stripped.isupper()):
        return False
    words = key.split()
    if len(words) == 1 and (key in _FUNCTION_WORDS or key in _COMMON_SENTENCE_STARTERS):
        return False
    if _CODE_LITERALS & set(words):
        return False  # "Return True", "Defaults to None": a docstring's phrase about a value, not a name
    return not all(is_stopword(w) for w in words)


def sentence_case_words(texts: Iterable[str]) -> frozenset[str]:
    """The stems of words these texts write in lower case and capitalise only where a sentence opens ("Called when ...",
    "Execute the file", "Optional arguments"): common words, where a name ("in Python") is capitalised
    mid-sentence too."""
    lower: set[str] = set()
    named: set[str] = set()
    for text in texts:
        lower.update(stem(w) for w in _LOWER_WORD_RE.findall(text))
        named.update(stem(w.casefold()) for w in _MID_SENTENCE_CAPITAL_RE.findall(text))
    return frozenset(lower - named)


def is_sentence_case_word(name: str, common: frozenset[str]) -> bool:
    """One capitalised word whose stem is one of `common` (see `sentence_case_words`): no entity to list."""
    return " " not in name and name[:1].isupper() and name[1:].islower() and stem(name.casefold()) in common


# Countries and the cities a text names without a cue ("trains to Frankfurt"): typed as places in the entity list
# (issue 34). Multi-word names are written with "_" for their spaces.
KNOWN_PLACES = frozenset(
    w.replace("_", " ")
    for w in """
    afghanistan albania algeria andorra angola argentina armenia australia austria azerbaijan bahamas bahrain
    bangladesh barbados belarus belgium belize benin bhutan bolivia botswana brazil brunei bulgaria burundi cambodia
    cameroon canada chad chile china colombia congo croatia cuba cyprus czechia denmark djibouti dominica ecuador
    egypt eritrea estonia eswatini ethiopia fiji finland france gabon gambia georgia germany ghana greece grenada
    guatemala guinea guyana haiti honduras hungary iceland india indonesia iran iraq ireland israel italy jamaica
    japan jordan kazakhstan kenya kiribati kosovo kuwait kyrgyzstan laos latvia lebanon lesotho liberia libya
    liechtenstein lithuania luxembourg madagascar malawi malaysia maldives mali malta mauritania mauritius mexico
    moldova monaco mongolia montenegro morocco mozambique myanmar namibia nauru nepal netherlands nicaragua niger
    nigeria norway oman pakistan palau panama paraguay peru philippines poland portugal qatar romania russia rwanda
    samoa senegal serbia seychelles singapore slovakia slovenia somalia spain sudan suriname sweden switzerland syria
    taiwan tajikistan tanzania thailand togo tonga tunisia turkey turkmenistan tuvalu uganda ukraine uruguay
    uzbekistan vanuatu venezuela vietnam yemen zambia zimbabwe england scotland wales britain europe asia africa
    america antarctica oceania new_zealand south_africa south_korea north_korea saudi_arabia sri_lanka costa_rica
    el_salvador united_states united_kingdom czech_republic
    london paris berlin frankfurt munich hamburg cologne stuttgart vienna zurich geneva bern basel brussels amsterdam
    rotterdam madrid barcelona lisbon porto rome milan naples turin venice florence athens istanbul ankara moscow
    warsaw krakow prague budapest bucharest sofia belgrade zagreb dublin edinburgh glasgow manchester liverpool
    birmingham oslo stockholm copenhagen helsinki reykjavik tallinn riga vilnius kyiv kiev minsk tokyo osaka kyoto
    beijing shanghai shenzhen guangzhou seoul busan delhi mumbai bangalore chennai kolkata karachi lahore dhaka
    bangkok hanoi jakarta manila sydney melbourne brisbane perth auckland wellington toronto montreal vancouver ottawa
    chicago boston seattle denver houston dallas austin atlanta miami philadelphia detroit phoenix portland
    washington baltimore pittsburgh cleveland nashville memphis orlando cairo lagos nairobi johannesburg cape_town
    casablanca tunis algiers dubai tehran baghdad riyadh jerusalem beirut damascus mexico_city havana bogota lima
    santiago caracas quito buenos_aires sao_paulo rio_de_janeiro new_york los_angeles san_francisco san_diego
    las_vegas new_orleans hong_kong tel_aviv st_petersburg
    """.split()
)
_CONSTANT_RE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")  # GEN_RUNNING, O_NONBLOCK: a code constant
_SENTENCE_OPENING_RE = re.compile(r"(?:^|[.!?:]\s+|\n\s*|[\"“(]\s*)$")


def listed_type(mention: Mention) -> EntityType:
    """The type the entity list gives a mention: a known country or city is a place, a constant is code
    (`concept`); otherwise the mention's own type."""
    if mention.entity_type in ("other", "organization") and normalize_key(mention.text) in KNOWN_PLACES:
        return "place"
    if mention.entity_type == "other" and _CONSTANT_RE.fullmatch(mention.text):
        return "concept"
    return mention.entity_type


def is_lone_opening_word(text: str, mention: Mention) -> bool:
    """One capitalised word at a sentence's opening with no type: "Currently", "Enters" are sentence-case
    words, not names (a name is capitalised mid-sentence somewhere else too, and is listed from there)."""
    return (
        mention.entity_type == "other"
        and " " not in mention.text
        and mention.text[1:].islower()
        and bool(_SENTENCE_OPENING_RE.search(text[max(0, mention.start - 4) : mention.start]))
    )


def extract_entities(text: str, source_url: str, iteration: int) -> list[Entity]:
    """Entities of one text, merged by normalized name; the richest type wins; stopwords, literals,
    abbreviations, fragments and lone sentence-opening words are none; countries and cities are places."""
    by_key: dict[str, Entity] = {}
    for mention in find_mentions(text):
        key = normalize_key(mention.text)
        if not key or not is_entity_name(mention.text) or is_lone_opening_word(text, mention):
            continue
        entity_type = listed_type(mention)
        old = by_key.get(key)
        if old is None:
            by_key[key] = Entity(
                key=key, name=mention.text, entity_type=entity_type, sources=[source_url], iteration=iteration
            )
        elif old.entity_type == "other" and entity_type != "other":
            by_key[key] = old.model_copy(update={"entity_type": entity_type})
    return list(by_key.values())
