"""Clarification: an ambiguous question pauses the graph (awaiting_clarification with questions);
POST /clarify resumes it and the refined question uses the answers; with no answer in time it goes on
with the original question."""

from __future__ import annotations

from pathlib import Path

import pytest

from research_tool.bench.wiki_replay import WikiReplay

from .conftest import LiveApi, offline_settings, serve


async def test_answers_resume_the_session_and_refine_the_question(api: LiveApi) -> None:
    sid = await api.start(query="Python", clarify=True)
    waiting = await api.wait_status(sid, "awaiting_clarification")
    assert waiting["pending_questions"] and any("Python" in q for q in waiting["pending_questions"])
    assert waiting["current_phase"] is None or waiting["current_phase"] == "clarify"

    response = await api.client.post(
        f"/api/research/{sid}/clarify", json={"answers": ["the programming language", "subprocess timeouts"]}
    )
    assert response.status_code == 202
    assert response.json()["session_id"] == sid

    done = await api.wait_status(sid, "completed")
    assert done["pending_questions"] == []
    report = await api.report(sid)
    assert "the programming language" in report["refined_query"]
    assert "subprocess timeouts" in report["refined_query"]
    events = [(e.type, e.phase) for e in await api.services.events.replay(sid)]
    asked = events.index(("clarification_requested", "clarify"))
    answered = events.index(("clarification_received", "clarify"))
    assert asked < answered < events.index(("phase_started", "plan"))
    assert ("clarification_timeout", "clarify") not in events

    again = await api.client.post(f"/api/research/{sid}/clarify", json={"answers": ["too late"]})
    assert again.status_code == 409


@pytest.mark.slow
async def test_without_an_answer_the_session_goes_on_after_the_timeout(
    tmp_path: Path, wiki: tuple[str, WikiReplay]
) -> None:
    async with serve(offline_settings(tmp_path / "data", wiki[0], clarify_timeout_s=1.0)) as api:
        sid = await api.start(query="Python", clarify=True)
        await api.wait_status(sid, "awaiting_clarification")
        done = await api.wait_status(sid, "completed")
        assert done["pending_questions"] == []
        report = await api.report(sid)
        assert report["refined_query"] == "Python"
        types = [e.type for e in await api.services.events.replay(sid)]
        assert "clarification_timeout" in types and "clarification_received" not in types


async def test_a_clear_question_is_not_questioned(api: LiveApi) -> None:
    sid = await api.start(clarify=True)
    await api.wait_status(sid, "completed")
    types = [e.type for e in await api.services.events.replay(sid)]
    assert "clarification_requested" not in types


async def test_stop_while_awaiting_answers_still_reports(api: LiveApi) -> None:
    sid = await api.start(query="Python", clarify=True)
    await api.wait_status(sid, "awaiting_clarification")
    assert (await api.client.post(f"/api/research/{sid}/stop")).status_code == 202
    done = await api.wait_status(sid, "completed")
    assert done["stop_reason"] == "user_requested"
