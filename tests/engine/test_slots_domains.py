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
            "Who directed the film that was shot in Leland, North Carolina in 1986?",
            "When was the Brisbane Institute founded?",
            "Where is Two Dollar Radio based?",
            "How many records has Engelbert Humperdinck sold?",
            "Are Christopher Nolan and Sathish Kalathil both film directors?",
            "Why does subprocess.run raise TimeoutExpired?",
            "How do I run a subprocess with a timeout in Python?",
            "What is asyncio?",
            "Scott Howell has worked with the mayor of what city?",
            "The manuscript is in the hand of a German musician whose godfather is whom?",
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
    slots = required_slots(
        "Which government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
    )
    assert slots[0].kind == "entity" and slots[0].terms == ("government", "position")
    assert any(s.name == "bridge:woman" and s.kind == "person" for s in slots)


def test_comparison_question_needs_each_subject() -> None:
    question = "Are Christopher Nolan and Sathish Kalathil both film directors?"
    names = [s.name for s in required_slots(question)]
    assert "subject:Christopher Nolan" in names and "subject:Sathish Kalathil" in names
    half = evaluate_slots(question, [_fact("Christopher Nolan is a British-American film director and producer.")])
    assert half.filled["subject:Christopher Nolan"] and not half.filled["subject:Sathish Kalathil"]
    full = evaluate_slots(
        question,
        [
            _fact("Christopher Nolan is a British-American film director and producer."),
            _fact("Sathish Kalathil is an Indian film director and producer of documentaries."),
        ],
    )
    assert full.all_filled


def test_person_slot_filled_only_by_a_new_person_in_a_relevant_fact() -> None:
    question = "Who directed the film that was shot in Leland, North Carolina in 1986?"
    weak = evaluate_slots(question, [_fact("Maximum Overdrive was written and directed by Stephen King.", 0.1)])
    assert not weak.filled["answer"]
    strong = evaluate_slots(question, [_fact("Maximum Overdrive was written and directed by Stephen King.")])
    assert strong.filled["answer"] and strong.fillers["answer"] == "Stephen King"


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
