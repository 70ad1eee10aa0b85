"""Entity heuristics: names, titles, dates, quantities and code identifiers found in plain text.

No model: capitalized multi-word names (with "of", "de", "von"... inside), quoted titles, dates,
numbers with units, and code identifiers (`subprocess.run`, `CompletedProcess`, `check_output()`).
Types come from cue words (organization and place suffixes, honorifics, first names, the sentence
that defines a document's subject: "X was an American actress" makes X a person). What the report's entity list
holds (names only, typed: issue 41) is decided by `extract_entities` over `find_mentions`, see "the entity list".
"""

from __future__ import annotations

import re
from collections import Counter
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

# --- the entity list (issue 41): names only, typed -------------------------------------------------------------
# `find_mentions` serves answer selection too and is left as it is; what the report lists is decided here, from a
# mention, the line it stands in and the whole document: a heading or a capitalised common word is no name, a
# phrase glued across a line break or onto a weekday is cut, and a name is typed by its own words and its context.

_CONSTANT_RE = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")  # GEN_RUNNING, O_NONBLOCK: a code constant
# a sentence opens at the start, after a full stop or colon, a dash or an arrow ("name -- Describes", "int -> Make")
_SENTENCE_OPENING_RE = re.compile(r"(?:^|[.!?:]\s+|\s(?:[-–—]{1,2}|->)\s+|\n\s*|[\"“(]\s*)$")
_LINE_OPENING_RE = re.compile(r"\s*(?:[-*•>]+|\d{1,3}[.)])?\s*")  # indentation, a bullet or a list number


def opens_sentence(text: str, start: int) -> bool:
    """Whether `start` opens a sentence of `text`: its line's first word (after indentation, a bullet or a list
    number), or a word after a full stop, a colon or an opening quote."""
    line_start = text.rfind("\n", 0, start) + 1
    return bool(
        _LINE_OPENING_RE.fullmatch(text[line_start:start])
        or _SENTENCE_OPENING_RE.search(text[max(line_start, start - 4) : start])
    )


_IDENTIFIER_RE = re.compile(r"[A-Za-z_][\w\-]*(?:\.[A-Za-z_][\w\-]*)*(?:\(\))?")
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_DATE_WORDS = frozenset(
    _WEEKDAYS
    + [d + "s" for d in _WEEKDAYS]
    + [m.casefold() for m in _MONTHS.split("|") if len(m) > 3]
    + "christmas easter whitsun michaelmas hogmanay hanukkah diwali ramadan eid thanksgiving halloween".split()
)
_DATE_PHRASES = frozenset(
    """
    new year;new year's day;new year's eve;christmas day;christmas eve;boxing day;good friday;easter sunday;
    easter monday;bank holiday;bank holiday monday;may day;early may bank holiday;spring bank holiday;
    summer bank holiday;august bank holiday;st david's day;st patrick's day;st andrew's day;st george's day;
    valentine's day;mother's day;father's day;remembrance sunday;guy fawkes night;bonfire night
    """.replace("\n", "").split(";")
)
_OPENING_WORDS = frozenset(
    """
    our your my their its his her we welcome about introducing meet dear hello hi please see around near inside
    outside beyond from into with without for by getting finding visiting exploring discover discovering each every
    """.split()
)
_LISTING_CONNECTORS = frozenset(
    "of the de da di del della von van der den la le du y and for on in & at to a an".split()
)
# Products, languages, formats and systems a text names without a cue ("written in Python"): typed `concept`,
# the type of code names, since the entity types have no "product".
KNOWN_PRODUCTS = frozenset(
    """
    python cpython pypy java javascript typescript kotlin swift rust golang ruby perl php haskell scala erlang elixir
    lua fortran cobol pascal matlab linux unix windows macos ios android ubuntu debian fedora freebsd redis sqlite
    postgresql postgres mysql mariadb mongodb cassandra elasticsearch kafka rabbitmq docker kubernetes git github
    gitlab bitbucket jira confluence slack teams zoom skype excel powerpoint outlook gmail chrome firefox safari
    edge opera nginx apache django flask fastapi numpy pandas scipy pytorch tensorflow jupyter vscode vim emacs
    aws azure gcp heroku pagerduty grafana prometheus datadog sentry terraform ansible jenkins json yaml toml xml
    html css csv pdf ascii unicode utf-8 base64 markdown wordpress shopify paypal stripe visa mastercard amex
    bluetooth wi-fi wifi usb hdmi iphone ipad macbook kindle playstation xbox nintendo whatsapp facebook
    instagram twitter youtube tiktok linkedin google microsoft apple amazon netflix spotify
    """.split()
)
_MORE_ORG_CUES = frozenset(
    """
    hotel hotels inn pub bakery cafe café restaurant bistro brewery distillery shop shops store stores market
    supermarket garage choir chorus orchestra ensemble conservatoire conservatory practice surgery clinic pharmacy
    services service scheme trust charity fund foundation partnership partners associates solicitors lettings
    estates agents agency insurance insurers assurance mutual society guild co-op cooperative council board office
    bureau authority commission police library theatre theater cinema gallery galleries centre center gym
    railway railways buses coaches transport travel tours airways motors engineering consulting holdings
    industries enterprises ventures collective gardeners allotments association federation trustees committee
    vets veterinary dental dentistry academy nursery playgroup awards
    """.split()
)
_MORE_PLACE_CUES = frozenset(
    """
    lane row way close crescent terrace gardens quay wharf green hill hills moor moors fell fells dale dales cove
    point cross haven end staithe marsh heath common wood woods vale glen loch burn beck tarn pike scar crag cliff
    cliffs sands strand pier harbour harbor promenade parade drive grove walk mews yard estate marina steps hut ness
    """.split()
)
_PLACE_SUFFIX_RE = re.compile(
    r"[A-Z][a-z]{2,}(?:ford|by|ton|ham|wick|mouth|bury|borough|burgh|caster|chester|field|stead|thorpe|worth|"
    r"minster|port|combe|holm|reach|haven|bridge|dale|ley|ington|stow|stowe|hurst|sey|wich|cott|cote)"
)
_MORE_FIRST_NAMES = frozenset(
    """
    aled alun bryn carys cerys dafydd dylan eira eirlys emlyn ffion gareth gethin glyn gwen gwyn huw iestyn ieuan
    ifan iolo lowri mared megan nia owain rhian rhys sian siân sioned tegan wyn aoife aisling brendan bridget ciara
    ciaran cormac declan deirdre eamon eoin fergus fionn grainne liam niamh niall oisin orla padraig roisin seamus
    siobhan sinead una alasdair alistair angus callum catriona ewan fiona hamish iain isla kirsty morag rory
    tamsin jory kerensa morwenna demelza loveday jago piran annis alys ada agnes alfred algernon amos archibald
    arnold augusta barnaby basil beatrice bertha bertram cecil cecily clara clarence claude clement cornelius
    cuthbert cyril dora dorothea edgar edith edmund edna edwin eleanor elias eliza ellen elsie enid ernest esther
    ethel eunice evelyn ezra florence gertrude gilbert gwendolen harriet herbert hester horace hubert hugh ida
    ira isaac isaiah ivy jabez jemima josiah julius leonard lionel lottie lucy mabel margery matilda maud maude
    mildred minnie myrtle ned nell nellie obadiah oswald percy phoebe reginald rosalind rufus selina septimus silas
    sybil teddy theodore thomasina tobias ursula vera violet walter wilfred winifred zachariah zillah
    abdul ahmed aisha ali amir anjali arjun asha deepak farah fatima hassan ibrahim imran jamal kamala karim layla
    leila mohammed muhammad nadia omar priya rahul raj ravi sanjay sunil yusuf zainab zara chen hui jun li mei
    ming wei xin yan yi ying hiroshi kenji yuki akira haruto sakura takeshi kwame kofi ama chidi ngozi oluwaseun
    tunde sam ines inês luka luca marco matteo lorenzo giulia francesca sofia chiara pablo diego javier lucia
    carmen mateo sergio andres ana joao joão pedro tiago beatriz miguel lars sven erik anders ingrid astrid freya
    nils olaf bjorn björn sigrid jan piotr pawel katarzyna agnieszka marek tomasz zofia ivan dmitri olga sergei
    natasha anya boris mikhail yuri tatiana hans jurgen jürgen klaus dieter wolfgang heike ute petra greta
    gemma corwen malcolm dominic marion alan aled rob bob bill ben tom tim jim jo jess kate katie liz beth becky
    ellie millie molly poppy daisy lily ruby amelia ava mia chloe zoe holly imogen jasmine phoebe harriet harry
    alfie archie oliver oscar leo theo finn freddie toby max rosie hannah ella evie isabel isobel eve maya
    craig neil ian stuart graham derek trevor colin nigel clive keith barry gordon ross duncan fraser
    gavin darren dean lee wayne shaun stacey tracy tracey kerry joanne julie lynn lynne wendy pauline
    sheila maureen brenda jean jane june joan janet val valerie yvonne hazel irene sylvia norma doreen
    moira ailsa heather tessa nina vanessa miranda alison alice anne annie susie vicky harvey marcus
    felix hugo jasper rupert giles simon nathan rebecca caroline katharine sally penny pippa
    """.split()
)
_MORE_WORK_CUES = frozenset(
    """
    hymn carol anthem ballad lullaby overture requiem suite waltz march poem story stories tale tales essay report
    exhibition festival concert programme program podcast column chronicle diary journal
    """.split()
)
_PLACE_FIRST_CUES = frozenset("port mount mt lake fort cape isle loch glen upper lower north south east west".split())
_MORE_KNOWN_PLACES = frozenset(
    w.replace("_", " ")
    for w in """
    uk usa us eu nova_scotia cornwall devon yorkshire kent sussex essex norfolk suffolk cumbria northumberland
    lancashire somerset dorset wiltshire highlands isle_of_man isle_of_wight anglesey orkney shetland ulster bavaria
    tuscany provence normandy brittany catalonia andalusia scandinavia siberia patagonia quebec ontario
    british_columbia new_england midwest
    """.split()
)
_PERSON_ROLES = (
    r"writer|author|poet|composer|conductor|arranger|director|chair|chairman|chairwoman|secretary|treasurer|"
    r"manager|owner|founder|landlord|landlady|tenant|agent|dentist|hygienist|nurse|doctor|vet|surgeon|keeper|"
    r"member|soloist|accompanist|singer|baker|chef|engineer|lead|head|curator|volunteer|guide|teacher|vicar|"
    r"councillor|mayor|clerk|officer|coordinator|organiser|organizer|contact|grandfather|grandmother|father|"
    r"mother|son|daughter|brother|sister|uncle|aunt|cousin|wife|husband|widow|nephew|niece|partner|friend|dear"
)
_PERSON_BEFORE_RE = re.compile(rf"\b(?:{_PERSON_ROLES})\s+$", re.IGNORECASE)
_PERSON_BEFORE_WEAK_RE = re.compile(r"\b(?:by|with|ask|asked|call|contact|email)\s+$", re.IGNORECASE)  # two words
_PERSON_AFTER_RE = re.compile(
    r"^(?:'s|’s)?\s*(?:\(\s*(?:born|b\.|\d{4})|,\s+(?:our|the|who|a|an|his|her)\s|\s+(?:said|says|wrote|writes|"
    r"who|grew|was born|married|joined|founded|became|took|runs|ran|leads|led|died|lived|moved|retired|"
    r"explains|recalls|remembers|told|tells|asked|asks))",
)
_PLACE_BEFORE_RE = re.compile(
    r"\b(?:in|near|at|outside|around|towards|between|across|above|below|beyond|opposite|via)\s+(?:the\s+)?$"
)
_WORK_INNER_RE = re.compile(r"\s(?:the|a|an)\s", re.IGNORECASE)


@dataclass(frozen=True)
class DocumentWords:
    """What a whole document says about its words: `common`, those its prose (code and addresses left out)
    writes in lower case at least as often as it capitalises them mid-sentence; `named`, those it capitalises
    mid-sentence; and its heading lines (lines standing alone, markdown `#` lines), normalised."""

    common: frozenset[str]
    named: frozenset[str]
    headings: frozenset[str]
    column_heads: frozenset[str] = frozenset()  # a table's column headers, as rows written as sentences use them
    lower: frozenset[str] = frozenset()  # every word its prose writes in lower case somewhere


_CODE_AND_ADDRESSES_RE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`|\b\w+://\S+|\S+@\S+\.\w+|\S*[/\\]\S*", re.DOTALL)


def prose(text: str) -> str:
    """`text` without code blocks, code spans, URLs, e-mail addresses and paths: the words a reader reads."""
    return _CODE_AND_ADDRESSES_RE.sub(" ", text)


_ROW_RE = re.compile(r"^[^:;\n]{1,120}: (.+; .+)$")


def _column_heads(lines: list[str]) -> frozenset[str]:
    """The column headers of the document's tables, from rows written as sentences ("Family room: Price £95;
    Breakfast Included.", `documents.row_sentence`): the words two or more cells of one column open with."""
    by_first: dict[str, list[list[str]]] = {}
    for line in lines:
        row = _ROW_RE.match(line.strip())
        if not row:
            continue
        for cell in row.group(1).rstrip(".").split("; "):
            cell_words = cell.split()
            if cell_words:
                by_first.setdefault(cell_words[0], []).append(cell_words)
    heads = set()
    for cells in by_first.values():
        if len(cells) < 2:
            continue
        prefix = cells[0]
        for other in cells[1:]:
            n = 0
            while n < min(len(prefix), len(other)) and prefix[n] == other[n]:
                n += 1
            prefix = prefix[:n]
        if len(prefix) == min(map(len, cells)):  # one cell is all prefix ("Price £4" twice): its last word a value
            prefix = prefix[: max(1, len(prefix) - 1)]
        heads.add(" ".join(prefix))
    return frozenset(heads)


def _cells_as_sentences(line: str, heads: frozenset[str]) -> str:
    """A row written as a sentence with each cell a sentence of its own, and its column header apart."""
    row = _ROW_RE.match(line.strip())
    if not row:
        return line
    out = []
    for cell in row.group(1).rstrip(".").split("; "):
        head = next((h for h in heads if cell.startswith(h + " ")), "")
        out.append(f"{head}. {cell[len(head) + 1 :]}" if head else cell)
    return ". ".join(out) + "."


@lru_cache(maxsize=64)
def document_words(document: str) -> DocumentWords:
    column_heads = _column_heads(document.splitlines())
    plain = prose("\n".join(_cells_as_sentences(line, column_heads) for line in document.splitlines()))
    lower = Counter(_LOWER_WORD_RE.findall(plain))
    named = Counter(w.casefold() for w in _MID_SENTENCE_CAPITAL_RE.findall(plain))
    common = frozenset(w for w, n in lower.items() if n >= named.get(w, 0))
    heads: set[str] = set()
    lines = document.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip().lstrip("#").strip()
        alone = (i == 0 or not lines[i - 1].strip()) and (i + 1 >= len(lines) or not lines[i + 1].strip())
        if stripped and (line.lstrip().startswith("#") or alone) and not stripped.endswith((".", "!", "?", ";")):
            heads.add(normalize_key(stripped))
    return DocumentWords(common, frozenset(named), frozenset(heads), column_heads, frozenset(lower))


def _is_date_phrase(name: str) -> bool:
    key = name.casefold().replace("’", "'")
    if key in _DATE_PHRASES:
        return True
    words = [w for w in re.split(r"\s+", key) if w not in ("and", "to", "&", "or")]
    return bool(words) and all(w.strip(".,") in _DATE_WORDS for w in words)


def _is_code_or_product(name: str) -> bool:
    """A product, format or code name by its spelling: SQLite, HomeSure, Base64, SHA-256, HTTP, APIs."""
    if " " in name:
        words = [w for w in name.split() if w.casefold() not in _LISTING_CONNECTORS]
        return bool(words) and all(_is_code_or_product(w) for w in words)
    key = name.casefold()
    if key in KNOWN_PRODUCTS or key.rstrip("s") in KNOWN_PRODUCTS:
        return True
    if re.fullmatch(r"[A-Z]{2,6}s?|[A-Z][A-Z0-9]*-?\d+[A-Za-z]?|[A-Z]-[a-z]+", name):
        return True  # an acronym (API, APIs, PDF) or a coded name (SHA-256, MP3, Base64 below)
    return bool(
        re.fullmatch(r"[A-Za-z]*[a-z][A-Z][A-Za-z0-9]*|[A-Z]{2,}[a-z][A-Za-z0-9]*|[A-Za-z]+\d+[A-Za-z0-9]*", name)
    )


def _name_type(name: str, line: str, start: int, found: EntityType) -> EntityType:
    """The listed type of a capitalised name (`found`: what `find_mentions` typed it)."""
    tokens = [re.sub(r"(?:'s|’s)$", "", t.casefold().strip(".,")) for t in name.split()]
    key = normalize_key(name)
    before = line[max(0, start - 40) : start]
    after = line[start + len(name) : start + len(name) + 40]
    head = tokens[-1]
    if _is_date_phrase(name):
        return "date"
    if key in KNOWN_PLACES or key in _MORE_KNOWN_PLACES:
        return "place"
    if _is_code_or_product(name):
        return "concept"
    # the last word (the head noun) first: "Harbour Gallery" is an organization, "Three Harbour Songs" a work
    if len(tokens) > 1 and (head in _ORG_CUES or head in _MORE_ORG_CUES):
        return "organization"
    if len(tokens) > 1 and (head in _WORK_CUES or head in _MORE_WORK_CUES or head.rstrip("s") in _WORK_CUES):
        return "work"
    if len(tokens) > 1 and (head in _PLACE_CUES or head in _MORE_PLACE_CUES or tokens[0] in _PLACE_FIRST_CUES):
        return "place"
    if tokens[0] in _HONORIFICS and len(tokens) >= 2:
        return "person"
    if len(tokens) == 1 and (head in _ORG_CUES or head in _PLACE_CUES):
        return "other"  # "Force", "Bank": the cue word alone names nothing
    if found in ("person", "organization"):
        return found
    if any(t in _MORE_ORG_CUES for t in tokens):
        return "organization"  # "Tidemark Lettings" at a place named after it is still the firm
    if (tokens[0] in FIRST_NAMES or tokens[0] in _MORE_FIRST_NAMES) and not _is_common(tokens[0], None):
        return "person" if len(tokens) <= 4 else "other"
    if found != "other":
        return found
    if any(t in _PLACE_CUES for t in tokens):
        return "place"
    if 2 <= len(tokens) <= 3 and any(t in FIRST_NAMES or t in _MORE_FIRST_NAMES for t in tokens[1:]):
        return "person"  # "Big Edmund", "Young Harriet"
    named_like = len(tokens) <= 3 and all(t.isalpha() or "-" in t for t in tokens) and not name.isupper()
    named_like = named_like and not any(len(w) > 1 and w.isupper() for w in name.split())  # "UNIX Domain Sockets"
    if named_like and (
        _PERSON_BEFORE_RE.search(before)
        or (len(tokens) >= 2 and (_PERSON_AFTER_RE.match(after) or _PERSON_BEFORE_WEAK_RE.search(before)))
    ):
        return "person"
    if len(tokens) == 1 and _PLACE_SUFFIX_RE.fullmatch(name):
        return "place"
    if len(tokens) <= 3 and _PLACE_BEFORE_RE.search(before):
        return "place"
    opening = opens_sentence(line, start) and not re.match(r"\s+[-–—]\s|\s*[:(]|\s*$", after)
    if len(tokens) >= 3 and _WORK_INNER_RE.search(f" {name} ") and not name.isupper() and not opening:
        return "work"  # "Lantern on the Water", a title in a list; not "Send the URL" opening a sentence
    return "other"


def _is_common(word: str, words: DocumentWords | None) -> bool:
    return words is not None and word.casefold() in words.common


def _part(line: str, mention: Mention, begin: int, end: int) -> Mention | None:
    """The mention's tokens `begin:end` as a mention of their own (its type to be set again)."""
    tokens = list(re.finditer(r"\S+", mention.text))[begin:end]
    if not tokens:
        return None
    start = mention.start + tokens[0].start()
    text = mention.text[tokens[0].start() : tokens[-1].end()]
    return Mention(text, "other", start, start + len(text))


def _is_date_token(token: str) -> bool:
    return token.casefold().strip(".,'’") in _DATE_WORDS


def _trimmed(line: str, mention: Mention) -> list[Mention]:
    """A name mention without an opening word ("Our", "Welcome to"), a trailing quote or hyphen ("CPython'",
    "URL-") or a lone initial at its end ("Carpenter and L"), cut where a weekday or month is glued on
    ("Collections on Monday", "Days Monday": two parts, the date one a date)."""
    tokens = mention.text.split()
    begin, end = 0, len(tokens)
    while begin < end and (
        tokens[begin].casefold() in _OPENING_WORDS or (begin > 0 and tokens[begin].casefold() in _LISTING_CONNECTORS)
    ):
        begin += 1
    while end > begin and (
        re.fullmatch(r"[A-Z]\.?", tokens[end - 1]) or tokens[end - 1].casefold() in _LISTING_CONNECTORS
    ):
        end -= 1
    runs: list[tuple[int, int]] = []
    i = begin
    while i < end:
        dated = _is_date_token(tokens[i])
        j = i + 1
        while j < end and (
            _is_date_token(tokens[j]) == dated
            or (dated and tokens[j].casefold() in ("and", "to", "&") and j + 1 < end and _is_date_token(tokens[j + 1]))
            or (
                not dated
                and tokens[j].casefold() in _LISTING_CONNECTORS
                and j + 1 < end
                and not _is_date_token(tokens[j + 1])
            )
        ):
            j += 1
        k = j
        while k > i and tokens[k - 1].casefold() in _LISTING_CONNECTORS:
            k -= 1
        if k > i:
            runs.append((i, k))
        i = j
        while i < end and tokens[i].casefold() in _LISTING_CONNECTORS:
            i += 1
    if len(runs) > 1 and _is_date_phrase(" ".join(tokens[begin:end])):
        runs = [(begin, end)]  # "Christmas Day", "Good Friday": one date
    out = []
    for b, e in runs:
        if b == 0 and e == len(tokens) and not mention.text.endswith(("'", "’", "-")):
            out.append(mention)
            continue
        part = _part(line, mention, b, e)
        if part is None:
            continue
        cleaned = part.text.rstrip("'’-")
        out.append(Mention(cleaned, part.entity_type, part.start, part.start + len(cleaned)))
    return out


def _is_first_name(word: str) -> bool:
    return word.casefold() in FIRST_NAMES or word.casefold() in _MORE_FIRST_NAMES


def _split_products(line: str, parts: list[Mention]) -> list[Mention]:
    """ "Redis and SQLite", "NFS and SMB", "Ned and Lily": two names, each of its own; "Edmund Varlowe on Tarry
    Row", "Gull Steps in Saltreach": two names (not "Lantern on the Water"); "Marion Keddle's The Salt Road": a
    capitalised "The" inside a phrase opens a second name."""
    out: list[Mention] = []
    for part in parts:
        words = part.text.split()
        if len(words) >= 3 and any(w.casefold() in ("and", "&", "or") for w in words):
            named = [w for w in words if w.casefold() not in ("and", "&", "or")]
            if _is_code_or_product(part.text) or all(_is_first_name(w) for w in named):
                out.extend(
                    Mention(m.group(0), "other", part.start + m.start(), part.start + m.end())
                    for m in re.finditer(r"[^\s&]+", part.text)
                    if m.group(0).casefold() not in ("and", "or")
                )
                continue
        cut = re.search(r"\s(?:on|in|at)\s(?!the\s|a\s|an\s)(?=[A-Z])|(?<=\w)(?:'s|’s)?\s(?=The\s)", part.text)
        if cut and cut.start() > 0:
            head, tail = part.text[: cut.start()], part.text[cut.end() :]
            out.append(Mention(head, "other", part.start, part.start + len(head)))
            tail_start = part.start + cut.end()
            if tail.startswith("The "):
                tail, tail_start = tail[4:], tail_start + 4
            out.extend(_split_products(line, [Mention(tail, "other", tail_start, tail_start + len(tail))]))
            continue
        out.append(part)
    return out


def _listable_name(part: Mention, words: DocumentWords) -> bool:
    """A capitalised phrase that is a name: not a heading or a phrase of common words, not a shouted heading."""
    text = part.text
    if len(text) < 2 or not is_entity_name(text) or _CONSTANT_RE.fullmatch(text):
        return False
    content = [w for w in text.split() if w.casefold() not in _LISTING_CONNECTORS and not w[:1].isdigit()]
    if not content:
        return False
    if len(content) > 1 and text.isupper():
        return False  # "HOUSE RULES", "INTERVAL OF 20 MINUTES": a heading in capitals
    shouted = len(content) == 1 and text.isupper() and len(text) >= 4 and text.casefold() not in KNOWN_PRODUCTS
    if shouted and (_is_common(text, words) or len(text) >= 6):
        return False  # "PIPE", "CANCEL", "WNOHANG", "DEFAULT": a constant or a word in capitals; acronyms are short
    if all(w[1:].islower() and _is_common(w, words) for w in content):
        return False  # "Rubbish", "Bread and Pastries", "CANCEL": common words, capitalised by a heading or a cell
    return not (normalize_key(text) in words.headings and _is_common(content[0], words))


def listing_mentions(line: str, mention: Mention, words: DocumentWords) -> list[Mention]:
    """What the entity list makes of one mention in `line`: nothing (no name), or the name(s) in it, typed."""
    if not is_entity_name(mention.text):
        return []
    if mention.entity_type in ("date", "number"):
        return [mention]
    if mention.entity_type == "concept":
        plain = mention.text
        if _CONSTANT_RE.fullmatch(plain) or not _IDENTIFIER_RE.fullmatch(plain):
            return []  # a CONSTANT, or a code span holding an expression (`lock="file"`, `pip install x`)
        return [mention]
    if mention.entity_type == "work":
        title = mention.text
        title_words = title.split()
        if re.search(r"[?!.,:;]$", title) or title_words[0].casefold() in _OPENING_WORDS | _COMMON_SENTENCE_STARTERS:
            return []  # a quoted question or sentence, not a title
        if len(title_words) > 1 and sum(w[:1].islower() for w in title_words) * 2 > len(title_words):
            return []  # a quoted phrase ("see the notes below"), not a title
        if "," in title:
            return []
        if len(title_words) <= 3 and _is_first_name(title_words[0]) and all(w[:1].isupper() for w in title_words):
            return [Mention(title, "person", mention.start, mention.end)]  # "Little Edmund", a nickname
        return [mention]
    line = _cells_as_sentences(line, words.column_heads) if words.column_heads else line
    if words.column_heads and line[mention.start : mention.end] != mention.text:
        moved = line.find(mention.text)
        if moved < 0:
            return []
        mention = Mention(mention.text, mention.entity_type, moved, moved + len(mention.text))
    if is_lone_opening_word(line, mention) or any(
        mention.text in h.split() or mention.text == h for h in words.column_heads
    ):
        return []
    out = []
    for part in _split_products(line, _trimmed(line, mention)):
        if not _listable_name(part, words) and not _is_date_phrase(part.text):
            continue
        if part is not mention and is_lone_opening_word(line, Mention(part.text, "other", part.start, part.end)):
            continue  # "Collections" of "Collections on Monday", opening its line
        found = mention.entity_type
        if part is not mention:
            found = classify_name(part.text, line[max(0, part.start - 40) : part.end + 60])
        listed_as = _name_type(part.text, line, part.start, found)
        inner = list(_WORK_INNER_RE.finditer(part.text))
        cut = inner[-1].end() if inner else None
        first, _, rest = part.text.partition(" ")
        if cut is None and rest and (_is_code_or_product(rest) or rest.isupper()):
            cut = len(first) + 1  # "Raise KeyError", "Parse XML": a verb opening the sentence before a code name
        if listed_as == "other" and cut is not None and opens_sentence(line, part.start):
            # "Send the URL", "Add the Marrowby": a sentence's opening verb and article; the name after them, if any
            tail = Mention(part.text[cut:], "other", part.start + cut, part.end)
            if _listable_name(tail, words) and not is_lone_opening_word(line, tail):
                tail_found = classify_name(tail.text, line[max(0, tail.start - 40) : tail.end + 60])
                out.append(
                    Mention(tail.text, _name_type(tail.text, line, tail.start, tail_found), tail.start, tail.end)
                )
            continue
        if listed_as == "other" and part.text[1:].islower() and part.text.casefold() in words.lower:
            continue  # "Blue", "Hall": one untyped word the document writes in lower case too, a common word
        out.append(Mention(part.text, listed_as, part.start, part.end))
    return out


def is_lone_opening_word(text: str, mention: Mention) -> bool:
    """One capitalised word at a sentence's opening with no type: "Currently", "Enters" are sentence-case
    words, not names (a name is capitalised mid-sentence somewhere else too, and is listed from there)."""
    return (
        mention.entity_type == "other"
        and " " not in mention.text
        and mention.text[1:].islower()
        and opens_sentence(text, mention.start)
        and classify_name(mention.text) == "other"
        and normalize_key(mention.text) not in KNOWN_PLACES
        and not _is_date_phrase(mention.text)
        and mention.text.casefold() not in KNOWN_PRODUCTS
    )


def count_mentions(name: str, document: str) -> int:
    """How many times `document` names `name` (whole words, case as written; at least once)."""
    if not name:
        return 1
    pattern = r"(?<![\w])" + re.escape(name).replace(r"\ ", r"\s+") + r"(?![\w])"
    return max(1, len(re.findall(pattern, document)))


def extract_entities(text: str, source_url: str, iteration: int, document: str = "") -> list[Entity]:
    """The names of one text worth listing, merged by normalized name; the richest type wins. `document`: the
    whole text it comes from (default `text`), whose common words and headings tell a name from a heading, and
    where its mentions are counted. Names never run across a line break."""
    whole = document or text
    words = document_words(whole)
    by_key: dict[str, Entity] = {}
    for line in text.splitlines():
        for mention in find_mentions(line):
            for listed in listing_mentions(line, mention, words):
                key = normalize_key(listed.text)
                if not key:
                    continue
                old = by_key.get(key)
                if old is None:
                    by_key[key] = Entity(
                        key=key,
                        name=listed.text,
                        entity_type=listed.entity_type,
                        sources=[source_url],
                        iteration=iteration,
                        mention_count=count_mentions(listed.text, whole),
                    )
                elif old.entity_type == "other" and listed.entity_type != "other":
                    by_key[key] = old.model_copy(update={"entity_type": listed.entity_type})
    return list(by_key.values())


def is_title_name(title: str, document: str) -> bool:
    """A document title that is a name (a code name, "Hotel Vennecliff", "Larkmoor Community Choir"), not a
    heading ("Our rooms", "Notebook, April 2024", "Questions about HomeSure Contents", "Can I pay by card?")."""
    if not title or re.search(r"[?!:;,|()\"“”]", title):
        return False
    words = title.split()
    if len(words) == 1:
        if not _IDENTIFIER_RE.fullmatch(title) or _CONSTANT_RE.fullmatch(title) or not is_entity_name(title):
            return False
        if title[:1].islower() or "." in title or "_" in title or _is_code_or_product(title):
            return True  # a code name: a module's or a function's page
        return title.casefold() in document_words(document).named and not _is_common(title, document_words(document))
    if re.fullmatch(r"[A-Z]\.?", words[-1]):
        return False
    if title.isupper() or words[0].casefold() in _OPENING_WORDS | _COMMON_SENTENCE_STARTERS:
        return False
    if any(not w[:1].isupper() and w.casefold() not in _LISTING_CONNECTORS and not w[:1].isdigit() for w in words):
        return False
    return _listable_name(Mention(title, "other", 0, len(title)), document_words(document))


def title_type(title: str, defining_sentence: str) -> EntityType:
    """The type of a document's subject named by its title."""
    if " " not in title and (title[:1].islower() or "." in title or "_" in title):
        return "concept"  # a module or function page: `asyncio`, `kettle.boil`
    found = classify_by_definition(title, defining_sentence)
    if found != "other":
        return found
    return _name_type(title, title, 0, "other")


def is_listed_name(name: str) -> bool:
    """A last check on a name about to be listed (from any engine): no question, CONSTANT, fragment opening or
    ending with punctuation, or a phrase opening with a sentence opener ("Our team")."""
    stripped = name.strip()
    if not is_entity_name(stripped) or _CONSTANT_RE.fullmatch(stripped) or stripped.endswith("?"):
        return False
    if not stripped[-1].isalnum() and stripped[-1] not in ").%":
        return False
    words = stripped.split()
    return not (len(words) > 1 and words[0].casefold() in _OPENING_WORDS)


def types_from_longer_names(names: dict[str, EntityType]) -> dict[str, EntityType]:
    """Types for untyped one-word names from the typed names they are part of: "Ffion" of the person "Ffion
    Marchbank" (or "Edmunds" of "Edmund Arthur") is a person, "Tidemark" of the organization "Tidemark
    Lettings" one too. Returns only the names it types."""
    person_words: set[str] = set()
    leading: dict[str, EntityType] = {}
    for name, entity_type in names.items():
        words = name.casefold().split()
        if len(words) < 2:
            continue
        if entity_type == "person":
            start = 1 if words[0].strip(".") in _HONORIFICS else 0
            person_words.update(w for w in words[start:] if w[:1].isalpha() and w not in _LISTING_CONNECTORS)
        elif entity_type in ("organization", "place"):
            leading.setdefault(words[0], entity_type)
    typed: dict[str, EntityType] = {}
    for name, entity_type in names.items():
        key = name.casefold()
        if entity_type != "other" or " " in key:
            continue
        singular = key[:-1] if key.endswith("s") else key
        if key in person_words or singular in person_words:
            typed[name] = "person"
        elif key in leading:
            typed[name] = leading[key]
    return typed
