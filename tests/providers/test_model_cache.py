"""The built ONNX models' cache (the answer reader's and the sentence encoder's): a cached file that does not load
(truncated by a crash while it was written, emptied, overwritten with other bytes) is rebuilt once, with a warning,
instead of failing every session; a variant is a name from a fixed list, never a path.

Skips, saying why, where the `semantic` extra or the packaged weights are not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from research_tool.core.settings import Settings
from research_tool.providers.local_corpus.embeddings import (
    SentenceEncoder,
    find_model_files,
    onnx_missing,
    unavailable_reason,
)
from research_tool.providers.local_corpus.onnx_encoder import ENCODER_CACHE_ENV
from research_tool.providers.local_corpus.reader import VARIANT_ENV, AnswerReader, ReaderUnavailableError, answer_reader

REASON = unavailable_reason(allow_download=False) or onnx_missing()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"the ONNX models cannot be built here: {REASON}")

QUESTION = "When did the Kestrel Valley Railway open?"
PASSAGES = [("It was opened in 1887 by the Kestrel Valley Company.", "Kestrel Valley Railway: the line.")]


def truncated(path: Path) -> None:
    with path.open("r+b") as handle:
        handle.truncate(path.stat().st_size // 2)


def emptied(path: Path) -> None:
    path.write_bytes(b"")


def random_bytes(path: Path) -> None:
    path.write_bytes(os.urandom(4096))


DAMAGE: list[Callable[[Path], None]] = [truncated, emptied, random_bytes]


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__)
def test_a_damaged_reader_model_is_rebuilt_once_and_reads_again(
    damage: Callable[[Path], None], built_models: Path
) -> None:
    reference = AnswerReader()(QUESTION, PASSAGES)
    (cached,) = built_models.glob("answer-reader-*-fp32.onnx")
    size = cached.stat().st_size
    damage(cached)
    assert AnswerReader()(QUESTION, PASSAGES) == pytest.approx(reference, abs=1e-6)
    assert cached.stat().st_size == size  # rebuilt in place, whole
    assert not [p for p in built_models.iterdir() if p.name.startswith(".build-")]  # no scratch left behind


def test_a_damaged_encoder_model_is_rebuilt(built_models: Path) -> None:
    files = find_model_files(allow_download=False)
    first = SentenceEncoder(files, runtime="onnx").encode(["A man is eating food."])[0]
    (cached,) = built_models.glob("all-minilm-l6-v2-*-fp32.onnx")
    size = cached.stat().st_size
    truncated(cached)
    again = SentenceEncoder(files, runtime="onnx").encode(["A man is eating food."])[0]
    assert float(first @ again) == pytest.approx(1.0, abs=1e-5)
    assert cached.stat().st_size == size


@pytest.mark.parametrize("name", ["../../escaped", "fp16", "/tmp/x", ""])
def test_a_reader_variant_is_a_name_from_the_list_never_a_path(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "deep" / "cache"
    monkeypatch.setenv(ENCODER_CACHE_ENV, str(cache))
    if name:
        with pytest.raises(ReaderUnavailableError, match="one of fp32, int8"):
            AnswerReader(variant=name)
        monkeypatch.setenv(VARIANT_ENV, name)
        assert answer_reader() is None  # the lexical ranker answers alone; the reason is logged
        with pytest.raises(ValidationError):
            Settings()
    assert [p.name for p in tmp_path.rglob("*.onnx")] == []


def test_the_cli_refuses_an_unknown_reader_variant(tmp_path: Path) -> None:
    env = {**os.environ, VARIANT_ENV: "../../escaped", "RESEARCH_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [sys.executable, "-m", "research_tool", "sessions"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert "answer_reader_variant" in done.stderr
