from research_tool.engines.text.domains import ambiguity_questions, detect_domain
from research_tool.engines.text.slots import evaluate_slots, required_slots
from research_tool.models.entities import Evidence, Fact


def _fact(statement: str, relevance: float = 0.6) -> Fact:
    return Fact(
        id=Fact.make_id(statement),
        statement=statement,
        evidence=[Evidence(source_url="file:///x", quote=statement)],
        relevance=relevance,
    )


def test_slots_of_typical_questions() -> None:
    kinds = {
        q: required_slots(q)[0].kind
        for q in [
            "Who designed the bridge that was built across the Orla river in 1952?",
            "When was the Marlow Rowing Club founded?",
            "Where is Bellwether Press based?",
            "How many copies has the novel Salt Harbour sold?",
            "Are Petra Lindqvist and Omar Haddad both architects?",
            "Why does subprocess.run raise TimeoutExpired?",
            "How do I run a subprocess with a timeout in Python?",
            "What is asyncio?",
            "Mira Castell has worked with the mayor of what city?",
            "The letter is in the hand of a Dutch poet whose teacher is whom?",
        ]
    }
    assert list(kinds.values()) == [
        "person",
        "date",
        "place",
        "number",
        "yes_no",
        "reason",
        "method",
        "definition",
        "place",
        "person",
    ]


def test_bridge_slot_and_which_slot() -> None:
    slots = required_slots("Which academic position was held by the woman who designed the Orla Bridge in Marlow?")
    assert slots[0].kind == "entity" and slots[0].terms == ("academic", "position")
    assert any(s.name == "bridge:woman" and s.kind == "person" for s in slots)


def test_comparison_question_needs_each_subject() -> None:
    question = "Are Petra Lindqvist and Omar Haddad both architects?"
    names = [s.name for s in required_slots(question)]
    assert "subject:Petra Lindqvist" in names and "subject:Omar Haddad" in names
    half = evaluate_slots(question, [_fact("Petra Lindqvist is a Swedish architect and urban planner.")])
    assert half.filled["subject:Petra Lindqvist"] and not half.filled["subject:Omar Haddad"]
    full = evaluate_slots(
        question,
        [
            _fact("Petra Lindqvist is a Swedish architect and urban planner."),
            _fact("Omar Haddad is a Lebanese architect who designs public libraries."),
        ],
    )
    assert full.all_filled


def test_person_slot_filled_only_by_a_new_person_in_a_relevant_fact() -> None:
    question = "Who directed the film that was shot in the town of Marlow in 1971?"
    weak = evaluate_slots(question, [_fact("Harbour Lights was written and directed by Robert Weiss.", 0.1)])
    assert not weak.filled["answer"]
    strong = evaluate_slots(question, [_fact("Harbour Lights was written and directed by Robert Weiss.")])
    assert strong.filled["answer"] and strong.fillers["answer"] == "Robert Weiss"


def test_domain_detection() -> None:
    assert detect_domain("How do I configure the Python logging module?") == "technical"
    assert detect_domain("clinical trial results for semaglutide in patients") == "medical"
    assert detect_domain("Who painted the ceiling of the Sistine Chapel?") == "general"
    assert detect_domain("anything at all", "academic") == "academic"


def test_clarify_asks_only_when_genuinely_ambiguous() -> None:
    assert len(ambiguity_questions("python")) == 2
    assert "programming language" in ambiguity_questions("python")[0]
    assert "stand for" in ambiguity_questions("ML")[0]
    assert ambiguity_questions("python decorators") == []
    assert ambiguity_questions("How does the Python garbage collector handle reference cycles?") == []
    assert ambiguity_questions("NASA") == []
