"""The exact JSON each LLM step must answer with (strict: unknown keys are errors).

Plan answers with the seed's `PlanResponse` as is. Reflection answers with the seed's `ReflectionResponse`
minus `metadata` (timestamp, model and token count are facts the engine knows and the model does not; the
engine fills them in); synthesis answers with the answer text, its citations, and the report's findings and
gaps. Clarify, apply-answers, extract and citation-support have no seed schema and are defined here. The
prompt files in `engines/prompts/` show these same shapes to the model.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from research_tool.models.domain import DomainName
from research_tool.models.entities import EntityType
from research_tool.models.schemas import CitationRef, PlanQuery
from research_tool.models.tiers import TierName


class _Answer(BaseModel):
    """Strict: no unknown keys and no coercion ("yes" is not a bool, "0.9" not a float, "2" not an int)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ClarifyAnswer(_Answer):
    refined_query: str = Field(min_length=1)
    domain: DomainName
    questions: list[str] = Field(default_factory=list, max_length=3)
    tier: TierName
    tier_reason: str = Field(min_length=1)


class ApplyAnswersAnswer(_Answer):
    refined_query: str = Field(min_length=1)


class ExtractedFact(_Answer):
    statement: str = Field(min_length=1)
    quote: str = Field(min_length=1)  # copied exactly from the source text
    subject: str | None = None
    relevance: float = Field(default=0.5, ge=0.0, le=1.0)


class ExtractedEntity(_Answer):
    name: str = Field(min_length=1)
    type: EntityType = "other"


class ExtractAnswer(_Answer):
    """Both lists are required (empty when the source says nothing useful): `{}` is not an answer."""

    facts: list[ExtractedFact]
    entities: list[ExtractedEntity]


class ReflectAnswer(_Answer):
    """`ReflectionResponse` without `metadata`."""

    sufficient: bool
    confidence: float = Field(ge=0.0, le=1.0)
    gaps: list[str] = Field(default_factory=list)
    new_queries: list[PlanQuery] = Field(default_factory=list)


class FindingAnswer(_Answer):
    statement: str = Field(min_length=1)
    citations: list[int] = Field(min_length=1)


class SynthesizeAnswer(_Answer):
    """The answer text with its citations, plus findings and gaps. `citations` may be left out: the report
    builds its citation list from the retrieved sources, never from the model."""

    answer: str = Field(min_length=1)
    findings: list[FindingAnswer] = Field(default_factory=list)
    gaps: list[str] = Field(default_factory=list)
    citations: list[CitationRef] = Field(default_factory=list)
    short_answer: str | None = None  # the span that answers (a name, a date, "yes"/"no", an API call)
    answered: bool = True  # false when the sources do not answer the question


class SupportAnswer(_Answer):
    supported: bool
    reason: str = ""
