"""Issue 34, items 5 to 7: the CLI beside a running server names both ways out; a port in use is one line and
exit 2; no raw machine output (the index summary, progress in a pipe, providers in a pipe, search titles, a
bare command, a mistyped option, the CPU workers' debug records)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import structlog

from research_tool import cli
from research_tool.bench.server_process import free_port
from research_tool.engines.cpu_pool import cpu_pool, run_cpu
from tests.cli.conftest import QUESTION, cli_env, run_cli


def test_a_bare_command_lists_the_commands_and_exits_2(tmp_path: Path) -> None:
    bare = run_cli(tmp_path / "data")
    assert bare.returncode == 2
    assert "research a question and print the report" in bare.stderr and "index" in bare.stderr
    assert "the following arguments are required" not in bare.stderr


def test_a_mistyped_option_or_command_gets_a_suggestion_in_one_line(tmp_path: Path) -> None:
    typo = run_cli(tmp_path / "data", "run", "q", "--teir", "simple")
    assert typo.returncode == 2 and typo.stderr.count("\n") == 1
    assert typo.stderr.rstrip().endswith("did you mean --tier?")
    command = run_cli(tmp_path / "data", "sesions")
    assert command.returncode == 2 and "did you mean sessions?" in command.stderr


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli(tmp_path / "data", "serve", "--port", str(port), timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"port {port} on 127.0.0.1 is in use" in done.stderr and "--port" in done.stderr


def test_index_says_what_it_did_in_a_sentence(tmp_path: Path, corpus: Path) -> None:
    done = run_cli(tmp_path / "data", "index", str(corpus))
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().startswith(f"Indexed {corpus.resolve()}: 3 documents (3 new, 0 changed, 0 removed)")
    assert "=" not in done.stderr and done.stderr.count("\n") == 1


def test_providers_in_a_pipe_keep_the_folder_path_whole(tmp_path: Path) -> None:
    deep = tmp_path / ("a-rather-long-folder-name-" * 4) / "research-notes"
    deep.mkdir(parents=True)
    (deep / "note.md").write_text("# Note\n\nA kettle boils water.", encoding="utf-8")
    data = tmp_path / "data"
    assert run_cli(data, "index", str(deep)).returncode == 0
    listed = run_cli(data, "providers")
    local = next(line for line in listed.stdout.splitlines() if line.startswith("local\t"))
    assert local.endswith(f"folders: {deep.resolve()}")


def test_progress_in_a_pipe_has_no_event_numbers(tmp_path: Path, corpus: Path) -> None:
    args = ["run", QUESTION, "--corpus", str(corpus), "--providers", "local", "--no-fetch", "--tier", "simple"]
    done = run_cli(tmp_path / "data", *args)
    assert done.returncode == 0, done.stderr
    milestones = [line for line in done.stderr.splitlines() if line.strip()]
    assert any("Cycle 1" in line for line in milestones)
    assert not any(line.lstrip()[:1].isdigit() for line in milestones), milestones


def test_search_titles_are_cut_at_a_word() -> None:
    title = "Subprocess management in the standard library with timeouts and captured output streams"
    short = cli.shorten(title, 40)
    assert short == "Subprocess management in the standard…" and len(short) <= 40
    assert cli.shorten("short", 40) == "short"


def log_in_worker() -> int:
    log = structlog.get_logger("research_tool.graph.decisions.verification")
    log.debug("worker_debug_record", n=1)
    log.warning("worker_warning_record", n=2)
    return os.getpid()


async def test_cpu_workers_log_at_the_servers_level(capfd: pytest.CaptureFixture[str]) -> None:
    async with cpu_pool(1, 0, log_format="console", log_level="INFO"):
        worker = await run_cpu(log_in_worker)
    assert worker != os.getpid()
    err = capfd.readouterr().err
    assert "worker_warning_record" in err and "worker_debug_record" not in err


@pytest.mark.slow
def test_run_beside_a_running_server_names_the_server_and_another_data_dir(tmp_path: Path, corpus: Path) -> None:
    data = tmp_path / "data"
    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "research_tool", "serve", "--port", str(port)],
        env=cli_env(data, RESEARCH_CPU_WORKERS="0"),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.1)
        locked = run_cli(data, "run", QUESTION, "--corpus", str(corpus), "--providers", "local", "--tier", "simple")
        assert locked.returncode == 2 and locked.stderr.count("\n") == 1, locked.stderr
        assert f"the server at http://127.0.0.1:{port}/ (process {server.pid})" in locked.stderr
        assert "another data dir (RESEARCH_DATA_DIR=" in locked.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    plain = run_cli(data, "run", QUESTION, "--corpus", str(corpus), "--providers", "local", "--tier", "simple")
    assert plain.returncode == 0, plain.stderr
    # a URL file left by a server that died is not trusted: it names another PID than the lock's next owner
    (data / "server.url").write_text(f"{server.pid} http://127.0.0.1:{port}/\n", encoding="utf-8")
    from research_tool.runtime.ownership import DataDirOwner, serving_url

    owner = DataDirOwner.claim(data)
    try:
        assert serving_url(data) is None
    finally:
        owner.release()
