"""Issue 45 item 4: `server.url`, which `serve` writes beside `owner.lock`, is guarded as the lock is. A symlink
there is replaced, never written through (its target once got "PID URL"); a FIFO there neither stops `serve`
before it listens nor makes a locked-out `run` hang; and SIGTERM removes `server.url` and the lock's PID, as
Ctrl-C does."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.support.cluster import free_port
from tests.support.servers import serve, until_healthy

from .conftest import QUESTION, cli_env, run_cli


async def healthy_within(server: subprocess.Popen[bytes], port: int) -> None:
    async with httpx.AsyncClient(trust_env=False) as client:
        await until_healthy(
            client, f"http://127.0.0.1:{port}", lambda: None if server.poll() is None else "the server exited", 60
        )


def assert_cleaned_up_after_sigterm(server: subprocess.Popen[bytes], data: Path) -> None:
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=30) == 128 + signal.SIGTERM
    assert not os.path.lexists(data / "server.url")
    assert (data / "owner.lock").read_text(encoding="utf-8") == ""  # no PID left for a reader to trust


@pytest.mark.slow
async def test_a_symlink_at_server_url_is_replaced_and_a_fifo_swapped_in_never_hangs_run(
    tmp_path: Path, corpus: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n", encoding="utf-8")
    (data / "server.url").symlink_to(precious)
    port = free_port()
    with serve(cli_env(data, RESEARCH_CPU_WORKERS="0"), tmp_path, port) as server:
        await healthy_within(server, port)
        assert precious.read_text(encoding="utf-8") == "keep me\n"
        written = data / "server.url"
        assert stat.S_ISREG(written.lstat().st_mode)
        assert written.read_text(encoding="utf-8") == f"{server.pid} http://127.0.0.1:{port}/\n"

        written.unlink()
        os.mkfifo(written)  # swapped in beside the running server: the locked-out `run` must not wait on it
        locked = await asyncio.to_thread(
            run_cli, data, "run", QUESTION, "--corpus", str(corpus), "--providers", "local", timeout=60
        )
        assert locked.returncode == 2, locked.stderr
        assert f"process {server.pid}" in locked.stderr

        written.unlink()
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 128 + signal.SIGTERM
    assert (data / "owner.lock").read_text(encoding="utf-8") == ""


@pytest.mark.slow
async def test_serve_with_a_fifo_at_server_url_listens_and_sigterm_removes_what_it_wrote(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    os.mkfifo(data / "server.url")
    port = free_port()
    with serve(cli_env(data, RESEARCH_CPU_WORKERS="0"), tmp_path, port) as server:
        await healthy_within(server, port)
        assert stat.S_ISREG((data / "server.url").lstat().st_mode)
        assert (data / "owner.lock").read_text(encoding="utf-8") == f"{server.pid}\n"
        assert_cleaned_up_after_sigterm(server, data)
