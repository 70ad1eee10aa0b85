"""The LLM engine: the reasoning steps done by a chat model (Ollama, OpenAI-compatible or Anthropic).

Every step follows the same path (DESIGN §3, issue 5 item 3):
1. render the step's prompt file (`engines/prompts/<step>.txt`); retrieved text goes in as delimited data;
2. call the model, streamed, in the strongest structured-output form the server takes (`output_format`), and
   count the tokens from its usage data (estimated when the server sends none, or for a call cut short);
3. parse and validate the answer against the step's strict schema (`structured_output`), then check it
   against the inputs (quotes really in the source, queries not already run, ...);
4. on an invalid answer, ask once more in the same conversation with the problem and the JSON Schema
   restated;
5. if that fails too, or the model server fails, the step is done by the offline engine and the model's
   error is returned as an `ErrorResponse` in `EngineStep.errors` (degraded, never a crash).

After `unavailable_after` consecutive transport failures the engine stops calling the model for the rest of
its life (each step then degrades at once, still with the error recorded), so a dead server costs seconds,
not minutes.

What bounds one model call (issue 14):
- `call_timeout_s` (RESEARCH_LLM_TIMEOUT_S) bounds the whole call, the client's own retry included, not the
  gap between bytes: a model that trickles or hangs is cancelled when it runs out;
- the session's deadline (`bound_calls`, set by the graph before every node from RESEARCH_MAX_EXECUTION_TIME_S
  minus the time spent): a call running then is cancelled, none starts after it, and a retry only runs in the
  time left;
- the server's prompt speed (`prompt_timing`, measured from earlier calls to the same server): a prompt whose
  evaluation would not end well inside the call's time is sent with less of its sources' text
  (`PROMPT_SHARES`), or not at all, because a server evaluates a prompt it has begun to its end, after the
  call is cancelled (issue 35);
- the session's token budget: a call whose prompt plus `max_answer_tokens` (sent as the provider's
  max_tokens) does not fit in what is left is never sent;
- `max_answer_chars`: a longer answer is rejected (retried once, then offline) and never parsed.
Every step that falls back is told to the session's listener (the `model_fallback` event) and returned in
`EngineStep.errors`, from which the report's `metadata.fallbacks` is built.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any, Generic, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel

from research_tool.core.errors import EngineOutputError
from research_tool.core.logging import get_logger
from research_tool.engines.base import (
    REASON_DEADLINE,
    REASON_OUTPUT,
    REASON_TIMEOUT,
    REASON_TOKENS,
    REASON_UNAVAILABLE,
    CallLimits,
    ClarifyResult,
    EngineStep,
    ExtractResult,
    FallbackListener,
    FallbackNotice,
    FindingDraft,
    ReasoningEngine,
    ReflectionContext,
    ReflectionOutcome,
    SynthesisDraft,
    SynthesisInput,
)
from research_tool.engines.chat_template import TemplateCheck
from research_tool.engines.compaction import estimate_text_tokens
from research_tool.engines.llm_schemas import (
    ApplyAnswersAnswer,
    ClarifyAnswer,
    ExtractAnswer,
    ReflectAnswer,
    SupportAnswer,
    SynthesizeAnswer,
)
from research_tool.engines.model_span import invoke_traced
from research_tool.engines.output_format import ChatRequests, prompt_only
from research_tool.engines.prompt_templates import (
    RenderedPrompt,
    escape_data,
    load_prompt,
    source_block,
    truncate,
)
from research_tool.engines.quote_match import find_quote
from research_tool.engines.structured_output import compact_schema, parse_structured
from research_tool.engines.text.answering import select_answer
from research_tool.engines.text.contact_details import ContactGuard
from research_tool.engines.text.instructions import is_instruction_like
from research_tool.models.domain import DomainConfiguration, DomainName
from research_tool.models.entities import Entity, Evidence, Fact, SourceResult, normalize_key, utc_now_iso
from research_tool.models.schemas import (
    ErrorDetail,
    ErrorResponse,
    PlanQuery,
    PlanResponse,
    ReflectionResponse,
    ResponseMetadata,
)
from research_tool.models.stop_reasons import stop_label
from research_tool.models.tiers import TIERS

log = get_logger(__name__)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

Preflight = Callable[[], Awaitable[None]]
Closer = Callable[[], Awaitable[None]]
PromptAt = Callable[[float], RenderedPrompt]  # a step's prompt with this share of its sources' text

DEGRADED_NOTE = "Search capabilities were limited; answer is based on partial information."
_CITATION_MARK = re.compile(r"\[\d+\]")
_MAX_ERROR_CHARS = 400
_MAX_ECHOED_ANSWER_CHARS = 2000  # of an invalid answer, quoted back in the retry conversation
_ANSWER_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=\])\s+(?=[A-Z])")
PROMPT_TIME_SHARE = 0.5  # of a call's time, what its prompt's predicted evaluation may take (speeds vary)
PROBE_TIMEOUT_S = 5.0  # the preflight's speed probe may take this long
# About 100 tokens (the timing measures from 32 up): what the server evaluates at preflight to learn its speed.
PROBE_PROMPT = (
    "Research Tool step: probe. This short message only measures how fast the server reads a prompt. "
    "Answer with the single word ok. The rest is filler of a known length: " + " ".join(f"word{i}" for i in range(40))
)
PROMPT_SHARES = (0.5, 0.25, 0.125)  # of the sources' text, tried in turn when the whole prompt would not fit

DOMAIN_DESCRIPTIONS: dict[str, str] = {
    "general": "everyday and broad questions",
    "academic": "research literature: studies, papers, theories, datasets",
    "medical": "health: diseases, treatments, drugs, clinical evidence",
    "technical": "software, programming, systems and engineering",
    "competitive_intelligence": "companies, markets, products, pricing, competitors",
}
TIER_USES: dict[str, str] = {
    "simple": "a single fact or definition",
    "standard": "a usual question that needs several sources",
    "deep": "a broad, contested or multi-part topic",
}


@dataclass(frozen=True)
class LLMLimits:
    """How much of each input goes into a prompt, and when the model server counts as down."""

    max_source_chars: int = 6000  # source text shown to extract
    synthesis_source_chars: int = 1500  # text per numbered source shown to synthesize
    support_source_chars: int = 6000  # source text shown to the citation-support check
    max_prompt_facts: int = 60
    max_prompt_sources: int = 40
    max_prompt_entities: int = 30
    max_facts_per_source: int = 8
    max_entities_per_source: int = 12
    max_questions: int = 2
    unavailable_after: int = 3  # consecutive transport failures before the engine stops calling the model
    call_timeout_s: float = 300.0  # one whole model call, the client's own retry included
    max_answer_tokens: int = 4096  # sent as max_tokens; reserved from the token budget before each call
    max_answer_chars: int = 32_768  # a longer answer is rejected unread (8 characters a token, generously)


@dataclass
class _Outcome(Generic[T]):
    value: T | None
    tokens: int
    error: ErrorResponse | None = None


def _error(error_type: str, message: str, *, retryable: bool) -> ErrorResponse:
    return ErrorResponse(error=ErrorDetail(type=error_type, message=message[:_MAX_ERROR_CHARS], retryable=retryable))


def _reply_tokens(reply: AIMessage, messages: list[BaseMessage], text: str) -> int:
    usage: Mapping[str, Any] = reply.usage_metadata or {}
    total = int(usage.get("total_tokens") or 0) or int(usage.get("input_tokens") or 0) + int(
        usage.get("output_tokens") or 0
    )
    if total > 0:
        return total
    sent = "".join(m.text for m in messages)
    return estimate_text_tokens(sent) + estimate_text_tokens(text)


def _prompt_text(messages: list[BaseMessage]) -> str:
    """The conversation as the server evaluates it, in order (for measuring and predicting its prompt time)."""
    return "\n".join(f"{m.type}: {m.text}" for m in messages)


def _conversation(prompt: RenderedPrompt) -> list[BaseMessage]:
    return [SystemMessage(content=prompt.system), HumanMessage(content=prompt.user)]


def _retry_instruction(problem: str, schema: type[BaseModel]) -> str:
    return (
        f"Your answer could not be used: {problem}\n"
        "Answer again with one JSON object and nothing else (no prose, no code fence), with no keys other "
        f"than those of this JSON Schema:\n{compact_schema(schema)}"
    )


def _unique_queries(queries: Iterable[PlanQuery], exclude: Iterable[str], limit: int) -> list[PlanQuery]:
    seen = {normalize_key(q) for q in exclude}
    kept: list[PlanQuery] = []
    for item in queries:
        key = normalize_key(item.query)
        if not key or key in seen:
            continue
        seen.add(key)
        kept.append(PlanQuery(query=item.query.strip(), intent=item.intent.strip()))
        if len(kept) >= limit:
            break
    return kept


def _bullet_lines(lines: Iterable[str], empty: str = "(none)") -> str:
    text = "\n".join(f"- {line}" for line in lines)
    return text or empty


def clean_answer(answer: str) -> str:
    """The answer without sentences addressed to an assistant and without any sentence said twice."""
    seen: set[str] = set()
    paragraphs: list[str] = []
    for paragraph in answer.strip().split("\n"):
        kept: list[str] = []
        for sentence in _ANSWER_SENTENCE_END.split(paragraph):
            key = normalize_key(_CITATION_MARK.sub("", sentence))
            if not sentence.strip() or (key and key in seen) or is_instruction_like(sentence):
                continue
            seen.add(key)
            kept.append(sentence.strip())
        paragraphs.append(" ".join(kept))
    return re.sub(r"\n{3,}", "\n\n", "\n".join(paragraphs)).strip()


def _model_text_ok(text: str, guard: ContactGuard) -> bool:
    """Free text a model wrote may be kept: not addressed to an assistant, and no URL, e-mail address, phone
    number or street address that the texts behind `guard` (the sources, or the user's own words) do not hold."""
    return not is_instruction_like(text) and guard.allows(text)


def _ranked_facts(facts: list[Fact], limit: int) -> list[Fact]:
    return sorted(facts, key=lambda f: (not f.verified, -f.confidence, -f.relevance))[:limit]


class LLMEngine(ReasoningEngine):
    """A chat model behind the engine interface; the offline engine does any step the model cannot."""

    name = "llm"

    def __init__(
        self,
        chat_model: BaseChatModel,
        *,
        model_spec: str,
        fallback: ReasoningEngine | None = None,
        preflight: Preflight | None = None,
        closers: list[Closer] | None = None,
        limits: LLMLimits | None = None,
        requests: ChatRequests | None = None,
        probe_speed: bool = False,
        template_check: TemplateCheck | None = None,
    ) -> None:
        self._chat = chat_model
        self._probe_speed = probe_speed
        self._template_check = template_check
        self._notes: list[str] = []
        self._requests = requests or prompt_only(model_spec)
        self._model_spec = model_spec
        self._fallback = fallback
        self._preflight = preflight
        self._closers = list(closers or [])
        self._limits = limits or LLMLimits()
        self._transport_failures = 0
        self._last_failure = REASON_UNAVAILABLE  # the kind of the latest transport failure (timeout or error)
        self._tokens_used = 0
        self._reserved = 0  # tokens set aside for calls in flight (prompt + bounded answer)
        self._deadline: float | None = None
        self._deadline_label = "the session's time"
        self._token_ceiling: int | None = None  # `tokens_used` may not pass this
        self._on_fallback: FallbackListener | None = None

    @property
    def model(self) -> str:
        return self._model_spec

    @property
    def tokens_used(self) -> int:
        """Tokens this engine's model calls have cost so far (usage data, or the estimate without it)."""
        return self._tokens_used

    @property
    def notes(self) -> list[str]:
        return list(self._notes)

    @property
    def fallback(self) -> ReasoningEngine:
        """The offline engine (created on first use) that does the steps the model could not."""
        if self._fallback is None:
            from research_tool.engines.offline import OfflineEngine

            self._fallback = OfflineEngine()
        return self._fallback

    async def check(self) -> None:
        """Preflight: raise `EngineUnavailableError` within seconds when the model server is not usable; then
        see whether it formats chats with the model's own template (`template_check`: a note when not), and
        measure its prompt speed when nothing has yet (`probe_speed`)."""
        if self._preflight is not None:
            await self._preflight()
        if self._template_check is not None:
            note = await self._template_check()
            if note is not None and note not in self._notes:
                self._notes.append(note)
        if self._probe_speed and self._requests.timing.tokens_per_s is None:
            await self._probe()

    async def _probe(self) -> None:
        """A short prompt (about 100 tokens) the server evaluates in a moment, read to its first chunk, so the
        session's first real prompt is never sent with no speed known (issue 43: a llama.cpp server evaluated
        that blind prompt to its end, 6-9 s after the session had given up on it). Bounded by PROBE_TIMEOUT_S:
        a server slower than that is taken to be at least twice that slow. A failure is only logged."""
        timing = self._requests.timing
        messages: list[BaseMessage] = [HumanMessage(content=PROBE_PROMPT)]
        call = timing.sent(_prompt_text(messages))
        cancelled = True
        try:
            chunks = self._chat.astream(messages)
            try:
                async with asyncio.timeout(PROBE_TIMEOUT_S):
                    async for chunk in chunks:
                        if isinstance(chunk, AIMessageChunk):
                            timing.first_chunk(call)
                            break  # closing the stream stops the answer: only the prompt was wanted
            finally:
                close = getattr(chunks, "aclose", None)
                if close is not None:
                    with contextlib.suppress(Exception):
                        await close()
            cancelled = False
        except TimeoutError:
            log.info("llm_prompt_speed_probe_timed_out", model=self._model_spec, timeout_s=PROBE_TIMEOUT_S)
        except Exception as exc:
            cancelled = False
            log.debug("llm_prompt_speed_probe_failed", model=self._model_spec, error=repr(exc)[:200])
        finally:
            timing.ended(call, cancelled=cancelled)
        speed = timing.tokens_per_s
        log.info("llm_prompt_speed_probed", model=self._model_spec, tokens_per_s=round(speed, 1) if speed else None)

    async def aclose(self) -> None:
        for close in self._closers:
            try:
                await close()
            except Exception as exc:  # closing is best effort; a dead client must not mask the session's end
                log.debug("llm_client_close_failed", error=repr(exc))
        self._closers.clear()
        if self._fallback is not None:
            await self._fallback.aclose()

    # --- the one path every step takes -------------------------------------------------------------------

    def bound_calls(self, limits: CallLimits, on_fallback: FallbackListener | None = None) -> None:
        self._deadline = limits.deadline
        self._deadline_label = limits.deadline_label
        self._token_ceiling = None if limits.tokens_left is None else self._tokens_used + max(0, limits.tokens_left)
        self._on_fallback = on_fallback

    def _refusal(self, step: str, messages: list[BaseMessage]) -> tuple[ErrorResponse | None, int]:
        """Why this call must not be sent (the session's time is up, the server failed too often in a row, the
        token budget left is short), and the tokens to reserve for it when it may."""
        if self._deadline is not None and time.monotonic() >= self._deadline:
            return _error(REASON_DEADLINE, f"{step}: not sent: {self._deadline_label} is up", retryable=False), 0
        if self._transport_failures >= self._limits.unavailable_after:
            failed = "timed out" if self._last_failure == REASON_TIMEOUT else "failed"
            message = f"{step}: not sent: the model server {failed} {self._transport_failures} times in a row"
            return _error(self._last_failure, message, retryable=True), 0
        too_slow = self._too_slow(step, messages)
        if too_slow is not None:
            return too_slow, 0
        needed = estimate_text_tokens("".join(m.text for m in messages)) + self._limits.max_answer_tokens
        if self._token_ceiling is not None:
            left = self._token_ceiling - self._tokens_used - self._reserved
            if needed > left:
                message = (
                    f"{step}: not sent: the prompt plus a {self._limits.max_answer_tokens}-token answer needs about "
                    f"{needed} tokens and the session's budget has {max(0, left)} left"
                )
                return _error(REASON_TOKENS, message, retryable=False), 0
        return None, needed

    def _too_slow(self, step: str, messages: list[BaseMessage]) -> ErrorResponse | None:
        """Why this prompt must not be sent to this server now: its evaluation, predicted from the server's
        measured prompt speed (and the prompts still ahead of it there), would not end inside the share of the
        call's time it may take; a server that began it would go on after the call is cancelled (issue 35)."""
        timing = self._requests.timing
        predicted = timing.predict(_prompt_text(messages))
        timeout, by_deadline = self._call_timeout()
        if predicted is None or predicted <= PROMPT_TIME_SHARE * timeout:
            return None
        which = self._deadline_label if by_deadline else "the call's time limit (RESEARCH_LLM_TIMEOUT_S)"
        message = (
            f"{step}: not sent: the server evaluates about {timing.tokens_per_s or 0:.0f} prompt tokens a second, "
            f"so this prompt would keep it busy about {predicted:.0f} s and {which} leaves {timeout:.0f} s "
            "(a prompt it has begun goes on after the call is cancelled)"
        )
        reason = REASON_DEADLINE if by_deadline else REASON_TIMEOUT
        return _error(reason, message, retryable=not by_deadline)

    def _fitted(self, prompt: RenderedPrompt | PromptAt) -> RenderedPrompt:
        """The prompt to send: the whole one, or when the server would not evaluate it in time, the largest
        `PROMPT_SHARES` of its sources' text that it would (the smallest when none would: `_refusal` says so)."""
        if isinstance(prompt, RenderedPrompt):
            return prompt
        whole = prompt(1.0)
        if self._too_slow(whole.step, _conversation(whole)) is None:
            return whole
        smaller = whole
        for share in PROMPT_SHARES:
            smaller = prompt(share)
            if self._too_slow(smaller.step, _conversation(smaller)) is None:
                log.info("llm_prompt_trimmed", step=whole.step, model=self.model, share=share)
                return smaller
        return smaller

    def _call_timeout(self) -> tuple[float, bool]:
        """Seconds this call may take, and whether the session's deadline (not the call timeout) sets it."""
        timeout = self._limits.call_timeout_s
        if self._deadline is not None:
            left = self._deadline - time.monotonic()
            if left < timeout:
                return max(0.0, left), True
        return timeout, False

    async def _stream_reply(
        self,
        messages: list[BaseMessage],
        schema: type[BaseModel],
        received: list[AIMessageChunk],
        answer_cap: int | None = None,
    ) -> AIMessage:
        """One model call, streamed (issue 35): a call cancelled or timed out closes its connection, so the
        server stops generating; `received` holds the chunks so far (their tokens count even then). It is sent
        in the strongest structured-output form the server takes, and asked again at once in the next form
        when the server refuses one (`output_format`). `answer_cap`: the answer tokens asked for, when fewer
        than the engine's bound (`_answer_cap`). The answer's speed is measured from its chunks."""
        server = self._requests.server
        timing = self._requests.timing
        text = _prompt_text(messages)
        while True:
            form = server.form
            received.clear()
            call = timing.sent(text)
            cancelled = True  # until the stream ends or fails: a cancel leaves the server evaluating the prompt
            first_at = last_at = 0.0
            try:
                async for chunk in self._chat.astream(
                    messages, **self._requests.kwargs(form, schema, max_tokens=answer_cap)
                ):
                    if isinstance(chunk, AIMessageChunk):
                        last_at = time.monotonic()
                        if not received:
                            first_at = last_at
                            timing.first_chunk(call, last_at)
                        received.append(chunk)
                cancelled = False
            except Exception as exc:
                cancelled = False
                if not received and server.refused(form, exc):
                    continue
                raise
            finally:
                timing.ended(call, cancelled=cancelled)
                # one chunk a token (llama.cpp); a server that sends several in one is measured slower than it is
                timing.answered(len(received) - 1, last_at - first_at)
            if form == server.form:
                server.confirm()
            if not received:
                return AIMessage(content="")
            joined = received[0]
            for chunk in received[1:]:
                joined = joined + chunk
            return joined

    def _answer_cap(self, messages: list[BaseMessage], timeout: float) -> int | None:
        """The answer tokens to ask of this call when fewer than `max_answer_tokens`: what the server writes, at
        its measured answer speed, between the predicted end of the prompt's evaluation and the call's end
        (issue 43: a call whose client was late to hang up streamed 269 tokens past the session's deadline; with
        this cap the server stops by itself). None: the bound as is (answer speed not measured yet, or time for
        a whole answer, or a server not spoken to in the OpenAI protocol)."""
        if self._requests.provider != "openai":
            return None
        timing = self._requests.timing
        prompt_s = timing.predict(_prompt_text(messages)) or 0.0
        cap = timing.answer_cap(timeout - prompt_s)
        return cap if cap is not None and cap < self._limits.max_answer_tokens else None

    def _partial_tokens(self, messages: list[BaseMessage], received: list[AIMessageChunk], *, sent: bool) -> int:
        """What a call that did not finish cost: its prompt and the answer so far (estimated), when the server
        had it (`sent`: cancelled while it worked) or had started answering; counted against the session's
        budget like a whole answer."""
        if not received and not sent:
            return 0
        text = "".join(str(chunk.text) for chunk in received)
        cost = estimate_text_tokens("".join(m.text for m in messages)) + estimate_text_tokens(text)
        self._tokens_used += cost
        return cost

    async def _invoke(
        self, step: str, messages: list[BaseMessage], attempt: int, schema: type[BaseModel]
    ) -> tuple[AIMessage | ErrorResponse, int]:
        """One model call, cancelled when its whole time is up; an error when it failed or ran out, with the
        tokens a call that did not finish cost."""
        timeout, by_deadline = self._call_timeout()
        received: list[AIMessageChunk] = []
        cap = self._answer_cap(messages, timeout)
        if cap is not None:
            log.info("llm_answer_capped", step=step, model=self.model, max_tokens=cap, seconds=round(timeout, 1))
        try:
            async with asyncio.timeout(timeout) as bound:
                reply = await invoke_traced(
                    self._chat,
                    messages,
                    model_spec=self._model_spec,
                    step=step,
                    max_tokens=cap or self._limits.max_answer_tokens,
                    call=lambda: self._stream_reply(messages, schema, received, cap),
                )
        except TimeoutError:
            if not bound.expired():
                raise
            if not by_deadline:
                self._transport_failures += 1  # the server is slow; the session's time running out says nothing
                self._last_failure = REASON_TIMEOUT
            reason = REASON_DEADLINE if by_deadline else REASON_TIMEOUT
            limit = f"{self._deadline_label} ran out" if by_deadline else f"no whole answer within {timeout:.0f} s"
            log.warning("llm_call_cancelled", step=step, model=self.model, attempt=attempt, reason=reason)
            error = _error(reason, f"{step}: the model call was cancelled: {limit}", retryable=not by_deadline)
            return error, self._partial_tokens(messages, received, sent=True)
        except Exception as exc:  # any client or transport failure degrades the step; it never crashes
            self._transport_failures += 1
            self._last_failure = REASON_UNAVAILABLE
            failure = f"{type(exc).__name__}: {exc}"
            log.warning("llm_call_failed", step=step, model=self.model, attempt=attempt, error=failure)
            error = _error(REASON_UNAVAILABLE, f"{step}: the model call failed: {failure}", retryable=True)
            return error, self._partial_tokens(messages, received, sent=False)
        self._transport_failures = 0
        return reply, 0

    async def _ask(self, prompt: RenderedPrompt | PromptAt, schema: type[M], convert: Callable[[M], T]) -> _Outcome[T]:
        """Ask the model for one step's answer. `prompt` given as a function of the share of its sources' text
        may be sent with less of it when the server's prompt speed asks for it (`_fitted`)."""
        fitted = self._fitted(prompt)
        step = fitted.step
        messages = _conversation(fitted)
        tokens = 0
        problem = ""
        for attempt in (1, 2):
            refusal, reserve = self._refusal(step, messages)
            if refusal is not None:
                log.warning(
                    "llm_call_not_sent", step=step, model=self.model, attempt=attempt, reason=refusal.error.type
                )
                return _Outcome(None, tokens, refusal if attempt == 1 else self._after_invalid(step, problem, refusal))
            self._reserved += reserve
            try:
                reply, spent = await self._invoke(step, messages, attempt, schema)
            finally:
                self._reserved -= reserve
            if isinstance(reply, ErrorResponse):
                return _Outcome(None, tokens + spent, reply)
            text = str(reply.text)
            cost = _reply_tokens(reply, messages, text)
            tokens += cost
            self._tokens_used += cost
            try:
                if len(text) > self._limits.max_answer_chars:
                    raise EngineOutputError(
                        f"the answer is {len(text)} characters long, over the bound of "
                        f"{self._limits.max_answer_chars}; answer with the JSON object only, briefly"
                    )
                value = convert(parse_structured(text, schema, instructions=fitted.system))
            except EngineOutputError as exc:
                problem = exc.message
                log.warning("llm_answer_invalid", step=step, model=self.model, attempt=attempt, problem=problem)
                echoed = text if len(text) <= _MAX_ECHOED_ANSWER_CHARS else text[:_MAX_ECHOED_ANSWER_CHARS] + " …"
                messages = [
                    *messages,
                    AIMessage(content=echoed),
                    HumanMessage(content=_retry_instruction(problem, schema)),
                ]
                continue
            if attempt > 1:
                log.info("llm_retry_succeeded", step=step, model=self.model)
            return _Outcome(value, tokens)
        message = f"{step}: the model's answer was invalid twice: {problem}"
        return _Outcome(None, tokens, _error(REASON_OUTPUT, message, retryable=True))

    @staticmethod
    def _after_invalid(step: str, problem: str, refusal: ErrorResponse) -> ErrorResponse:
        """The first answer was invalid and the retry could not be sent: say both."""
        detail = refusal.error.message.removeprefix(f"{step}: not sent: ")
        message = f"{step}: the model's answer was invalid ({problem}); the retry was not sent: {detail}"
        return _error(refusal.error.type, message, retryable=False)

    async def _degrade(
        self,
        outcome: _Outcome[Any],
        step: str,
        run_offline: Callable[[ReasoningEngine], Awaitable[EngineStep[T]]],
    ) -> EngineStep[T]:
        assert outcome.error is not None
        log.warning("llm_step_degraded", step=step, model=self.model, error=outcome.error.error.message)
        if self._on_fallback is not None:
            await self._on_fallback(FallbackNotice(step, outcome.error.error.type, outcome.error.error.message))
        done = await run_offline(self.fallback)
        return done.model_copy(update={"tokens": outcome.tokens + done.tokens, "errors": [*done.errors, outcome.error]})

    # --- clarify ---------------------------------------------------------------------------------------------

    async def clarify(self, query: str, domain_hint: DomainName | None) -> EngineStep[ClarifyResult]:
        prompt = load_prompt("clarify").render(
            query=query,
            domain_hint=domain_hint or "none (pick one)",
            domains=_bullet_lines(f"{name}: {text}" for name, text in DOMAIN_DESCRIPTIONS.items()),
            tiers=_bullet_lines(
                f"{name}: up to {t.max_iterations} cycles, {t.max_queries} queries a cycle, "
                f"{t.max_sources} sources; for {TIER_USES[name]}"
                for name, t in TIERS.items()
            ),
        )

        asked = ContactGuard([query])  # nothing is retrieved yet: only the question's own details may appear

        def convert(answer: ClarifyAnswer) -> ClarifyResult:
            questions = [q.strip() for q in answer.questions if q.strip() and _model_text_ok(q, asked)]
            refined = answer.refined_query.strip()
            reason = answer.tier_reason.strip()
            return ClarifyResult(
                refined_query=refined if _model_text_ok(refined, asked) else query,
                domain=domain_hint or answer.domain,
                questions=questions[: self._limits.max_questions],
                tier=answer.tier,
                tier_reason=reason if _model_text_ok(reason, asked) else "chosen by the model",
            )

        outcome = await self._ask(prompt, ClarifyAnswer, convert)
        if outcome.value is None:
            return await self._degrade(outcome, "clarify", lambda e: e.clarify(query, domain_hint))
        log.info("tier_detected", model=self.model, tier=outcome.value.tier, reason=outcome.value.tier_reason)
        return EngineStep(value=outcome.value, tokens=outcome.tokens)

    async def apply_answers(self, query: str, questions: list[str], answers: list[str]) -> EngineStep[str]:
        exchange = "\n".join(
            f"Q{i}: {q or '(no question)'}\nA{i}: {a or '(no answer)'}"
            for i, (q, a) in enumerate(zip_longest(questions, answers, fillvalue=""), start=1)
        )
        prompt = load_prompt("apply_answers").render(query=query, exchange=exchange or "(none)")
        told = ContactGuard([query, *questions, *answers])

        def convert(answer: ApplyAnswersAnswer) -> str:
            refined = answer.refined_query.strip()
            return refined if _model_text_ok(refined, told) else " ".join([query, *answers]).strip()

        outcome = await self._ask(prompt, ApplyAnswersAnswer, convert)
        if outcome.value is None:
            return await self._degrade(outcome, "apply_answers", lambda e: e.apply_answers(query, questions, answers))
        return EngineStep(value=outcome.value, tokens=outcome.tokens)

    # --- plan ------------------------------------------------------------------------------------------------

    async def plan(self, query: str, domain: DomainConfiguration, max_queries: int) -> EngineStep[PlanResponse]:
        notes = f"prefers {', '.join(domain.provider_order()) or 'any source'}"
        if domain.academic_required:
            notes += "; academic sources required"
        prompt = load_prompt("plan").render(
            query=query, domain=domain.domain, domain_notes=notes, max_queries=max_queries
        )

        def convert(answer: PlanResponse) -> PlanResponse:
            queries = _unique_queries(answer.queries, [], max_queries)
            if not queries:
                raise EngineOutputError("the plan holds no usable query; give at least one non-empty query")
            return PlanResponse(queries=queries)

        outcome = await self._ask(prompt, PlanResponse, convert)
        if outcome.value is None:
            return await self._degrade(outcome, "plan", lambda e: e.plan(query, domain, max_queries))
        return EngineStep(value=outcome.value, tokens=outcome.tokens)

    # --- extract ---------------------------------------------------------------------------------------------

    @property
    def source_chars(self) -> int | None:
        return self._limits.max_source_chars

    async def extract(self, query: str, source: SourceResult, iteration: int) -> EngineStep[ExtractResult]:
        text = source.text()
        if not text.strip():
            return EngineStep(value=ExtractResult())
        limits = self._limits

        def prompt(share: float) -> RenderedPrompt:
            shown = max(1, int(share * limits.max_source_chars))
            return load_prompt("extract").render(
                query=query,
                source=source_block(1, text, title=source.title, url=source.url, max_chars=shown),
                max_facts=limits.max_facts_per_source,
                max_entities=limits.max_entities_per_source,
            )

        guard = ContactGuard([source.url, source.title, text])

        def convert(answer: ExtractAnswer) -> ExtractResult:
            facts: dict[str, Fact] = {}
            for item in answer.facts[: limits.max_facts_per_source]:
                span = find_quote(text, item.quote)
                if span is None or is_instruction_like(span) or not _model_text_ok(item.statement, guard):
                    continue  # not in the source, words addressed to an assistant, or a detail the source lacks
                statement = " ".join(item.statement.split())
                fact_id = Fact.make_id(statement)
                facts.setdefault(
                    fact_id,
                    Fact(
                        id=fact_id,
                        statement=statement,
                        evidence=[Evidence(source_url=source.url, quote=span)],
                        subject=(item.subject or "").strip() or None,
                        relevance=item.relevance,
                        iteration=iteration,
                    ),
                )
            if answer.facts and not facts:
                raise EngineOutputError(
                    "no fact's quote appears in the source; copy each quote exactly, character for character, "
                    "from the text inside <source>"
                )
            entities: dict[str, Entity] = {}
            for entity in answer.entities[: limits.max_entities_per_source]:
                key = normalize_key(entity.name)
                if key and key not in entities and _model_text_ok(entity.name, guard):
                    entities[key] = Entity(
                        key=key,
                        name=" ".join(entity.name.split()),
                        entity_type=entity.type,
                        sources=[source.url],
                        iteration=iteration,
                    )
            dropped = len(answer.facts[: limits.max_facts_per_source]) - len(facts)
            if dropped:
                log.info("llm_facts_dropped", url=source.url, dropped=dropped, reason="quote not in source")
            return ExtractResult(facts=list(facts.values()), entities=list(entities.values()))

        outcome = await self._ask(prompt, ExtractAnswer, convert)
        if outcome.value is None:
            return await self._degrade(outcome, "extract", lambda e: e.extract(query, source, iteration))
        return EngineStep(value=outcome.value, tokens=outcome.tokens)

    # --- reflect ---------------------------------------------------------------------------------------------

    def _follow_trail(
        self, context: ReflectionContext, queries: list[PlanQuery]
    ) -> tuple[list[PlanQuery], dict[str, int]]:
        """Count the entities each new query follows; drop a query that would go past the trail depth.
        Entities already named in the research question are the topic, not a trail."""
        topic = f" {normalize_key(context.query)} "
        followable = [e.key for e in context.entities if e.key and f" {e.key} " not in topic]
        trail = dict(context.trail)
        kept: list[PlanQuery] = []
        for item in queries:
            text = f" {normalize_key(item.query)} "
            followed = [key for key in followable if f" {key} " in text]
            if any(trail.get(key, 0) >= context.max_trail_depth for key in followed):
                continue
            for key in followed:
                trail[key] = trail.get(key, 0) + 1
            kept.append(item)
        return kept, trail

    async def reflect(self, context: ReflectionContext) -> EngineStep[ReflectionOutcome]:
        limits = self._limits
        url_numbers = {s.url: n for n, s in enumerate(context.sources, start=1)}
        facts = _bullet_lines(
            f"{'[verified] ' if f.verified else ''}{escape_data(f.statement)} "
            f"(sources: {', '.join(str(url_numbers.get(u, '?')) for u in f.source_urls)})"
            for f in _ranked_facts(context.facts, limits.max_prompt_facts)
        )
        sources = _bullet_lines(
            f"{n}. {escape_data(truncate(s.title, 160))} ({s.source_name})"
            for n, s in list(enumerate(context.sources, start=1))[: limits.max_prompt_sources]
        )
        top_entities = sorted(context.entities, key=lambda e: -e.mention_count)[: limits.max_prompt_entities]
        entities = _bullet_lines(f"{escape_data(e.name)} ({e.entity_type})" for e in top_entities)
        prompt = load_prompt("reflect").render(
            query=context.query,
            iteration=context.iteration,
            max_queries=context.max_queries,
            facts=facts,
            sources=sources,
            entities=entities,
            queries_run=_bullet_lines(context.queries_run),
            failed_queries=_bullet_lines(context.failed_queries),
        )

        guard = ContactGuard(part for s in context.sources for part in (s.url, s.title, s.text()))

        def convert(answer: ReflectAnswer) -> ReflectionOutcome:
            fresh = _unique_queries(answer.new_queries, context.queries_run, context.max_queries)
            kept, trail = self._follow_trail(context, fresh)
            response = ReflectionResponse(
                sufficient=answer.sufficient,
                confidence=answer.confidence,
                gaps=[g.strip() for g in answer.gaps if g.strip() and _model_text_ok(g, guard)],
                new_queries=[] if answer.sufficient else kept,
                metadata=ResponseMetadata(timestamp=utc_now_iso(), model=self.model, token_count=0),
            )
            return ReflectionOutcome(response=response, trail=trail if not answer.sufficient else dict(context.trail))

        outcome = await self._ask(prompt, ReflectAnswer, convert)
        if outcome.value is None:
            return await self._degrade(outcome, "reflect", lambda e: e.reflect(context))
        value = outcome.value
        metadata = value.response.metadata.model_copy(update={"token_count": outcome.tokens})
        value = value.model_copy(update={"response": value.response.model_copy(update={"metadata": metadata})})
        return EngineStep(value=value, tokens=outcome.tokens)

    # --- synthesize ------------------------------------------------------------------------------------------

    async def synthesize(self, request: SynthesisInput) -> EngineStep[SynthesisDraft]:
        limits = self._limits
        numbers = {ns.source.url: ns.n for ns in request.sources}

        def blocks(share: float) -> str:
            shown = max(1, int(share * limits.synthesis_source_chars))
            return "\n\n".join(
                source_block(ns.n, ns.source.text(), title=ns.source.title, url=ns.source.url, max_chars=shown)
                for ns in request.sources
            )

        facts = _bullet_lines(
            f"{'[verified] ' if f.verified else ''}{escape_data(f.statement)} "
            + "".join(f"[{numbers[u]}]" for u in f.source_urls if u in numbers)
            for f in request.facts[: limits.max_prompt_facts]
        )
        notes = []
        if request.degraded_mode:
            notes.append(DEGRADED_NOTE)
        if request.stop_reason:
            notes.append(f"The research stopped because: {stop_label(request.stop_reason)}.")
        # the same evidence selection as offline
        selection = select_answer(request.query, request.sources, similarity=request.similarity)
        leads = selection.sentences if selection.answered else selection.closest
        answer_sentences = _bullet_lines(f"{escape_data(c.statement)} [{c.n}]" for c in leads)

        def prompt(share: float) -> RenderedPrompt:
            return load_prompt("synthesize").render(
                query=request.query,
                max_findings=request.max_findings,
                notes=" ".join(notes) or "none",
                answer_sentences=answer_sentences or "(none found)",
                sources=blocks(share) or "(no sources were retrieved)",
                facts=facts,
            )

        def convert(answer: SynthesizeAnswer) -> SynthesisDraft:
            text = clean_answer(answer.answer)
            if request.sources and not _CITATION_MARK.search(text):
                raise EngineOutputError(
                    "the answer cites no source; end every sentence that states a fact with [n] citations"
                )
            seen: set[str] = set()
            findings = []
            for f in answer.findings:
                key = normalize_key(_CITATION_MARK.sub("", f.statement))
                if not key or key in seen or is_instruction_like(f.statement):
                    continue
                seen.add(key)
                findings.append(FindingDraft(statement=f.statement.strip(), citations=list(dict.fromkeys(f.citations))))
            return SynthesisDraft(
                answer=text,
                findings=findings[: request.max_findings],
                gaps=list(dict.fromkeys(g.strip() for g in answer.gaps if g.strip())),
                short_answer=(answer.short_answer or "").strip() or None,
                answered=answer.answered,
            )

        outcome = await self._ask(prompt, SynthesizeAnswer, convert)
        if outcome.value is None:
            return await self._degrade(outcome, "synthesize", lambda e: e.synthesize(request))
        return EngineStep(value=outcome.value, tokens=outcome.tokens)

    # --- semantic citation check -----------------------------------------------------------------------------

    async def check_support(self, claim: str, source_text: str) -> EngineStep[bool]:
        """Does `source_text` support `claim`? When the model cannot say (server down, invalid answers twice)
        the value is True (a check that could not run never deletes a claim) and the error is recorded."""

        def prompt(share: float) -> RenderedPrompt:
            shown = max(1, int(share * self._limits.support_source_chars))
            return load_prompt("citation_support").render(
                claim=escape_data(claim.strip()), source=source_block("cited", source_text, max_chars=shown)
            )

        outcome = await self._ask(prompt, SupportAnswer, lambda a: a.supported)
        if outcome.value is None:
            assert outcome.error is not None
            log.warning("citation_support_unchecked", model=self.model, error=outcome.error.error.message)
            return EngineStep(value=True, tokens=outcome.tokens, errors=[outcome.error])
        return EngineStep(value=outcome.value, tokens=outcome.tokens)

    async def supports(self, claim: str, source_text: str) -> bool:
        """True when the model says the source supports the claim (RESEARCH_VERIFY_CITATIONS=semantic)."""
        return (await self.check_support(claim, source_text)).value
