"""The reasoning interface: every engine (offline, llm) implements these six steps.

Nodes call the engine and never care which one it is. Each step returns an `EngineStep` carrying
the value, the tokens it cost (0 for the offline engine) and any structured errors it recovered from
(an LLM engine that fell back to the offline engine for one step reports the model's error here).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from research_tool.models.domain import DomainConfiguration, DomainName
from research_tool.models.entities import Entity, Fact, SourceResult
from research_tool.models.schemas import ErrorResponse, PlanResponse, ReflectionResponse
from research_tool.models.tiers import TierName

T = TypeVar("T")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EngineStep(_Strict, Generic[T]):
    value: T
    tokens: int = 0
    errors: list[ErrorResponse] = Field(default_factory=list)


class ClarifyResult(_Strict):
    refined_query: str
    domain: DomainName
    questions: list[str] = Field(default_factory=list)  # empty: the query is clear enough
    tier: TierName | None = None  # suggested tier when the caller gave none
    tier_reason: str | None = None


class ExtractResult(_Strict):
    facts: list[Fact] = Field(default_factory=list)
    entities: list[Entity] = Field(default_factory=list)


class ReflectionContext(_Strict):
    query: str
    domain: DomainName
    iteration: int  # the cycle that just finished (1-based)
    max_queries: int
    facts: list[Fact]
    entities: list[Entity]
    sources: list[SourceResult]
    queries_run: list[str]  # every query already sent; never send one again
    failed_queries: list[str]  # queries that returned fewer than 3 results
    trail: dict[str, int] = Field(default_factory=dict)  # entity key -> trail depth already followed
    max_trail_depth: int = 2


class ReflectionOutcome(_Strict):
    response: ReflectionResponse
    trail: dict[str, int] = Field(default_factory=dict)  # the updated trail (entities followed by new_queries)
    slots: dict[str, bool] = Field(default_factory=dict)  # required slot -> filled


class NumberedSource(_Strict):
    n: int = Field(ge=1)
    source: SourceResult


class SynthesisInput(_Strict):
    query: str
    sources: list[NumberedSource]  # the citable sources; cite only these numbers
    facts: list[Fact]  # verified first, then by confidence and relevance
    max_findings: int = 10
    degraded_mode: bool = False
    # providers every search of which failed (unreachable): named plainly when other providers answered
    unreachable_providers: list[str] = Field(default_factory=list)
    stop_reason: str | None = None
    # The answer ranker's sentence similarity (`ranker.SentenceSimilarity`: question, sentences -> cosines) when
    # the `semantic` extra's encoder is on; None: the lexical ranker. Not part of the input's data.
    similarity: Callable[[str, Sequence[str]], Sequence[float]] | None = Field(default=None, exclude=True)
    # The answer reader (`answering.AnswerReader`: question, [(sentence, context)] -> probabilities) when the
    # `semantic` extra and the reader's weights are here; None: the lexical ranker alone. Not part of the data.
    reader: Callable[[str, Sequence[tuple[str, str]]], Sequence[float]] | None = Field(default=None, exclude=True)


class FindingDraft(_Strict):
    statement: str
    citations: list[int]  # source numbers


class SynthesisDraft(_Strict):
    answer: str  # markdown with [n] markers; its first sentence answers the question
    findings: list[FindingDraft] = Field(default_factory=list)
    gaps: list[str] = Field(default_factory=list)
    short_answer: str | None = None  # the span that answers (a name, a date, "yes", an API call), or None
    answered: bool = True  # False: the sources found do not answer the question


@dataclass(frozen=True)
class CallLimits:
    """What the session has left for the model calls of the steps that follow (DESIGN §3, issue 14).

    `deadline` is a `time.monotonic()` instant: a call still running then is cancelled and none starts
    after it. `tokens_left` is the token budget left: a call whose prompt plus its bounded answer does not
    fit is never sent. None means unbounded."""

    deadline: float | None = None
    tokens_left: int | None = None
    # What the deadline is, said in a fallback's message ("the session's time", or the model's share of the
    # time before the first search: issue 35)
    deadline_label: str = "the session's time"


# Why a model-backed step fell back to the offline engine: the error type recorded for it.
REASON_TIMEOUT = "model_timeout"  # no whole answer within RESEARCH_LLM_TIMEOUT_S
REASON_DEADLINE = "session_deadline"  # the session's time limit came first (call cancelled or not sent)
REASON_TOKENS = "token_budget"  # the budget left could not cover the prompt plus a bounded answer
REASON_UNAVAILABLE = "engine_unavailable"  # transport failure, HTTP error, or the server given up on
REASON_OUTPUT = "engine_output"  # the answer was invalid twice (or too long)
FALLBACK_REASONS = frozenset({REASON_TIMEOUT, REASON_DEADLINE, REASON_TOKENS, REASON_UNAVAILABLE, REASON_OUTPUT})


@dataclass(frozen=True)
class FallbackNotice:
    """A step the model could not do and the offline engine did instead, and why (`reason` is the error
    type: model_timeout, session_deadline, token_budget, engine_unavailable, engine_output)."""

    step: str
    reason: str
    message: str


FallbackListener = Callable[[FallbackNotice], Awaitable[None]]


class ReasoningEngine(ABC):
    """Both engines are deterministic given the same inputs (the LLM one as far as its model is)."""

    name: str  # "offline" | "llm"

    @property
    def model(self) -> str:
        """Model identifier for the report metadata ("offline" for the offline engine)."""
        return self.name

    @property
    def notes(self) -> list[str]:
        """What the engine noticed about its model that every report made with it should say (a model without a
        chat template: `metadata.model_notes`); known after `check`."""
        return []

    @property
    def source_chars(self) -> int | None:
        """How much of a source's text `extract` reads (its first characters), or None when it reads it all."""
        return None

    @abstractmethod
    async def clarify(self, query: str, domain_hint: DomainName | None) -> EngineStep[ClarifyResult]:
        """Refine the query, detect the domain, and ask questions only if it is genuinely ambiguous."""

    @abstractmethod
    async def apply_answers(self, query: str, questions: list[str], answers: list[str]) -> EngineStep[str]:
        """Fold the user's clarification answers into a refined query."""

    @abstractmethod
    async def plan(self, query: str, domain: DomainConfiguration, max_queries: int) -> EngineStep[PlanResponse]:
        """First cycle's sub-queries, each with an intent."""

    @abstractmethod
    async def extract(self, query: str, source: SourceResult, iteration: int) -> EngineStep[ExtractResult]:
        """Facts (each with the exact quoted span and its source URL) and entities from one source."""

    @abstractmethod
    async def reflect(self, context: ReflectionContext) -> EngineStep[ReflectionOutcome]:
        """Decide sufficiency, list gaps, and propose the next cycle's queries (never one already run)."""

    @abstractmethod
    async def synthesize(self, request: SynthesisInput) -> EngineStep[SynthesisDraft]:
        """An answer paragraph and key findings; every factual sentence carries [n] citations."""

    def bound_calls(self, limits: CallLimits, on_fallback: FallbackListener | None = None) -> None:  # noqa: B027
        """Bound the model calls of the next steps by the session's time and tokens left, and say whom to tell
        when a step falls back. Engines without a model ignore it."""

    async def check(self) -> None:  # noqa: B027 - optional hook
        """Preflight run once at start: raise EngineUnavailableError when the engine cannot work (model
        server down, model missing). The offline engine always can."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release model clients."""
