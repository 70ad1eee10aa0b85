"""Readers for the recorded provider responses in tests/fixtures/ (see each folder's SOURCE.md)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .replay import Reply

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@dataclass(frozen=True)
class Recorded:
    uri: str
    method: str
    status: int
    body: bytes
    content_type: str

    def reply(self, **overrides: Any) -> Reply:
        return Reply(
            status=overrides.pop("status", self.status), body=self.body, content_type=self.content_type, **overrides
        )


def fixture_path(*parts: str) -> Path:
    return FIXTURES.joinpath(*parts)


def _header(headers: dict[str, Any], name: str) -> str | None:
    for key, value in (headers or {}).items():
        if key.lower() == name:
            return value[0] if isinstance(value, list) else str(value)
    return None


def vcr_interactions(*parts: str) -> list[Recorded]:
    """VCR.py cassettes: pydantic-ai's `parsed_body:`, standard `body: {string:}`, or httpx-style `content:`."""
    data = yaml.safe_load(fixture_path(*parts).read_text(encoding="utf-8"))
    recorded = []
    for interaction in data["interactions"]:
        request, response = interaction["request"], interaction["response"]
        if "parsed_body" in response:
            body = json.dumps(response["parsed_body"]).encode()
        elif isinstance(response.get("body"), dict):
            body = str(response["body"].get("string", "")).encode()
        else:
            body = str(response.get("content", "")).encode()
        status = response["status"]["code"] if "status" in response else response["status_code"]
        content_type = _header(response.get("headers", {}), "content-type") or "application/json"
        recorded.append(Recorded(request["uri"], request["method"], int(status), body, content_type))
    return recorded


def arxiv_recording(name: str) -> Recorded:
    """arxiv.py's fixtures: {url, status_code, body} with the Atom body stored latin-1 decoded."""
    data = json.loads(fixture_path("arxiv", name).read_text(encoding="utf-8"))
    return Recorded(
        data["url"],
        "GET",
        int(data["status_code"]),
        data["body"].encode("latin-1"),
        "application/atom+xml; charset=UTF-8",
    )


def raw_bytes(*parts: str) -> bytes:
    return fixture_path(*parts).read_bytes()


def raw_json(*parts: str) -> Any:
    return json.loads(fixture_path(*parts).read_text(encoding="utf-8"))


def rvcr_interactions(*parts: str) -> list[Recorded]:
    """R vcr JSON cassettes (the Wikipedia recording)."""
    data = raw_json(*parts)
    recorded = []
    for interaction in data["http_interactions"]:
        response = interaction["response"]
        status = response["status"]
        code = status["status_code"] if isinstance(status, dict) else int(status)
        headers = response.get("headers") or {}
        content_type = _header(headers, "content-type") or "application/json"
        recorded.append(
            Recorded(
                interaction["request"]["uri"],
                interaction["request"]["method"].upper(),
                int(code),
                response["body"]["string"].encode("utf-8"),
                content_type,
            )
        )
    return recorded
