"""The answer reader: the packaged all-MiniLM-L6-v2 fine-tuned as a cross-encoder, run by onnxruntime.

It reads a question together with one candidate sentence (and the sentence's page title and the sentence before
it, `reader_inputs.py`) and gives the probability that the sentence answers the question. The engines load no
model (they may not import providers): `AnswerReader` is handed to the answer selection as a callable through
`SynthesisInput.reader`, as the sentence similarity is.

What is shipped is small: `engines/text/reader_adapters.npz` (low-rank adapters for the tuned layers, their
LayerNorms and the head, float16, written by `python -m research_tool.eval.train_reader`; its card
`reader_adapters.json` gives the command, the digests and the loss curve). At first use the adapters are checked
against the card's digest, merged into the packaged base weights (W + B A) and built into an onnxruntime graph
(`onnx_encoder.build_graph` with a head), cached like the encoder's (`onnx_encoder.cached_forward`: written
atomically, rebuilt once when the cached file does not load). No torch at run time.

On by default when the `semantic` extra and the base weights are installed; `RESEARCH_ANSWER_READER=0` turns it
off (the lexical ranker answers alone, as without the extra).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from research_tool.core.logging import get_logger
from research_tool.providers.local_corpus.embeddings import find_model_files, unavailable_reason
from research_tool.providers.local_corpus.onnx_encoder import VARIANTS, build_graph, cached_forward, model_cache_dir
from research_tool.providers.local_corpus.reader_inputs import Passage, encode_batch

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = get_logger(__name__)

READER_ENV = "RESEARCH_ANSWER_READER"  # "0" turns the reader off
VARIANT_ENV = "RESEARCH_ANSWER_READER_VARIANT"  # fp32 (default) or int8
ADAPTERS_DIR = Path(__file__).resolve().parents[2] / "engines" / "text"
ADAPTERS = ADAPTERS_DIR / "reader_adapters.npz"
CARD = ADAPTERS_DIR / "reader_adapters.json"
_GRAPH_VERSION = "1"


class ReaderUnavailableError(RuntimeError):
    """The reader's adapters are missing or do not match their card (a damaged or partial install)."""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def merged_weights(
    base: dict[str, npt.NDArray[np.float32]], adapters: dict[str, npt.NDArray[Any]]
) -> tuple[dict[str, npt.NDArray[np.float32]], tuple[npt.NDArray[np.float32], float]]:
    """The base weights with every adapter merged in (W + B A) and tuned LayerNorms replaced; and the head."""
    import numpy as np

    weights = dict(base)
    for key, value in adapters.items():
        if key.endswith(".lora_a"):
            name = key[: -len(".lora_a")]
            b = np.asarray(adapters[f"{name}.lora_b"], np.float32)
            weights[f"{name}.weight"] = np.asarray(base[f"{name}.weight"], np.float32) + b @ np.asarray(
                value, np.float32
            )
        elif not key.endswith(".lora_b") and not key.startswith("head."):
            weights[key] = np.asarray(value, np.float32)
    head = (np.asarray(adapters["head.weight"], np.float32), float(np.asarray(adapters["head.bias"]).reshape(-1)[0]))
    return weights, head


def _reader_graph(adapters_file: Path) -> Any:
    """The reader's float32 onnx.ModelProto: the packaged base weights with `adapters_file` merged in, and the head."""
    import numpy as np
    from safetensors.numpy import load_file

    files = find_model_files(allow_download=False)
    base = {k.removeprefix("bert."): v for k, v in load_file(str(files.weights)).items()}
    with np.load(adapters_file) as stored:
        adapters = {k: stored[k] for k in stored.files}
    layers = 1 + max(int(k.split(".")[2]) for k in base if k.startswith("encoder.layer."))
    weights, head = merged_weights(base, adapters)
    return build_graph(weights, layers=layers, heads=12, hidden=384, layer_norm_eps=1e-12, head=head)


def chosen_variant(variant: str | None = None) -> str:
    """`variant`, else $RESEARCH_ANSWER_READER_VARIANT, else fp32: one of VARIANTS (a name is never a path)."""
    chosen = variant or os.environ.get(VARIANT_ENV, "").strip() or "fp32"
    if chosen not in VARIANTS:
        raise ReaderUnavailableError(f"{VARIANT_ENV}={chosen[:40]!r}: one of {', '.join(VARIANTS)}")
    return chosen


class AnswerReader:
    """(question, [(sentence, context)]) -> the probability that each sentence answers the question."""

    def __init__(self, *, threads: int = 1, variant: str | None = None, adapters: Path = ADAPTERS) -> None:
        from tokenizers import Tokenizer

        card = json.loads(adapters.with_suffix(".json").read_text(encoding="utf-8"))
        digest = _digest(adapters)
        if digest != card.get("adapters_sha256"):
            raise ReaderUnavailableError(f"{adapters.name} does not match its card's digest")
        chosen = chosen_variant(variant)
        files = find_model_files(allow_download=False)
        target = model_cache_dir() / f"answer-reader-{digest[:16]}-g{_GRAPH_VERSION}-{chosen}.onnx"
        self._forward = cached_forward(
            target, lambda: _reader_graph(adapters), variant=chosen, threads=threads, output="logits", what="reader"
        )
        tokenizer = Tokenizer.from_file(str(files.tokenizer))
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tokenizer = tokenizer
        self._lock = threading.Lock()

    def logits(self, question: str, passages: Sequence[tuple[str, str]]) -> list[float]:
        if not passages:
            return []
        ids, types, mask = encode_batch(self._tokenizer, question, [Passage(s, c) for s, c in passages])
        with self._lock:
            out = self._forward.run({"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
        return [float(x) for x in out]

    def __call__(self, question: str, passages: Sequence[tuple[str, str]]) -> list[float]:
        import math

        return [1.0 / (1.0 + math.exp(-x)) for x in self.logits(question, passages)]


class ProcessReader:
    """The reader as the engines get it: stateless, so it pickles to the CPU pool's worker processes; each process
    loads its own `AnswerReader` once, at first use."""

    def __call__(self, question: str, passages: Sequence[tuple[str, str]]) -> list[float]:
        """Each passage's probability; no probabilities (the lexical ranker alone) when the reader cannot load."""
        reader = _loaded()
        return reader(question, passages) if reader is not None else []


def answer_reader() -> ProcessReader | None:
    """The reader when it can run here (the extra, the base weights and the adapters), else None (the lexical
    ranker answers alone; the reason is logged once)."""
    if os.environ.get(READER_ENV, "").strip() in ("0", "false", "off", "no"):
        return None
    try:
        chosen_variant()
    except ReaderUnavailableError as exc:
        log.warning("answer_reader_unavailable", reason=str(exc))
        return None
    return ProcessReader() if _unavailable() is None else None


@lru_cache(maxsize=1)
def _unavailable() -> str | None:
    """Why the reader cannot run here (looked up and logged once per process), or None."""
    reason = unavailable_reason(allow_download=False)
    if reason is None and not (ADAPTERS.is_file() and CARD.is_file()):
        reason = "the reader's adapters are not installed"
    if reason is not None:
        log.info("answer_reader_unavailable", reason=reason)
    return reason


@lru_cache(maxsize=1)
def _loaded() -> AnswerReader | None:
    """This process's reader, loaded once; None (logged) when it cannot load."""
    if _unavailable() is not None:
        return None
    try:
        return AnswerReader()
    except Exception as exc:  # the reader is optional: the lexical ranker answers alone, never a failure
        log.warning("answer_reader_unavailable", reason=f"{type(exc).__name__}: {str(exc)[:200]}")
        return None
