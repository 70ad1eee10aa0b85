from __future__ import annotations

from pathlib import Path

import pytest

from research_tool.core.settings import Settings
from research_tool.demo_corpus import build_demo_corpus

MODULES = ("subprocess", "shlex", "signal", "json", "csv", "pathlib", "shutil", "tempfile", "sqlite3", "zipfile")


@pytest.fixture(scope="session")
def stdlib_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real text every Python has: a few standard-library modules' own documentation."""
    folder = tmp_path_factory.mktemp("stdlib_corpus")
    build_demo_corpus(folder, modules=MODULES)
    return folder


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data")
