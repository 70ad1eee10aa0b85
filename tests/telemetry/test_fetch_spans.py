"""Page fetches as spans (issue 36): a `page.fetch` client span per fetch, a child of the node that asked, with
the host, the HTTP status, the bytes read, its retries as events and the obstacle that stopped it; the URL itself
only with the content flag. And with tracing off, no span and no cost: the no-op object."""

from __future__ import annotations

import time

import httpx
import pytest
import structlog

from research_tool.core import telemetry
from research_tool.core.errors import AccessDeniedError
from research_tool.core.settings import Settings
from research_tool.providers.fetching.crawler import Crawler
from research_tool.providers.http_client import create_http_client
from tests.providers.replay import ReplayServer, Reply
from tests.support.otlp_receiver import OtlpReceiver

HTML = "text/html; charset=utf-8"
PAGE = "<html><head><title>T</title></head><body><p>" + "A paragraph of ordinary text. " * 20 + "</p></body></html>"


async def test_page_fetches_are_spans_with_host_status_bytes_retries_and_obstacle(otlp: OtlpReceiver) -> None:
    with ReplayServer() as site:
        site.route("/page", Reply(503), Reply(200, body=PAGE, content_type=HTML))
        site.route("/denied", Reply(403, body="no", content_type=HTML))
        http = create_http_client()
        try:
            async with telemetry.open_tracing():
                assert telemetry.enabled()
                settings = Settings(_env_file=None, crawler_rps=100.0)  # type: ignore[call-arg]
                async with Crawler(settings, http, allow_private_hosts=True) as crawler:
                    with telemetry.span("node collect"):
                        page = await crawler.fetch(f"{site.base_url}/page", deadline=time.monotonic() + 20)
                        with pytest.raises(AccessDeniedError):
                            await crawler.fetch(f"{site.base_url}/denied", deadline=time.monotonic() + 20)
        finally:
            await http.aclose()
    assert not telemetry.enabled(), "tracing ends with the block that opened it"
    spans = otlp.wait_for(lambda got: any(s.name == "node collect" for s in got))
    node = next(s for s in spans if s.name == "node collect")
    fetched, denied = (s for s in spans if s.name == "page.fetch")
    for span in (fetched, denied):
        assert (span.trace_id, span.parent_span_id, span.kind) == (node.trace_id, node.span_id, "client")
        assert span.attributes["server.address"] == "127.0.0.1"
        assert "url.full" not in span.attributes
    assert fetched.attributes["http.response.status_code"] == 200
    assert fetched.attributes["research.fetch.bytes"] == len(PAGE.encode())
    assert fetched.attributes["research.fetch.text_chars"] == len(page.text)
    assert [e.name for e in fetched.events] == ["retry"], "the 503 was retried once"
    assert fetched.status_code != 2
    assert denied.attributes["research.fetch.obstacle"] == "access_denied"
    assert denied.attributes["http.response.status_code"] == 403
    assert denied.status_code == 2  # ERROR


async def test_without_an_endpoint_every_span_is_the_shared_no_op() -> None:
    async with telemetry.open_tracing() as on:
        assert not on and not telemetry.enabled()
        span = telemetry.span("node plan", {"research.node": "plan"})
        assert span is telemetry.NOOP_SPAN and telemetry.current() is telemetry.NOOP_SPAN
        with span as inside:
            inside.set("a", 1)
            inside.event("retry")
            assert inside.traceparent() is None and telemetry.current_ids() is None


@pytest.mark.parametrize(
    ("header", "kept"),
    [
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", True),
        ("00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-00", True),
        ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", False),
        ("00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", False),
        ("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", False),
        ("garbage", False),
    ],
)
def test_a_malformed_traceparent_is_ignored(header: str, kept: bool) -> None:
    assert (telemetry.valid_traceparent(header) == header.lower()) is kept
    assert telemetry.incoming_traceparent(httpx.Headers({"traceparent": header})) is None, "tracing is off"


async def test_an_endpoint_without_the_extra_leaves_tracing_off_with_a_warning(
    otlp: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from research_tool.core import extras
    from research_tool.core.logging import configure_logging

    saved = structlog.get_config()
    configure_logging("json", "WARNING")
    monkeypatch.setattr(extras, "module_installed", lambda module: not module.startswith("opentelemetry"))
    try:
        async with telemetry.open_tracing() as on:
            assert not on and telemetry.span("node plan") is telemetry.NOOP_SPAN
    finally:
        structlog.configure(**saved)
    warning = capsys.readouterr().err
    assert "tracing_unavailable" in warning and "pip install 'research-tool[otel]'" in warning


async def test_otel_sdk_disabled_wins_over_an_endpoint(otlp: OtlpReceiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    async with telemetry.open_tracing() as on:
        assert not on
