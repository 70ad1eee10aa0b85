"""Shared pieces of the CLI tests: a tiny document folder, an isolated environment, a way to run the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = {
    "kettle.md": (
        "# Electric kettles\n\nAn electric kettle boils water with a heating element in its base. "
        "A bimetallic strip switches the kettle off when the steam reaches it. "
        "Most kettles hold between one and two litres of water."
    ),
    "teapot.md": (
        "# Teapots\n\nA teapot is used to steep tea leaves in water that has just boiled. "
        "Porcelain teapots keep the tea warm for a long time. "
        "The spout of a teapot should start below the level of the lid."
    ),
    "boiling.md": (
        "# Boiling point\n\nWater boils at 100 degrees Celsius at sea level. "
        "At high altitude water boils at a lower temperature because the air pressure is lower. "
        "A kettle switches off shortly after the water boils."
    ),
}
QUESTION = "How does an electric kettle know when to switch off?"


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RESEARCH_", "OPENAI", "ANTHROPIC", "OLLAMA"))}
    env.update(RESEARCH_DATA_DIR=str(data_dir), **extra)
    return env


def run_cli(data_dir: Path, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "research_tool", *args],
        env=cli_env(data_dir, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
