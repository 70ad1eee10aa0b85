"""Every command of README.md and docs/ that a reader is shown runs, as shown, and answers what it promises.

The blocks marked `example` run from a scratch copy of the checkout (see tests/docs/examples.py): `make run`
builds the demo corpus there and researches on it, `research-tool ...` lines run the installed CLI, the
`server` blocks talk to a real `research-tool serve` on 127.0.0.1, and the Python ones (the MCP client) run
with the project's interpreter. Nothing leaves the machine: the examples name the `local` provider.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from research_tool.bench.server_process import free_port
from tests.conftest import FOREIGN_ENV
from tests.docs.examples import MARKED_LANGUAGES, REPO, Example, all_blocks, documentation_files, fenced_blocks

KNOWN_MARKS = frozenset({"example", "not-run", "server"})
JS_DIR = REPO / "tests" / "langgraph_js"
JS_SDK = JS_DIR / "node_modules" / "@langchain" / "langgraph-sdk" / "package.json"
BLOCK_TIMEOUT_S = 180
SERVER_START_S = 60


def test_every_shell_and_python_block_says_whether_it_runs() -> None:
    unmarked = [
        b.where for b in all_blocks() if b.language in MARKED_LANGUAGES and len(b.marks & {"example", "not-run"}) != 1
    ]
    assert unmarked == [], "mark each block `example` (run by this test) or `not-run`"
    unknown = [f"{b.where}: {sorted(b.marks - KNOWN_MARKS)}" for b in all_blocks() if b.marks - KNOWN_MARKS]
    assert unknown == []


def test_the_readme_shows_runnable_examples_of_the_cli_the_api_and_mcp() -> None:
    readme = [b for b in fenced_blocks(REPO / "README.md") if b.runs]
    assert any("make run" in b.code for b in readme)
    assert any(b.needs_server and "curl" in b.code for b in readme)
    assert any(b.is_python and "mcp" in b.code for b in readme)
    assert all(b.expect for b in readme if "run" in b.code or b.is_python), "a question must name its answer"


def example_env(checkout: Path) -> dict[str, str]:
    """The user's shell after `. .venv/bin/activate`, without keys, endpoints or RESEARCH_* settings."""
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_ENV and not k.startswith("RESEARCH_")}
    env["PATH"] = f"{checkout / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(checkout / ".venv")
    env.pop("MAKEFLAGS", None)
    env.pop("MAKELEVEL", None)
    return env


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory that looks like a fresh clone after `make venv`: the Makefile and project files linked in, and
    a `.venv` whose parts are the running interpreter's virtualenv plus its own install stamp (so `make` neither
    reinstalls nor writes into the real checkout's data/)."""
    root = tmp_path_factory.mktemp("checkout")
    for name in ("Makefile", "pyproject.toml", "constraints.txt", "backend"):
        (root / name).symlink_to(REPO / name)
    venv = root / ".venv"
    venv.mkdir()
    for part in Path(sys.prefix).iterdir():
        if part.name != ".installed":
            (venv / part.name).symlink_to(part)
    (venv / ".installed").touch()
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "research_tool.demo_corpus", "data/demo_corpus"],
        cwd=root,
        env=example_env(root),
        check=True,
        capture_output=True,
        timeout=BLOCK_TIMEOUT_S,
    )
    return root


@pytest.fixture(scope="module")
def server(checkout: Path) -> Iterator[str]:
    """`research-tool serve` as `make serve` starts it (the demo corpus allowed), on a free port, data apart."""
    port = free_port()
    env = example_env(checkout) | {
        "RESEARCH_DATA_DIR": str(checkout / "server-data"),
        "RESEARCH_CORPUS_DIRS": str(checkout / "data" / "demo_corpus"),
    }
    log = (checkout / "server.log").open("wb")
    process = subprocess.Popen(
        ["research-tool", "serve", "--host", "127.0.0.1", "--port", str(port)],
        cwd=checkout,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_S
    while True:
        assert process.poll() is None, (checkout / "server.log").read_text(errors="replace")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the server did not answer /healthz"
        time.sleep(0.1)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def run_example(example: Example, checkout: Path, server_address: str | None) -> subprocess.CompletedProcess[str]:
    code = example.code
    if server_address is not None:
        code = code.replace("localhost:8000", server_address).replace("127.0.0.1:8000", server_address)
    env = example_env(checkout)
    cwd = checkout
    if example.is_python:
        command = [str(checkout / ".venv" / "bin" / "python"), "-c", code]
    elif example.is_js:  # an ES module; its imports resolve from the pinned packages of tests/langgraph_js
        command, cwd = [node_or_skip(), "--input-type=module", "-e", code], JS_DIR
    else:
        command = ["bash", "-euo", "pipefail", "-c", code]
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S, check=False
    )


def node_or_skip() -> str:
    node = shutil.which("node")
    if node is None or not JS_SDK.exists():
        pytest.skip(f"the JavaScript examples need node and `npm ci` in {JS_DIR} (.ci/run does both)")
    return node


def files_with_examples() -> list[Path]:
    return [path for path in documentation_files() if any(b.runs for b in fenced_blocks(path))]


def run_in_order(examples: list[Example], checkout: Path, address: str | None) -> list[str]:
    """Run the examples one after the other (a later one may read what an earlier one made); say what failed."""
    for example in examples:
        done = run_example(example, checkout, address)
        shown = f"{example.where}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        if done.returncode != 0:
            return [f"exit {done.returncode}: {shown}"]
        missing = [expected for expected in example.expect if expected not in done.stdout]
        if missing:
            return [f"{missing} not printed by {shown}"]
        if "Traceback" in done.stderr:
            return [f"a traceback: {shown}"]
    return []


@pytest.mark.slow
@pytest.mark.parametrize("path", files_with_examples(), ids=lambda p: str(p.relative_to(REPO)))
def test_examples_run_and_answer(path: Path, checkout: Path, request: pytest.FixtureRequest) -> None:
    """The server's examples (their own data dir) run beside the command-line ones, each group in order."""
    examples = [b for b in fenced_blocks(path) if b.runs and not b.is_js]
    with_server = [b for b in examples if b.needs_server]
    address = request.getfixturevalue("server") if with_server else None
    with ThreadPoolExecutor(max_workers=2) as pool:
        alone = pool.submit(run_in_order, [b for b in examples if not b.needs_server], checkout, None)
        served = pool.submit(run_in_order, with_server, checkout, address)
        failures = alone.result() + served.result()
    assert failures == []


def files_with_js_examples() -> list[Path]:
    return [path for path in documentation_files() if any(b.runs and b.is_js for b in fenced_blocks(path))]


@pytest.mark.slow
@pytest.mark.parametrize("path", files_with_js_examples(), ids=lambda p: str(p.relative_to(REPO)))
def test_js_examples_run_and_answer(path: Path, checkout: Path, request: pytest.FixtureRequest) -> None:
    """The JavaScript examples (the JS SDK), against the same server; skipped, saying why, without Node."""
    node_or_skip()
    examples = [b for b in fenced_blocks(path) if b.runs and b.is_js]
    assert all(b.needs_server for b in examples), "a JS example talks to the server: mark it `server`"
    assert run_in_order(examples, checkout, request.getfixturevalue("server")) == []
