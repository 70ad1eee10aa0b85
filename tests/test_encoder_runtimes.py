"""The sentence encoder's runtimes (`RESEARCH_ENCODER_RUNTIME`): numpy, onnxruntime float32 and int8 over an ONNX
graph built here from the packaged safetensors. Each must give the reference cosines; float32 must give numpy's
vectors (and so share its model key), int8 a key of its own; without onnxruntime the encoder falls back to numpy.

Skips, saying why, without the extra, the packaged weights or onnxruntime; nothing is downloaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from research_tool.providers.local_corpus import embeddings
from research_tool.providers.local_corpus.embeddings import (
    ENCODER_DIR_ENV,
    ENCODER_RUNTIME_ENV,
    EncoderUnavailableError,
    SentenceEncoder,
    chosen_runtime,
    find_model_files,
    onnx_missing,
    unavailable_reason,
)
from research_tool.providers.local_corpus.onnx_encoder import ENCODER_CACHE_ENV

REASON = unavailable_reason(allow_download=False)
needs_encoder = pytest.mark.skipif(REASON is not None, reason=f"semantic extra or weights absent: {REASON}")
needs_onnx = pytest.mark.skipif(
    REASON is not None or onnx_missing() is not None,
    reason=f"semantic extra, weights or onnxruntime absent: {REASON or onnx_missing()}",
)

SENTENCES = ["A man is eating food.", "A man is eating a piece of bread.", "A man is riding a horse."]
# sentence-transformers' cosines for SENTENCES[0] against [1] and [2]
REFERENCE = (0.755, 0.247)
# int8 weights move each cosine by up to about 0.02 (measured: 0.766 and 0.268); float32 runtimes agree to 0.001.
TOLERANCE = {"numpy": 0.005, "onnx": 0.005, "onnx-int8": 0.03}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(ENCODER_DIR_ENV, raising=False)
    monkeypatch.delenv(ENCODER_RUNTIME_ENV, raising=False)


_LOADED: dict[str, SentenceEncoder] = {}


def encoder(runtime: str) -> SentenceEncoder:
    if runtime not in _LOADED:
        _LOADED[runtime] = SentenceEncoder(find_model_files(allow_download=False), runtime=runtime)
    return _LOADED[runtime]


def runtime_params() -> list[object]:
    return [
        pytest.param("numpy", marks=needs_encoder),
        pytest.param("onnx", marks=needs_onnx),
        pytest.param("onnx-int8", marks=needs_onnx),
    ]


@pytest.mark.parametrize("runtime", runtime_params())
def test_each_runtime_gives_the_reference_cosines(runtime: str) -> None:
    vectors = encoder(runtime).encode([*SENTENCES, ""])
    assert vectors.shape == (4, embeddings.DIMENSIONS)
    assert float(vectors[0] @ vectors[1]) == pytest.approx(REFERENCE[0], abs=TOLERANCE[runtime])
    assert float(vectors[0] @ vectors[2]) == pytest.approx(REFERENCE[1], abs=TOLERANCE[runtime])
    assert float(vectors[3] @ vectors[3]) == pytest.approx(1.0, abs=1e-5)
    # A text's vector does not depend on the texts encoded with it.
    alone = encoder(runtime).encode([SENTENCES[2]])[0]
    assert float(alone @ vectors[2]) == pytest.approx(1.0, abs=1e-5)


@needs_onnx
def test_onnx_float32_gives_numpys_vectors_and_shares_its_model_key() -> None:
    texts = [*SENTENCES, "Quarterly tax returns are filed in April. " * 40]  # the last one is cut at 256 tokens
    by_numpy, by_onnx = encoder("numpy").encode(texts), encoder("onnx").encode(texts)
    assert min(float(a @ b) for a, b in zip(by_numpy, by_onnx, strict=True)) > 0.9999
    assert encoder("onnx").model_key == encoder("numpy").model_key


@needs_onnx
def test_int8_vectors_carry_a_model_key_of_their_own() -> None:
    assert encoder("onnx-int8").model_key != encoder("onnx").model_key
    assert encoder("onnx-int8").model_key.startswith(encoder("onnx").model_key)


@needs_onnx
def test_the_built_model_is_cached_and_reused(built_models: Path) -> None:
    encoder("onnx")
    built = sorted(built_models.glob("all-minilm-*-fp32.onnx"))  # the reader's model may be built there too
    assert len(built) == 1
    stamp = built[0].stat().st_mtime_ns
    again = SentenceEncoder(find_model_files(allow_download=False), runtime="onnx")
    assert built[0].stat().st_mtime_ns == stamp  # read, not rebuilt
    assert float(again.encode(SENTENCES[:1])[0] @ encoder("onnx").encode(SENTENCES[:1])[0]) == pytest.approx(1.0)


@needs_onnx
def test_an_unwritable_cache_builds_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    monkeypatch.setenv(ENCODER_CACHE_ENV, str(blocker / "models"))  # a folder below a file cannot be made
    vector = SentenceEncoder(find_model_files(allow_download=False), runtime="onnx").encode(SENTENCES[:1])[0]
    assert float(vector @ encoder("onnx").encode(SENTENCES[:1])[0]) == pytest.approx(1.0, abs=1e-5)


def test_without_onnxruntime_the_default_runtime_is_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings, "onnx_missing", lambda: "onnxruntime is not installed")
    assert chosen_runtime() == "numpy"
    monkeypatch.setenv(ENCODER_RUNTIME_ENV, "onnx")
    with pytest.raises(EncoderUnavailableError, match="onnxruntime is not installed"):
        chosen_runtime()


def test_with_onnxruntime_the_default_is_onnx_and_a_named_runtime_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings, "onnx_missing", lambda: None)
    assert chosen_runtime() == "onnx"
    monkeypatch.setenv(ENCODER_RUNTIME_ENV, "NumPy")
    assert chosen_runtime() == "numpy"
    monkeypatch.setenv(ENCODER_RUNTIME_ENV, "torch")
    with pytest.raises(EncoderUnavailableError, match="one of onnx, onnx-int8, numpy"):
        chosen_runtime()
    assert unavailable_reason(allow_download=False) is not None  # a bad name is reported, not ignored


def test_threads_default_to_one_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(embeddings.ENCODER_THREADS_ENV, raising=False)
    assert embeddings.encoder_threads() == 1
    monkeypatch.setenv(embeddings.ENCODER_THREADS_ENV, "2")
    assert embeddings.encoder_threads() == 2
    monkeypatch.setenv(embeddings.ENCODER_THREADS_ENV, "many")
    assert embeddings.encoder_threads() == 1


@needs_encoder
def test_an_encoder_limits_blas_to_its_threads_in_a_fresh_process() -> None:
    # numpy must be loaded before the limit is set, or OpenBLAS keeps one spinning thread per core (measured: 6x
    # the CPU per passage on a shared machine); a fresh interpreter is the only place where that order shows.
    script = (
        "from threadpoolctl import threadpool_info\n"
        "from research_tool.providers.local_corpus.embeddings import SentenceEncoder, find_model_files\n"
        "SentenceEncoder(find_model_files(allow_download=False), runtime='numpy')\n"
        "print(sorted({i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[1]"
