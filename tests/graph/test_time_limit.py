"""Issue 35: a session ends inside its time limit as a user times it. The end of the limit is kept for writing the
report (searching and the model steps may not use it), and `run --max-time` counts from the process's start:
the time before the session's first step is counted as spent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from research_tool.core.settings import Settings
from research_tool.demo_corpus import build_demo_corpus
from research_tool.graph.session_limits import finish_reserve_s, resolve_limits
from research_tool.models.request import ResearchRequest
from research_tool.models.sessions import SessionRecord
from research_tool.models.state import START_KEY
from research_tool.runtime.composition import open_research_services
from research_tool.runtime.runner import initial_state
from tests.support.sessions import local_request

QUESTION = "How do I run a subprocess with a timeout and capture its output?"


def test_the_end_of_the_limit_is_kept_for_writing_the_report() -> None:
    assert finish_reserve_s(30) == pytest.approx(4.0)  # at least 4 s
    assert finish_reserve_s(120) == pytest.approx(6.0)  # 5 %
    assert finish_reserve_s(900) == pytest.approx(15.0)  # at most 15 s
    assert finish_reserve_s(8) == pytest.approx(2.0)  # never more than a quarter
    settings = Settings(_env_file=None)
    limits = resolve_limits("simple", {"max_execution_time_s": 120}, settings)
    assert limits.working_time_s == pytest.approx(114.0)


def test_a_session_whose_clock_started_earlier_counts_that_time_as_spent() -> None:
    request = ResearchRequest(query=QUESTION)
    record = SessionRecord.queued("s1", request, None, datetime.now(UTC).isoformat())
    state = initial_state(record, clock_started=time.monotonic() - 5.0)
    assert state["elapsed"][START_KEY] == pytest.approx(5.0, abs=0.5)
    started = datetime.fromisoformat(state["started_at"])
    assert (datetime.now(UTC) - started).total_seconds() == pytest.approx(5.0, abs=0.5)
    assert "elapsed" not in initial_state(record), "without a clock of its own, the session's starts with it"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("time_limit_corpus")
    build_demo_corpus(folder, modules=("subprocess", "asyncio"))
    return folder


async def test_a_session_launched_late_on_its_callers_clock_ends_inside_the_limit(corpus: Path, tmp_path: Path) -> None:
    limit_s = 6.0  # 1.5 s of it kept for the report; the caller has spent 4 s before the session starts
    settings = Settings(_env_file=None, data_dir=tmp_path / "data")
    request = local_request(corpus, QUESTION, tier="deep", clarify=False, max_execution_time_s=limit_s)
    async with open_research_services(settings) as services:
        record = await services.runner.create(request)
        clock_started = time.monotonic() - 4.0
        services.runner.launch(record.id, clock_started=clock_started)
        record = await services.runner.wait(record.id)
        ended = time.monotonic()
        report = await services.runner.report(record.id)

    assert record.status == "completed", record.error
    meta = report["metadata"]
    assert meta["budget"]["time_s"]["used"] >= 4.0, "the time before the session was not counted"
    assert meta["duration_s"] >= 4.0
    # without the caller's 4 s counted the session would run to 10 s; a busy machine stretches the report's writing
    assert ended - clock_started < limit_s + 3.0, (
        f"ended {ended - clock_started:.1f} s after the caller's clock started"
    )


def test_the_process_start_is_read_before_the_module_is_imported() -> None:
    code = (
        "import time; now = time.monotonic()\n"
        "from research_tool.core.process_clock import process_started\n"
        "print(now - process_started())"
    )
    age = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert 0.0 < age < 30.0, "the interpreter's own start-up happened before this module's import"


def test_the_command_exits_at_once_with_its_output_and_exit_handlers_done(tmp_path: Path) -> None:
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('exit handlers ran', file=sys.stderr))\n"
        "sys.argv = ['research-tool', 'sessions', '--json']\n"
        "from research_tool.cli import entry\n"
        "entry()\n"
    )
    env = {**os.environ, "RESEARCH_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"sessions": [], "total": 0}
    assert "exit handlers ran" in done.stderr
