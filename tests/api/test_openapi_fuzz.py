"""A bounded schemathesis run over the app's own OpenAPI schema: generated requests (valid and invalid)
against a live server on 127.0.0.1 never get a 5xx, and every answer matches the documented status
codes, content types and schemas."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.generation.case import Case

from research_tool.api.app import create_app
from research_tool.bench.wiki_replay import Page, running_wiki
from research_tool.core.settings import Settings

from .conftest import free_socket, offline_settings

EXAMPLES_PER_OPERATION = 3  # 11 operations x 2 modes: ~66 requests
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@contextmanager
def served_in_a_thread(settings_: Settings) -> Iterator[str]:
    """The app on a real uvicorn in its own thread and event loop (the checks call it synchronously)."""
    app = create_app(settings_)
    sock = free_socket()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=3))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    try:
        while not server.started:
            assert thread.is_alive(), "the server did not start"
            threading.Event().wait(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@pytest.mark.slow
def test_generated_requests_never_get_a_server_error(tmp_path: Path, wiki_pages: list[Page]) -> None:
    with running_wiki(delay_s=0.0, pages=wiki_pages[:4]) as (wiki_url, _):
        # /run and /start launch real sessions: keep them short (providers other than the replayed
        # Wikipedia answer from a closed port, so they fail at once and the session degrades).
        config = offline_settings(tmp_path / "data", wiki_url, run_timeout_s=2.0, max_concurrent_sessions=4)
        with served_in_a_thread(config) as base_url:
            schema_doc = httpx.get(f"{base_url}/openapi.json").json()
            schema = schemathesis.openapi.from_dict(schema_doc)
            operations = [result.ok() for result in schema.get_all_operations()]
            assert len(operations) >= 10

            for operation, mode in itertools.product(operations, GenerationMode):

                @given(case=operation.as_strategy(mode))
                @settings(
                    max_examples=EXAMPLES_PER_OPERATION,
                    deadline=None,
                    database=None,
                    derandomize=True,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck),
                )
                def check(case: Case) -> None:
                    response = case.call(base_url=base_url, timeout=60)
                    case.validate_response(response, checks=CHECKS)

                try:
                    check()
                except Unsatisfiable:
                    assert mode is GenerationMode.NEGATIVE  # an operation with nothing to get wrong (/healthz)
