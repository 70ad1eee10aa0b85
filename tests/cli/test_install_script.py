"""backend/install.py (issue 43, item 1): uv installs with pip's own index settings, read from `pip config list`
(files and PIP_* variables), every index weighed as pip weighs them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "backend" / "install.py"


def install_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("install_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pips_index_settings_become_uvs_options(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "pip.conf"
    config.write_text(
        "[global]\nindex-url = https://mirror.example/simple\n"
        "extra-index-url = file:///opt/a/simple file:///opt/b/simple\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    script = install_script()
    options = script.uv_options(script.pip_settings(sys.executable))
    assert options[:2] == ["--index-strategy", "unsafe-best-match"]
    pairs = list(zip(options[2::2], options[3::2], strict=True))
    assert ("--index-url", "https://mirror.example/simple") in pairs
    assert ("--extra-index-url", "file:///opt/a/simple") in pairs and (
        "--extra-index-url",
        "file:///opt/b/simple",
    ) in pairs
    assert ("--find-links", str(tmp_path / "wheels")) in pairs


def test_without_arguments_it_says_how_to_call_it() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "install.py VENV CONSTRAINTS" in done.stderr
