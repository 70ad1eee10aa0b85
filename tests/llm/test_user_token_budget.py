"""A user's model tokens (issue 44): a session on a model spends tokens; the report's metadata prices them with
RESEARCH_PRICE_TABLE (`cost_usd`), the tokens are written to the audit log with the user's name before the session
is marked finished, and RESEARCH_USER_MAX_TOKENS_PER_DAY then refuses a start whose budget no longer fits (429)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from research_tool.demo_corpus import build_demo_corpus
from research_tool.runtime.backends import open_users
from tests.api.conftest import serve

from .conftest import llm_settings
from .scripted_answers import script_session
from .servers import OpenAIServer

QUESTION = "How do I run a subprocess with a timeout and capture its output?"
BUDGET = 30_000
PRICE = 2.5  # USD per million tokens


async def test_tokens_are_priced_counted_per_user_and_held_to_the_daily_budget(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    build_demo_corpus(corpus, modules=("subprocess", "shlex"))
    with OpenAIServer() as server:
        script_session(server, sufficient_after=2)
        server.usage = (2000, 1000)
        settings = llm_settings(
            "openai",
            server.base_url,
            data_dir=tmp_path / "data",
            corpus_dirs=str(corpus),
            token_budget=BUDGET,
            user_max_tokens_per_day=BUDGET,  # room for one session's budget a day
            price_table=json.dumps({"openai:test-model": PRICE}),
        )
        async with open_users(settings) as users:
            key = await users.add("alice")
        body = {
            "query": QUESTION,
            "providers": ["local"],
            "corpus_dirs": [str(corpus)],
            "fetch": False,
            "privacy_mode": "local_only",
            "tier": "simple",
        }
        async with serve(settings, headers={"X-Api-Key": key}) as live:
            started = await live.client.post("/api/research/start", json=body)
            assert started.status_code == 202, started.text
            sid = started.json()["session_id"]
            # while it runs, its whole budget is reserved: a second start does not fit
            second = await live.client.post("/api/research/start", json=body)
            assert second.status_code == 429 and "RESEARCH_USER_MAX_TOKENS_PER_DAY" in second.text
            await live.services.runner.until_finished(sid)
            report = await live.report(sid)
            spent = report["metadata"]["token_count"]
            assert spent > 0
            assert report["metadata"]["cost_usd"] == pytest.approx(spent * PRICE / 1_000_000)
            lines = [r for r in await live.services.users.audit_rows() if r.action == "tokens"]
            assert [(r.actor, r.target, r.detail) for r in lines] == [("alice", sid, str(spent))]
            # spent today + one more budget is over the day's tokens: refused until midnight UTC
            third = await live.client.post("/api/research/start", json=body)
            assert third.status_code == 429, third.text
            assert f"has spent {spent} model tokens today" in third.json()["error"]["message"]
            assert int(third.headers["retry-after"]) >= 1
