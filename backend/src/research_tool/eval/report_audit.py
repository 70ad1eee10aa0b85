"""The report audit (issue 41): what a report states around its lead that a reader would take as the tool's word,
and that is wrong or off the question.

Per question (`audit_row`):
- a **wrong short answer**: a short answer that does not hold the gold one (owndocs: the gold short answer, or
  for a question without one, a span that is not part of the gold sentence; how-to: no `any_of` API in it);
- a **wrong verdict**: a yes/no question answered the other way;
- an **unanswerable question given one**: a short answer or a verdict for a question the files do not answer;
- a **gap that contradicts a right lead**: the first sentence answers, and the gaps still say "Not found in the
  sources: ...";
- **verified findings off the question**: findings marked verified that share no content word with the question.

Per entity (`entity_problem`): a listed entity that is no name: a question, a fragment (opening or ending with
punctuation, a lone initial at its end, a comma or colon inside), a CONSTANT, a heading of a source file made of
common words, or a phrase opening with a sentence opener ("Our team"). Scoring code only: the engine never
imports it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from research_tool.engines.text.ranker import matched
from research_tool.engines.text.tokens import content_stems, is_stopword

NOT_FOUND = "Not found in the sources"
_CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_HEADING_MD = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_HEADING_HTML = re.compile(r"<(h[1-6]|title|th|dt|summary|button|a)\b[^>]*>(.*?)</\1>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
_OPENERS = frozenset(
    """
    our your my their his her its this that these those the a an we you i they he she it there here some any every
    each all no not when where what which who how why if can do does is are was were please see note
    """.split()
)
_CONNECTORS = frozenset("of the de da di del della von van der den la le du y and for on in & at to a an".split())


def normalize(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.casefold()))


def headings(texts: Iterable[str]) -> frozenset[str]:
    """Heading lines of source files (markdown `#`, html h1-h6, title, table headers, short plain-text lines
    standing alone), normalised."""
    found: set[str] = set()
    for text in texts:
        found.update(normalize(h) for h in _HEADING_MD.findall(text))
        found.update(normalize(_TAG.sub(" ", h)) for _, h in _HEADING_HTML.findall(text))
        lines = text.splitlines()
        for i, line in enumerate(lines):
            stripped = line.strip().strip("=-*_ ")
            alone = (i == 0 or not lines[i - 1].strip()) and (i + 1 >= len(lines) or not lines[i + 1].strip())
            if stripped and alone and len(stripped.split()) <= 8 and not stripped.endswith((".", "!", "?", ";")):
                found.add(normalize(stripped))
            if "|" in stripped:  # a markdown table's header cells
                found.update(normalize(cell) for cell in stripped.split("|") if cell.strip())
    found.discard("")
    return frozenset(found)


_CODE_AND_ADDRESSES = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`|\b\w+://\S+|\S+@\S+\.\w+|\S*[/\\]\S*", re.DOTALL)


def lowercase_words(texts: Iterable[str]) -> frozenset[str]:
    """Words the texts' prose writes in lower case somewhere: common words, not names. Code (fenced blocks,
    `spans`), URLs, e-mail addresses and paths are no prose: `pip install redis`, "```python" and
    https://fathomly.example make no common word of Redis, Python or Fathomly."""
    out: set[str] = set()
    for text in texts:
        out.update(re.findall(r"\b[a-z][a-z]+\b", _CODE_AND_ADDRESSES.sub(" ", text)))
    return frozenset(out)


def entity_problem(name: str, common: frozenset[str], heads: frozenset[str]) -> str | None:
    """Why a listed entity is no name (a short reason), or None when it may be one."""
    stripped = name.strip()
    if not stripped:
        return "empty"
    if stripped.endswith("?"):
        return "question"
    if not stripped[0].isalnum() or (not stripped[-1].isalnum() and stripped[-1] not in ").%"):
        return "fragment"
    if re.search(r"[,:;]", re.sub(r"(?<=\d)[,.:](?=\d)", "", stripped)) or re.search(r"\s[A-Z]$", stripped):
        return "fragment"
    if _CONSTANT.fullmatch(stripped):
        return "constant"
    words = stripped.split()
    if words[0].casefold() in _OPENERS and len(words) > 1:
        return "sentence opener"
    content = [w for w in words if w.casefold() not in _CONNECTORS and not w[:1].isdigit()]
    # a capitalised common word is written "Rubbish": an acronym (URL) or a CamelCase class (TarInfo) is spelled as
    # no common word is, whatever the prose writes in lower case ("the url argument")
    all_common = bool(content) and all(w[:1].isupper() and w[1:].islower() and w.casefold() in common for w in content)
    if all_common and (normalize(stripped) in heads or len(content) == 1):
        return "heading" if normalize(stripped) in heads else "common word"
    if all(is_stopword(w) for w in words):
        return "stopword"
    return None


def entity_audit(entities: Sequence[dict[str, Any]], source_texts: Sequence[str]) -> dict[str, Any]:
    """Counts over one report's entities: all, typed "other", no names (with the names and reasons)."""
    common = lowercase_words(source_texts)
    heads = headings(source_texts)
    bad = [(e["name"], reason) for e in entities if (reason := entity_problem(e["name"], common, heads))]
    return {
        "entities": len(entities),
        "other": sum(1 for e in entities if e.get("type") == "other"),
        "no_names": len(bad),
        "no_name_examples": bad,
    }


def verified_off_question(question: str, findings: Sequence[dict[str, Any]]) -> list[str]:
    """Findings marked verified that share no content word with the question."""
    asked = set(content_stems(question))
    marker = re.compile(r"\s*\[\d+\]")
    return [  # sharing a word as the engine matches words: the same stem or one the prefix of the other
        f["statement"]
        for f in findings
        if f.get("verified") and not matched(asked, frozenset(content_stems(marker.sub("", f["statement"]))))
    ]


def contradicting_gaps(report: dict[str, Any]) -> list[str]:
    """The report's "Not found in the sources" gaps (contradicting the answer when its lead is right)."""
    return [g for g in report.get("gaps", []) if g.startswith(NOT_FOUND)]


def totals(rows: Sequence[dict[str, Any]]) -> list[tuple[str, Any, str]]:
    """The audit's figures over scored rows (`answers.score`): (figure, value, target)."""
    answered_rows = [r for r in rows if r["completed"]]
    n = len(answered_rows)
    if not n or not all("confident_wrong" in r for r in answered_rows):
        return []  # rows scored without the audit
    wrong_short = sum(r["wrong_short"] for r in answered_rows)
    wrong_verdict = sum(r["wrong_verdict"] for r in answered_rows)
    unanswerable_given = sum(r["unanswerable_given"] for r in answered_rows)
    confident_wrong = sum(r["confident_wrong"] for r in answered_rows)
    right_leads = [r for r in answered_rows if r["first"]]
    with_short = [r for r in answered_rows if r["short_answer"] and r["kind"] not in ("unanswerable", "yes_no")]
    entities = sum(r["entity_audit"]["entities"] for r in answered_rows)
    other = sum(r["entity_audit"]["other"] for r in answered_rows)
    no_names = sum(r["entity_audit"]["no_names"] for r in answered_rows)
    return [
        ("audit_confidently_wrong", f"{confident_wrong}/{n} ({confident_wrong / n:.3f})", "<= 0.02"),
        ("audit_wrong_short_answers", wrong_short, ""),
        ("audit_wrong_verdicts", wrong_verdict, ""),
        ("audit_unanswerable_given_one", unanswerable_given, ""),
        ("audit_short_answers_given_right", f"{sum(not r['wrong_short'] for r in with_short)}/{len(with_short)}", ""),
        (
            "audit_gaps_contradicting_right_lead",
            f"{sum(bool(r['contradicting_gaps']) for r in right_leads)}/{len(right_leads)}",
            "0",
        ),
        ("audit_verified_findings_off_question", sum(len(r["verified_off"]) for r in answered_rows), "0"),
        ("audit_entities_no_name", f"{no_names}/{entities} ({no_names / max(1, entities):.3f})", "<= 0.03"),
        ("audit_entities_other", f"{other}/{entities} ({other / max(1, entities):.3f})", "<= 0.20"),
    ]
