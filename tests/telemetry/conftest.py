"""Tracing tests: a real OTLP/HTTP receiver on 127.0.0.1 (tests/support/otlp_receiver.py) and the variables that
point the exporter at it, as an operator would set them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the tracing tests need the 'otel' extra")
pytest.importorskip("opentelemetry.proto", reason="the test receiver decodes with opentelemetry-proto")

from tests.api.conftest import wiki, wiki_pages  # noqa: F401 - the API tests' replay of Wikipedia
from tests.support.otlp_receiver import OtlpReceiver, running_receiver

# The batch processor exports every 50 ms (default 5 s), so spans reach the receiver while a test waits for them.
EXPORT_DELAY_MS = "50"


def tracing_env(receiver: OtlpReceiver) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": EXPORT_DELAY_MS,
        "OTEL_SERVICE_NAME": "research-tool-test",
    }


@pytest.fixture
def otlp(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    """A receiver, and tracing on for the services this test opens in its own process."""
    with running_receiver() as receiver:
        for name, value in tracing_env(receiver).items():
            monkeypatch.setenv(name, value)
        yield receiver
