"""RESEARCH_DATABASE_URL without the `postgres` extra: one line and exit 2, never a traceback.

The extra is installed in the test environment, so the subprocess hides psycopg from the import system
before the CLI starts (what an installation without the extra looks like to the package)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HIDE_PSYCOPG = """
import importlib.abc, sys

class NoPsycopg(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("psycopg", "psycopg_pool"):
            raise ModuleNotFoundError(name)
        return None

sys.meta_path.insert(0, NoPsycopg())
from research_tool.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_database_url_without_the_extra_is_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    env.update(RESEARCH_DATA_DIR=str(tmp_path / "data"), RESEARCH_DATABASE_URL="postgresql://nobody@127.0.0.1:1/none")
    done = subprocess.run(
        [sys.executable, "-c", HIDE_PSYCOPG, "sessions"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "research-tool: error: RESEARCH_DATABASE_URL needs the 'postgres' extra, which is not installed: "
        "pip install 'research-tool[postgres]'"
    ]


def test_a_database_url_that_is_not_postgres_is_a_configuration_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RESEARCH_")}
    env.update(RESEARCH_DATA_DIR=str(tmp_path / "data"), RESEARCH_DATABASE_URL="mysql://somewhere/db")
    done = subprocess.run(
        [sys.executable, "-m", "research_tool", "sessions"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "RESEARCH_DATABASE_URL must be a postgresql:// URL" in done.stderr
    assert "Traceback" not in done.stderr
