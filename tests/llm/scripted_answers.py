"""Valid answers built from the prompt a scripted server receives: enough to run a whole session.

Static strings cannot answer `extract` (its quotes must be copied from the source in the prompt) or
`synthesize` (its [n] must name the numbered sources given). These functions read the prompt
(`RecordedRequest.user_text`) and answer the way a careful model would, so a graph test can run every step
through the LLM engine:

    from .scripted_answers import script_session
    with OpenAIServer() as server:
        script_session(server, sufficient_after=2, extra_synthesis_sentence="It cured everything [99].")
        ...  # run the session with RESEARCH_LLM=openai:test-model, OPENAI_BASE_URL=server.base_url

Per-step answers can still be queued on top with `server.script(step, ...)`: the queue wins over these defaults.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable

from .servers import RecordedRequest, Reply, ScriptedChatServer

_SOURCE_BLOCK = re.compile(r'<source id="([^"]+)"[^>]*>\n(.*?)\n</source>', re.DOTALL)
_QUESTION = re.compile(r"<question>\n(.*?)\n</question>", re.DOTALL)
_CLAIM = re.compile(r"<claim>\n(.*?)\n</claim>", re.DOTALL)
_CHOSEN_DOMAIN = re.compile(r"Domain chosen by the user: (\w+)")
_CYCLE = re.compile(r"Cycle just finished: (\d+)")
_SENTENCE = re.compile(r"[^.!?\n]*[A-Za-z][^.!?\n]*[.!?]")
_NAME = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)+\b")
MIN_SENTENCE_WORDS = 5

AnswerFunction = Callable[[RecordedRequest], "str | Reply"]


def source_blocks(prompt: str) -> list[tuple[str, str]]:
    """(id, text) of every `<source>` block in a prompt."""
    return [(m.group(1), m.group(2)) for m in _SOURCE_BLOCK.finditer(prompt)]


def question_of(prompt: str) -> str:
    found = _QUESTION.search(prompt)
    return found.group(1).strip() if found else ""


def whole_sentences(text: str, limit: int) -> list[str]:
    """Complete sentences of at least five words (a truncated tail is never one)."""
    sentences = [m.group(0).strip() for m in _SENTENCE.finditer(text)]
    return [s for s in sentences if len(s.split()) >= MIN_SENTENCE_WORDS][:limit]


def clarify_answer(request: RecordedRequest) -> str:
    prompt = request.user_text
    chosen = _CHOSEN_DOMAIN.search(prompt)
    domain = chosen.group(1) if chosen and chosen.group(1) != "none" else "general"
    return json.dumps(
        {
            "refined_query": question_of(prompt),
            "domain": domain,
            "questions": [],
            "tier": "simple",
            "tier_reason": "scripted: a focused question",
        }
    )


def apply_answers_answer(request: RecordedRequest) -> str:
    answers = re.findall(r"^A\d+: (.*)$", request.user_text, re.MULTILINE)
    return json.dumps({"refined_query": " ".join([question_of(request.user_text), *answers]).strip()})


def plan_answer(request: RecordedRequest) -> str:
    question = question_of(request.user_text)
    queries = [{"query": question, "intent": "overview"}, {"query": f"{question} evidence", "intent": "evidence"}]
    return json.dumps({"queries": queries})


def extract_answer(request: RecordedRequest) -> str:
    """Facts quoting the first whole sentences of the source, and the multi-word names in it."""
    blocks = source_blocks(request.user_text)
    text = blocks[0][1] if blocks else ""
    facts = [{"statement": s, "quote": s, "subject": None, "relevance": 0.8} for s in whole_sentences(text, 3)]
    names = list(dict.fromkeys(_NAME.findall(text)))[:5]
    return json.dumps({"facts": facts, "entities": [{"name": n, "type": "other"} for n in names]})


def reflect_answer(sufficient_after: int = 1) -> AnswerFunction:
    """Sufficient once the cycle number reaches `sufficient_after`; before that, one new query per cycle."""

    def answer(request: RecordedRequest) -> str:
        found = _CYCLE.search(request.user_text)
        cycle = int(found.group(1)) if found else 1
        sufficient = cycle >= sufficient_after
        question = question_of(request.user_text)
        new_queries = [] if sufficient else [{"query": f"{question} follow-up {cycle}", "intent": "close gaps"}]
        gaps = [] if sufficient else [f"details still missing after cycle {cycle}"]
        return json.dumps(
            {
                "sufficient": sufficient,
                "confidence": 0.8 if sufficient else 0.4,
                "gaps": gaps,
                "new_queries": new_queries,
            }
        )

    return answer


def synthesize_answer(extra_sentence: str = "") -> AnswerFunction:
    """An answer citing each of the first three sources by a sentence copied from it, plus `extra_sentence`
    as written (e.g. one citing `[99]`, for the citation check)."""

    def answer(request: RecordedRequest) -> str:
        sentences: list[str] = []
        findings: list[dict[str, object]] = []
        for source_id, text in source_blocks(request.user_text)[:3]:
            picked = whole_sentences(text, 1)
            if not picked or not source_id.isdigit():
                continue
            sentence = picked[0].rstrip(".!?")
            sentences.append(f"{sentence} [{source_id}].")
            findings.append({"statement": f"{sentence}.", "citations": [int(source_id)]})
        if extra_sentence:
            sentences.append(extra_sentence)
        body = " ".join(sentences) or "The sources retrieved do not answer the question."
        return json.dumps({"answer": body, "findings": findings, "gaps": []})

    return answer


def support_answer(unsupported: Iterable[str] = ()) -> AnswerFunction:
    """Supported, unless the claim contains one of the `unsupported` phrases."""
    phrases = [p.casefold() for p in unsupported]

    def answer(request: RecordedRequest) -> str:
        found = _CLAIM.search(request.user_text)
        claim = (found.group(1) if found else "").casefold()
        supported = not any(p in claim for p in phrases)
        reason = "stated in the source" if supported else "the source does not say this"
        return json.dumps({"supported": supported, "reason": reason})

    return answer


def script_session(
    server: ScriptedChatServer,
    *,
    sufficient_after: int = 1,
    extra_synthesis_sentence: str = "",
    unsupported_claims: Iterable[str] = (),
) -> None:
    """Valid defaults for every step, so a whole session runs through the LLM engine."""
    server.default("clarify", clarify_answer)
    server.default("apply_answers", apply_answers_answer)
    server.default("plan", plan_answer)
    server.default("extract", extract_answer)
    server.default("reflect", reflect_answer(sufficient_after))
    server.default("synthesize", synthesize_answer(extra_synthesis_sentence))
    server.default("citation_support", support_answer(unsupported_claims))
