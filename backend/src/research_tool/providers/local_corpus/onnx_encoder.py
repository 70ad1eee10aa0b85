"""all-MiniLM-L6-v2 as an ONNX graph built here from its safetensors, run by onnxruntime (the encoder's fast runtime).

Why: the numpy forward pass costs about 0.12 CPU-s per 235-token passage and reads all of its float32 weights for a
20-token query; onnxruntime's fused CPU kernels (and, for "int8", MatMul weights quantized to int8) do the same
forward pass in a fraction of that (docs/semantic-search.md has the measured table).

The graph is written node by node with `onnx.helper` (no torch, no exporter, no download): BERT's embeddings and
LayerNorm, `layers` blocks of 12-head self-attention and a GELU (exact, erf) feed-forward, then mean pooling over
the attention mask and L2 normalisation, in the graph. Inputs `input_ids` and `attention_mask` (int64, batch x
tokens), output `embeddings` (float32, batch x 384, unit rows).

Built once per weights file and variant, then cached (`model_cache_dir()`), written atomically, and rebuilt once
when the cached file does not load (`cached_forward`); when the cache cannot be written the model is built in
memory for the process. "int8" is `onnxruntime.quantization.quantize_dynamic` over
the MatMuls with constant weights (per-channel int8); its vectors differ from float32 by about 1% in cosine, so its
model key differs too (embeddings.SentenceEncoder.model_key) and a folder encoded by another variant re-embeds.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from research_tool.core.logging import get_logger

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = get_logger(__name__)

ENCODER_CACHE_ENV = "RESEARCH_ENCODER_CACHE"  # folder of the built .onnx files (default: the user's cache folder)
OPSET = 17  # LayerNormalization is an ONNX op from 17 on
VARIANTS = ("fp32", "int8")
_GRAPH_VERSION = "1"  # bump when the graph written here changes, so cached files are rebuilt


def model_cache_dir() -> Path:
    """Where built models go: $RESEARCH_ENCODER_CACHE, else (XDG_CACHE_HOME or ~/.cache)/research-tool/encoders."""
    configured = os.environ.get(ENCODER_CACHE_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base).expanduser() / "research-tool" / "encoders"


def encoder_cache_file(digest: str, variant: str) -> Path:
    """The cached encoder model for the weights file `digest` names and `variant` (one of VARIANTS)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown encoder variant {variant!r}: one of {', '.join(VARIANTS)}")
    return model_cache_dir() / f"all-minilm-l6-v2-{digest}-g{_GRAPH_VERSION}-{variant}.onnx"


def build_graph(
    weights: Mapping[str, npt.NDArray[np.float32]],
    *,
    layers: int,
    heads: int,
    hidden: int,
    layer_norm_eps: float,
    head: tuple[npt.NDArray[np.float32], float] | None = None,
) -> Any:
    """The encoder (BERT + mean pooling + L2 norm) as an onnx.ModelProto, from BERT's weights keyed without `bert.`.

    With a `head` (weight vector, bias), the answer reader's cross-encoder instead: a third input `token_type_ids`
    (0 for the question, 1 for the passage), and the mean-pooled vector's dot product with the head plus its bias
    as the output `logits` (batch), with no normalisation."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[Any] = []
    initializers: list[Any] = []
    counter = itertools.count()

    def const(name: str, array: Any) -> str:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(kind: str, inputs: list[str], **attributes: Any) -> str:
        output = f"{kind.lower()}_{next(counter)}"
        nodes.append(helper.make_node(kind, inputs, [output], name=output, **attributes))
        return output

    def linear(x: str, name: str) -> str:
        # Stored (out, in): transposed once so the layer is x @ W + b (a MatMul that int8 quantization takes).
        weight = const(f"{name}.weight", np.asarray(weights[f"{name}.weight"], np.float32).T)
        return op("Add", [op("MatMul", [x, weight]), const(f"{name}.bias", weights[f"{name}.bias"])])

    def layer_norm(x: str, name: str) -> str:
        gamma = const(f"{name}.weight", weights[f"{name}.weight"])
        beta = const(f"{name}.bias", weights[f"{name}.bias"])
        return op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=layer_norm_eps)

    head_size = hidden // heads
    split_heads = const("split_heads", np.array([0, 0, heads, head_size], np.int64))
    merge_heads = const("merge_heads", np.array([0, 0, hidden], np.int64))
    scale = const("attention_scale", np.array(head_size**-0.5, np.float32))
    one_f = const("one_f", np.array(1.0, np.float32))

    ids = "input_ids"
    mask = op("Cast", ["attention_mask"], to=TensorProto.FLOAT)  # batch x tokens
    length = op("Shape", [ids], start=1, end=2)  # [tokens], 1-D
    positions = op(
        "Slice",
        [
            const("embeddings.position_embeddings.weight", weights["embeddings.position_embeddings.weight"]),
            const("zero_i", np.array([0], np.int64)),
            length,
            const("axis_0", np.array([0], np.int64)),
        ],
    )  # the first `tokens` rows of the position table
    word_table = const("embeddings.word_embeddings.weight", weights["embeddings.word_embeddings.weight"])
    x = op("Add", [op("Gather", [word_table, ids]), positions])
    type_table = np.asarray(weights["embeddings.token_type_embeddings.weight"], np.float32)
    if head is None:
        x = op("Add", [x, const("token_type_0", type_table[0])])
    else:
        x = op(
            "Add", [x, op("Gather", [const("embeddings.token_type_embeddings.weight", type_table), "token_type_ids"])]
        )
    x = layer_norm(x, "embeddings.LayerNorm")
    # Padded keys get -1e9 before the softmax, so they take no attention (batch x 1 x 1 x tokens).
    key_bias = op(
        "Unsqueeze",
        [
            op("Mul", [op("Sub", [one_f, mask]), const("masked", np.array(-1e9, np.float32))]),
            const("axes_1_2", np.array([1, 2], np.int64)),
        ],
    )
    for layer in range(layers):
        p = f"encoder.layer.{layer}."
        query = op(
            "Transpose", [op("Reshape", [linear(x, p + "attention.self.query"), split_heads])], perm=[0, 2, 1, 3]
        )
        key = op("Transpose", [op("Reshape", [linear(x, p + "attention.self.key"), split_heads])], perm=[0, 2, 3, 1])
        value = op(
            "Transpose", [op("Reshape", [linear(x, p + "attention.self.value"), split_heads])], perm=[0, 2, 1, 3]
        )
        scores = op("Add", [op("Mul", [op("MatMul", [query, key]), scale]), key_bias])
        context = op("MatMul", [op("Softmax", [scores], axis=-1), value])
        context = op("Reshape", [op("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        x = layer_norm(op("Add", [linear(context, p + "attention.output.dense"), x]), p + "attention.output.LayerNorm")
        inner = linear(x, p + "intermediate.dense")
        # GELU, exact: 0.5 x (1 + erf(x / sqrt 2)); onnxruntime fuses the pattern into its Gelu kernel.
        erf = op("Erf", [op("Mul", [inner, const(f"inv_sqrt2_{layer}", np.array(2**-0.5, np.float32))])])
        inner = op(
            "Mul", [op("Mul", [inner, op("Add", [erf, one_f])]), const(f"half_{layer}", np.array(0.5, np.float32))]
        )
        x = layer_norm(op("Add", [linear(inner, p + "output.dense"), x]), p + "output.LayerNorm")
    token_weights = op("Unsqueeze", [mask, const("axis_2", np.array([2], np.int64))])  # batch x tokens x 1
    axis_1 = const("axis_1", np.array([1], np.int64))
    summed = op("ReduceSum", [op("Mul", [x, token_weights]), axis_1], keepdims=0)
    counts = op(
        "Max", [op("ReduceSum", [token_weights, axis_1], keepdims=0), const("min_count", np.array(1e-9, np.float32))]
    )
    pooled = op("Div", [summed, counts])
    if head is not None:
        return _reader_model(nodes, initializers, pooled, head, hidden)
    norm = op("Sqrt", [op("ReduceSum", [op("Mul", [pooled, pooled]), axis_1], keepdims=1)])
    norm = op("Max", [norm, const("min_norm", np.array(1e-12, np.float32))])
    nodes.append(helper.make_node("Div", [pooled, norm], ["embeddings"], name="embeddings"))
    graph = helper.make_graph(
        nodes,
        "all_minilm_mean_pooled",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", hidden])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="research-tool")
    model.ir_version = 8  # readable by every onnxruntime that knows opset 17
    return model


def _reader_model(
    nodes: list[Any], initializers: list[Any], pooled: str, head: tuple[npt.NDArray[np.float32], float], hidden: int
) -> Any:
    """The cross-encoder's graph: `pooled` (batch x hidden) @ head + bias -> `logits` (batch)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    weight, bias = head
    initializers.append(numpy_helper.from_array(np.asarray(weight, np.float32).reshape(hidden, 1), "head.weight"))
    initializers.append(numpy_helper.from_array(np.asarray([bias], np.float32), "head.bias"))
    initializers.append(numpy_helper.from_array(np.array([-1], np.int64), "head.flat"))
    nodes.append(helper.make_node("MatMul", [pooled, "head.weight"], ["head_matmul"], name="head_matmul"))
    nodes.append(helper.make_node("Add", ["head_matmul", "head.bias"], ["head_add"], name="head_add"))
    nodes.append(helper.make_node("Reshape", ["head_add", "head.flat"], ["logits"], name="logits"))
    graph = helper.make_graph(
        nodes,
        "all_minilm_answer_reader",
        [
            helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
            for name in ("input_ids", "attention_mask", "token_type_ids")
        ],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch"])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="research-tool")
    model.ir_version = 8
    return model


def quantize_int8(source: Path, target: Path) -> None:
    """`source`'s MatMuls with constant weights -> int8 weights (per channel), activations quantized on the fly."""
    from onnxruntime.quantization import QuantType, quantize_dynamic  # type: ignore[import-untyped]

    quantize_dynamic(
        str(source),
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
    )


def cached_forward(
    target: Path,
    build_model: Callable[[], Any],
    *,
    variant: str,
    threads: int,
    output: str = "embeddings",
    what: str = "encoder",
) -> OnnxForward:
    """An onnxruntime session over the model cached at `target`; the model is built (`build_model()` -> the float32
    onnx.ModelProto, quantized here for "int8") when the file is missing, and rebuilt once, with a warning, when
    the cached file does not load (truncated, emptied or overwritten: a crash while it was written, a full disk).

    Written atomically (a scratch file beside it, fsynced, renamed over `target`, the folder fsynced), so a reader
    sees the old file or the whole new one; a concurrent builder's file is as good as this one. When the cache
    cannot be written the model is built in memory for this process."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown {what} variant {variant!r}: one of {', '.join(VARIANTS)}")
    if target.is_file():
        try:
            return OnnxForward(target, threads=threads, output=output)
        except Exception as exc:  # onnxruntime raises its own types (InvalidProtobuf, Fail, ...)
            log.warning(
                "model_cache_damaged",
                what=what,
                path=str(target),
                error=f"{type(exc).__name__}: {str(exc)[:200]}",
                action="rebuilding it",
            )
    model = _write_cached(target, build_model().SerializeToString(), variant, what)
    return OnnxForward(model, threads=threads, output=output)


def _write_cached(target: Path, raw: bytes, variant: str, what: str) -> Path | bytes:
    """`raw` (a float32 model) as `variant`, written atomically to `target`; its bytes when that cannot be done."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as scratch:
            built = _materialise(raw, variant, Path(scratch))
            _fsync(built, os.O_RDONLY)
            os.replace(built, target)
            _fsync(target.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        log.warning(f"{what}_cache_unwritable", folder=str(target.parent), error=str(exc)[:200])
        with tempfile.TemporaryDirectory(prefix="research-tool-encoder-") as scratch:
            return _materialise(raw, variant, Path(scratch)).read_bytes()
    log.info(f"{what}_model_built", path=str(target), variant=variant)
    return target


def _materialise(raw: bytes, variant: str, folder: Path) -> Path:
    """The model file for `variant` in `folder`, from the float32 model's bytes."""
    fp32 = folder / "fp32.onnx"
    fp32.write_bytes(raw)
    if variant == "fp32":
        return fp32
    int8 = folder / "int8.onnx"
    quantize_int8(fp32, int8)
    return int8


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class OnnxForward:
    """One onnxruntime session over a built model: (ids, mask) -> unit vectors."""

    def __init__(self, model: Path | bytes, *, threads: int, output: str = "embeddings") -> None:
        import onnxruntime as ort  # type: ignore[import-untyped]

        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Worker threads that spin while idle burn CPU the other processes on a shared machine need.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        source = str(model) if isinstance(model, Path) else model
        self._session = ort.InferenceSession(source, sess_options=options, providers=["CPUExecutionProvider"])
        self._output = output

    def run(self, feeds: dict[str, npt.NDArray[np.int64]]) -> npt.NDArray[np.float32]:
        """The model's one output for `feeds` (input name -> int64 batch x tokens)."""
        import numpy as np

        (out,) = self._session.run([self._output], feeds)
        return np.asarray(out, dtype=np.float32)

    def __call__(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
        return self.run({"input_ids": ids, "attention_mask": mask})
