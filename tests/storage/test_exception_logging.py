"""A logged exception is one line plus a bounded plain traceback, without local variables: under a storm of
failures, rich tracebacks with every frame's locals (about 800 KB each) stalled the event loop (issue 22)."""

from __future__ import annotations

import pytest

from research_tool.core.logging import TRACEBACK_CHARS, configure_logging, get_logger

SECRET_LOCAL = "a-local-variable-nobody-should-see"


def fail_deeply(depth: int) -> None:
    payload = SECRET_LOCAL * 10_000  # noqa: F841 - a big local, as a batch of rows is
    if depth:
        fail_deeply(depth - 1)
    raise RuntimeError("cannot start a transaction within a transaction")


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_an_exception_is_logged_as_one_line_and_a_bounded_traceback(
    fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging(fmt, "INFO")  # type: ignore[arg-type]
    try:
        fail_deeply(50)
    except RuntimeError:
        get_logger("test").exception("session_failed", session_id="s1")
    err = capsys.readouterr().err
    assert "session_failed" in err.splitlines()[0]
    assert "RuntimeError: cannot start a transaction within a transaction" in err
    assert SECRET_LOCAL not in err
    assert len(err) < TRACEBACK_CHARS + 500
