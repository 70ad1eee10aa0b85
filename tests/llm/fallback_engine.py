"""A stand-in for the offline engine in the LLM tests: recognizable answers, and a record of what it did.

The LLM engine hands a step to its fallback when the model fails; these tests need to see that hand-over
happen (and which step it was) without depending on the offline engine's own output.
"""

from __future__ import annotations

from research_tool.engines.base import (
    ClarifyResult,
    EngineStep,
    ExtractResult,
    ReasoningEngine,
    ReflectionContext,
    ReflectionOutcome,
    SynthesisDraft,
    SynthesisInput,
)
from research_tool.models.domain import DomainConfiguration, DomainName
from research_tool.models.entities import SourceResult, utc_now_iso
from research_tool.models.schemas import PlanQuery, PlanResponse, ReflectionResponse, ResponseMetadata

OFFLINE_INTENT = "offline stand-in"
OFFLINE_ANSWER = "Answer written by the offline stand-in."


class RecordingFallback(ReasoningEngine):
    name = "offline"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.closed = False

    async def clarify(self, query: str, domain_hint: DomainName | None) -> EngineStep[ClarifyResult]:
        self.calls.append("clarify")
        return EngineStep(value=ClarifyResult(refined_query=query, domain=domain_hint or "general"))

    async def apply_answers(self, query: str, questions: list[str], answers: list[str]) -> EngineStep[str]:
        self.calls.append("apply_answers")
        return EngineStep(value=" ".join([query, *answers]))

    async def plan(self, query: str, domain: DomainConfiguration, max_queries: int) -> EngineStep[PlanResponse]:
        self.calls.append("plan")
        return EngineStep(value=PlanResponse(queries=[PlanQuery(query=query, intent=OFFLINE_INTENT)]))

    async def extract(self, query: str, source: SourceResult, iteration: int) -> EngineStep[ExtractResult]:
        self.calls.append("extract")
        return EngineStep(value=ExtractResult())

    async def reflect(self, context: ReflectionContext) -> EngineStep[ReflectionOutcome]:
        self.calls.append("reflect")
        metadata = ResponseMetadata(timestamp=utc_now_iso(), model="offline", token_count=0)
        response = ReflectionResponse(sufficient=True, confidence=0.0, gaps=[], new_queries=[], metadata=metadata)
        return EngineStep(value=ReflectionOutcome(response=response))

    async def synthesize(self, request: SynthesisInput) -> EngineStep[SynthesisDraft]:
        self.calls.append("synthesize")
        return EngineStep(value=SynthesisDraft(answer=OFFLINE_ANSWER))

    async def aclose(self) -> None:
        self.closed = True
