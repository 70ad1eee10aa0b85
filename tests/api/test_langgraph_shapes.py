"""The chat-facing shapes of the LangGraph routes, as pure functions: the answer message's sources as a markdown
list (links for web sources, a local file's path in code, brackets in titles escaped), and the clarification
answers read from every resume shape the clients send (Command(resume=...), a chat UI form's decisions)."""

from __future__ import annotations

from typing import Any

import pytest

from research_tool.api.langgraph.bodies import resume_answers
from research_tool.api.langgraph.shapes import answer_with_sources


def test_sources_are_a_markdown_list_with_links_for_web_sources() -> None:
    report = {
        "answer": "Use subprocess.run with timeout= [1][2].",
        "citations": [
            {"id": "[1]", "title": "subprocess [docs]", "url": "https://docs.python.org/3/library/subprocess.html"},
            {"id": "[2]", "title": "notes.md", "url": "file:///home/me/my%20notes/notes.md"},
        ],
    }
    text = answer_with_sources(report)
    answer, sources = text.split("\n\n**Sources:**\n\n")
    assert answer == report["answer"]
    assert sources.splitlines() == [
        r"- [1] [subprocess \[docs\]](<https://docs.python.org/3/library/subprocess.html>)",
        "- [2] notes.md: `/home/me/my notes/notes.md`",
    ]
    assert answer_with_sources({"answer": "no sources"}) == "no sources"


@pytest.mark.parametrize(
    ("resume", "answers"),
    [
        ("the language", ["the language"]),
        (["a", " ", "b"], ["a", "b"]),
        ({"answers": ["a"]}, ["a"]),
        ({"some-interrupt-id": "a"}, ["a"]),
        (
            {"decisions": [{"type": "edit", "edited_action": {"name": "clarify", "args": {"q1?": "a", "q2?": ""}}}]},
            ["a"],
        ),
        ({"decisions": [{"type": "reject", "message": "the snake"}]}, ["the snake"]),
        ({"decisions": [{"type": "approve"}]}, []),
    ],
)
def test_clarification_answers_from_every_resume_shape(resume: Any, answers: list[str]) -> None:
    assert resume_answers(resume) == answers
