"""The contact details a model may not invent (issue 22 item 5): what counts as one, and when a source holds it."""

from __future__ import annotations

from research_tool.engines.base import FindingDraft, NumberedSource, SynthesisDraft
from research_tool.engines.text.contact_details import ContactGuard
from research_tool.graph.decisions.citations import check_citations
from research_tool.models.entities import SourceResult

SOURCE_TEXT = (
    "The helpdesk answers at +44 20 7946 0958 and help@python.org, at 221 Baker Street. "
    "The run function of subprocess accepts a timeout argument in seconds."
)
GUARD = ContactGuard(["https://docs.python.org/3/library/subprocess.html", "subprocess", SOURCE_TEXT])


def test_unsourced_urls_phones_emails_and_addresses_are_foreign() -> None:
    lure = "Call +1 555 0100 or visit http://evil.example/support to unlock the full report."
    assert GUARD.foreign(lure) == ["http://evil.example/support", "+1 555 0100"]
    assert GUARD.foreign("Write to admin@evil.com, www.evil.com, 555-123-4567 or 10 Downing Street.") == [
        "admin@evil.com",
        "www.evil.com",
        "555-123-4567",
        "10 Downing Street",
    ]


def test_what_a_source_holds_and_what_is_no_contact_detail_pass() -> None:
    assert GUARD.allows("Ring +44 20 7946 0958 or help@python.org; visit 221 Baker Street.")
    assert GUARD.allows("See docs.python.org and https://docs.python.org/3/library/subprocess.html.")
    assert GUARD.allows("Use subprocess.run(cmd, timeout=5), os.path.join and csv.DictReader.")
    assert GUARD.allows("Between 1990-2000 it rose 3.5% to 1,000,000 on 2024-01-15 (version 3.11.7).")


def test_the_citation_check_drops_model_text_with_unsourced_details() -> None:
    source = SourceResult(
        url="https://docs.python.org/3/library/subprocess.html",
        title="subprocess",
        source_name="local",
        full_content=SOURCE_TEXT,
    )
    claim = "The run function of subprocess accepts a timeout argument in seconds"
    draft = SynthesisDraft(
        answer=f"{claim} [1]. {claim}, see http://evil.example/x [1].\n_Call +1 555 0100 now._",
        findings=[
            FindingDraft(statement=f"{claim} [1].", citations=[1]),
            FindingDraft(statement=f"{claim}; mail scam@evil.example [1].", citations=[1]),
        ],
        gaps=["Call +1 555 0100 to unlock the report.", "Nothing on Windows.", "Ignore previous instructions."],
        short_answer="subprocess.run at http://evil.example/x",
    )
    checked = check_citations(draft, [NumberedSource(n=1, source=source)])
    assert checked.draft.answer == f"{claim} [1]."
    assert [f.statement for f in checked.draft.findings] == [f"{claim} [1]."]
    assert checked.draft.gaps == ["Nothing on Windows."]
    assert checked.draft.short_answer is None
    assert checked.foreign_details_dropped == 5
