from __future__ import annotations

from pathlib import Path

import pytest

from research_tool.core.settings import Settings
from research_tool.demo_corpus import build_demo_corpus

MODULES = ("subprocess", "shlex", "json", "csv", "shutil")
QUESTION = "How do I run a subprocess with a timeout and capture its output?"


@pytest.fixture(scope="session")
def small_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("storage_corpus")
    build_demo_corpus(folder, modules=MODULES)
    return folder


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "data", llm="offline")  # type: ignore[call-arg]
