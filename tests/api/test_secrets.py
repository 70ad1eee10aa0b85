"""Provider keys and the API token are secrets: the settings never show them (repr, dumps, logs), and no
/api/... response carries them, while the token still opens the API and the keys still reach providers."""

from __future__ import annotations

from pathlib import Path

import pytest

from research_tool.bench.wiki_replay import WikiReplay
from research_tool.core.settings import Settings, secret_value

from .conftest import OK_BODY, offline_settings, serve

TOKEN = "token-4b1d-never-shown"
KEYS = {
    "tavily_api_key": "tvly-key-never-shown",
    "exa_api_key": "exa-key-never-shown",
    "brave_api_key": "brave-key-never-shown",
    "semantic_scholar_api_key": "s2-key-never-shown",
    "ncbi_api_key": "ncbi-key-never-shown",
    "openai_api_key": "sk-key-never-shown",
    "anthropic_api_key": "sk-ant-key-never-shown",
}
SECRETS = [TOKEN, *KEYS.values()]


def test_settings_show_no_secret() -> None:
    settings = Settings(_env_file=None, api_token=TOKEN, **KEYS)  # type: ignore[arg-type, call-arg]
    shown = " ".join([repr(settings), str(settings), settings.model_dump_json(), str(settings.model_dump())])
    assert not [s for s in SECRETS if s in shown]
    assert secret_value(settings.api_token) == TOKEN
    assert secret_value(settings.tavily_api_key) == KEYS["tavily_api_key"]


def test_an_empty_secret_is_no_secret() -> None:
    settings = Settings(_env_file=None, api_token="", tavily_api_key="")  # type: ignore[call-arg]
    assert secret_value(settings.api_token) is None and secret_value(settings.tavily_api_key) is None


async def test_no_api_response_and_no_log_line_carries_a_secret(
    tmp_path: Path, wiki: tuple[str, WikiReplay], capfd: pytest.CaptureFixture[str]
) -> None:
    settings = offline_settings(tmp_path / "data", wiki[0], api_token=TOKEN, log_level="DEBUG", **KEYS)
    async with serve(settings, headers={"Authorization": f"Bearer {TOKEN}"}) as api:
        sid = await api.start()
        await api.wait_status(sid, "completed")
        bodies = [
            (await api.client.get(path)).text
            for path in (
                "/api/research",
                f"/api/research/{sid}/status",
                f"/api/research/{sid}/report?format=json",
                f"/api/research/{sid}/report?format=md",
                f"/api/research/{sid}/events",
                "/openapi.json",
                "/metrics",
            )
        ]
        unauthorized = await api.client.post("/api/research/start", json=OK_BODY, headers={"Authorization": "Bearer x"})
    assert unauthorized.status_code == 401
    bodies.append(unauthorized.text)
    logs = capfd.readouterr()
    assert all(bodies)
    leaked = [s for s in SECRETS if any(s in text for text in [*bodies, logs.out, logs.err])]
    assert leaked == []
