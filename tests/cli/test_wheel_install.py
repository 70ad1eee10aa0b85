"""`pip install research-tool` in a fresh virtualenv, as a user does it (issue 11, item 3): plain pip (not the
Makefile's upgraded pip), the wheel built from this tree, no extra. The package imports (trafilatura's justext
needs lxml.html.clean, a separate distribution), `providers` and a one-question offline run work, and asking for
a model engine without the `llm` extra is one line and exit 2.

pip resolves the dependencies from the configured index, pinned by constraints.txt (a pin installs nothing by
itself: every dependency must be declared in pyproject.toml)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.cli.conftest import QUESTION

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def build_wheel(tmp_path: Path) -> Path:
    """Build from a copy of the sources, so the build leaves nothing in the worktree."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "backend" / "src",
        source / "backend" / "src",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(source)],
        check=True,
        timeout=600,
    )
    (wheel,) = wheels.glob("research_tool-*.whl")
    return wheel


def clean_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RESEARCH_", "OPENAI", "ANTHROPIC", "OLLAMA", "VIRTUAL_ENV", "PYTHON"))
    }
    env.update(RESEARCH_DATA_DIR=str(data_dir), **extra)
    return env


def test_plain_pip_install_of_the_wheel_imports_and_runs_offline(tmp_path: Path, corpus: Path) -> None:
    env_dir = tmp_path / "venv"
    # the build and the new virtualenv (ensurepip) are independent subprocess work: side by side
    with ThreadPoolExecutor(max_workers=2) as pool:
        built = pool.submit(build_wheel, tmp_path)
        pool.submit(venv.EnvBuilder(with_pip=True).create, env_dir).result()
        wheel = built.result()
    python = env_dir / "bin" / "python"
    # --no-compile: no .pyc written for the ~100 packages at install time (each is compiled when imported, as
    # with any install); what is installed, and from where, is unchanged
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            "-c",
            str(ROOT / "constraints.txt"),
            str(wheel),
        ],
        check=True,
        timeout=1200,
        env=clean_env(tmp_path / "unused"),
    )
    tool = env_dir / "bin" / "research-tool"
    data = tmp_path / "data"
    env = clean_env(data)

    imported = subprocess.run(
        [str(python), "-c", "import justext, trafilatura, research_tool.runtime.composition, research_tool.api.app"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stderr[-2000:]

    providers = subprocess.run([str(tool), "providers"], env=env, capture_output=True, text=True, timeout=120)
    assert providers.returncode == 0, providers.stderr[-2000:]
    assert "wikipedia" in providers.stdout

    args = [str(tool), "run", QUESTION, "--corpus", str(corpus), "--providers", "local", "--no-fetch"]
    ran = subprocess.run([*args, "--tier", "simple"], env=env, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert "## Answer" in ran.stdout and "[1]" in ran.stdout

    no_extra = subprocess.run(
        args, env=clean_env(data, RESEARCH_LLM="ollama:llama3.2"), capture_output=True, text=True, timeout=120
    )
    assert no_extra.returncode == 2, no_extra.stderr[-2000:]
    assert no_extra.stderr.strip().splitlines() == [
        "research-tool: error: RESEARCH_LLM=ollama:llama3.2 needs the 'llm' extra, which is not installed: "
        "pip install 'research-tool[llm]'"
    ]
