"""What the web page needs from the API: GET /api/providers, the static shells (/, /docs, /redoc and
their assets, served from the package with no outside URL), a start with no provider able to search
refused with a 400, and /metrics agreeing with the sessions table."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

from research_tool.api.routes.pages import static_dir
from research_tool.bench.wiki_replay import WikiReplay
from research_tool.models.request import SEARCH_PROVIDERS

from .conftest import LiveApi, offline_settings, serve

OUTSIDE_URL = re.compile(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", re.IGNORECASE)


def metric_samples(text: str) -> dict[str, float]:
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


async def test_providers_lists_every_provider_with_why_it_cannot_be_used(
    tmp_path: Path, wiki: tuple[str, WikiReplay]
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    async with serve(offline_settings(tmp_path / "data", wiki[0], corpus_dirs=str(corpus))) as api:
        body = (await api.client.get("/api/providers")).json()
    rows = {row["name"]: row for row in body["providers"]}
    assert list(rows) == list(SEARCH_PROVIDERS)
    assert rows["tavily"]["available"] is False and "TAVILY_API_KEY" in rows["tavily"]["reason"]
    assert rows["tavily"]["key_present"] is False and rows["tavily"]["privacy"] == "cloud"
    assert rows["local"] == {
        "name": "local",
        "available": True,
        "reason": None,
        "privacy": "local",
        "kind": "local",
        "key_present": None,
    }


async def test_without_a_corpus_folder_local_is_unavailable(api: LiveApi) -> None:
    rows = {row["name"]: row for row in (await api.client.get("/api/providers")).json()["providers"]}
    assert rows["local"]["available"] is False and "RESEARCH_CORPUS_DIRS" in rows["local"]["reason"]


async def test_a_session_with_no_provider_able_to_search_is_refused_at_start(api: LiveApi) -> None:
    """Regression: local_only with no corpus folder used to "complete" as fact_saturation with 0 sources."""
    refused = await api.client.post(
        "/api/research/start", json={"query": "How do I read a file?", "privacy_mode": "local_only"}
    )
    assert refused.status_code == 400, refused.text
    message = refused.json()["error"]["message"]
    assert "no provider can search" in message and "local_only" in message and "no corpus folder" in message
    assert (await api.client.get("/api/research")).json()["total"] == 0


async def test_local_only_with_the_servers_corpus_starts(tmp_path: Path, wiki: tuple[str, WikiReplay]) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "files.txt").write_text("Reading files\n\nopen() returns a file object; read() reads it whole.\n")
    async with serve(offline_settings(tmp_path / "data", wiki[0], corpus_dirs=str(corpus))) as api:
        started = await api.client.post(
            "/api/research/start",
            json={"query": "How do I read a file?", "privacy_mode": "local_only", "tier": "simple"},
        )
        assert started.status_code == 202, started.text
        done = await api.wait_status(started.json()["session_id"], "completed")
        assert done["sources_found"] >= 1


async def test_metrics_agree_with_the_sessions_table(api: LiveApi) -> None:
    """Regression: with one session awaiting clarification /metrics said research_sessions_running 1 while
    research_sessions{status="running"} said 0."""
    done = await api.start()
    await api.wait_status(done, "completed")
    waiting = await api.start(query="Python", clarify=True)
    await api.wait_status(waiting, "awaiting_clarification")

    samples = metric_samples((await api.client.get("/metrics")).text)
    async with api.services.conn.execute("SELECT status, COUNT(*) FROM sessions GROUP BY status") as cursor:
        table = {str(status): int(count) for status, count in await cursor.fetchall()}
    assert table == {"completed": 1, "awaiting_clarification": 1}
    for status in ("queued", "running", "awaiting_clarification", "stopping", "completed", "failed"):
        assert samples[f'research_sessions{{status="{status}"}}'] == table.get(status, 0), status
    assert samples["research_sessions_running"] == samples['research_sessions{status="running"}'] == 0
    # the session waiting for answers still holds one of the runner's slots, and says so under its own name
    assert samples["research_session_slots_in_use"] == 1 == api.services.runner.running_count


async def test_the_page_and_the_docs_are_public_shells_with_nothing_from_outside(
    tmp_path: Path, wiki: tuple[str, WikiReplay]
) -> None:
    async with serve(offline_settings(tmp_path / "data", wiki[0], api_token="page-token")) as api:
        for path, media in (("/", "text/html"), ("/docs", "text/html"), ("/redoc", "text/html")):
            response = await api.client.get(path)
            assert response.status_code == 200 and response.headers["content-type"].startswith(media), path
            assert "default-src 'self'" in response.headers["content-security-policy"]
            assert not OUTSIDE_URL.search(response.text), path
        assert "script-src 'self';" in (await api.client.get("/")).headers["content-security-policy"]
        for asset in (
            "/static/app.js",
            "/static/app.css",
            "/docs-assets/swagger-ui-bundle.js",
            "/docs-assets/redoc.standalone.js",
        ):
            assert (await api.client.get(asset)).status_code == 200, asset
        # the data behind the shells still needs the token
        assert (await api.client.get("/openapi.json")).status_code == 401
        assert (await api.client.get("/api/providers")).status_code == 401
    for page in static_dir().iterdir():
        if page.suffix in (".html", ".js", ".css"):
            assert not OUTSIDE_URL.search(page.read_text(encoding="utf-8")), page.name
            assert "innerHTML" not in page.read_text(encoding="utf-8"), page.name


def test_a_wheel_ships_every_file_of_the_page() -> None:
    """pyproject's package-data must cover api/static/ (a wheel without them serves a 404 at `/`)."""
    root = Path(__file__).resolve().parents[2]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "research_tool"
    ]
    package = static_dir().parents[1]  # research_tool/
    files = [p for p in static_dir().rglob("*") if p.is_file()]
    assert {"index.html", "app.js", "docs.html", "redoc.html"} <= {p.name for p in files}
    for path in files:
        relative = path.relative_to(package).as_posix()
        assert any(fnmatch.fnmatchcase(relative, pattern) for pattern in patterns), relative
