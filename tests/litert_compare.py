"""Run a converted model and the TFLite interpreter (ai-edge-litert) on the same inputs.

Everything is compared in TFLite's terms: real values in the source (NHWC) layout, and for
quantized tensors the integer grid of the interpreter's own tensor.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import onnx
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from layout import stored_perms
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.verification import run_converted
from tflite2qonnx.api import convert_subgraph, slice_subgraph


def reference_interpreter(source, *, preserve_all: bool = False, xnnpack: bool = False):
    """The builtin reference kernels (the semantics the file defines), or XNNPACK's path."""
    kwargs = (
        {"model_path": str(source)} if not isinstance(source, bytes) else {"model_content": source}
    )
    if not xnnpack:
        kwargs["experimental_op_resolver_type"] = OpResolverType.BUILTIN_REF
    it = Interpreter(**kwargs, experimental_preserve_all_tensors=preserve_all)
    it.allocate_tensors()
    return it


def random_input(detail: dict, rng: np.random.Generator, low: float = -1.0, high: float = 1.0):
    """Uniform over [low, high] for float inputs, over the whole range for integer ones."""
    if detail["dtype"] == np.float32:
        return rng.uniform(low, high, detail["shape"]).astype(np.float32)
    info = np.iinfo(detail["dtype"])
    return rng.integers(info.min, info.max + 1, detail["shape"]).astype(detail["dtype"])


def real_value(array: np.ndarray, quantization: tuple[float, int] | None) -> np.ndarray:
    """scale * (q - zero_point) for integer tensors (TFLite's definition), else the array."""
    if quantization is None or not np.issubdtype(array.dtype, np.integer):
        return np.asarray(array, np.float32)
    scale, zero_point = quantization
    return (scale * (array.astype(np.float64) - zero_point)).astype(np.float32)


def valid_window_sums(q: np.ndarray, options: dict) -> np.ndarray:
    """Exact int64 sums of a VALID NHWC pooling window over the raw integers ``q``."""
    assert options["padding"] == "VALID", "written for VALID pools"
    kh, kw = options["filter_height"], options["filter_width"]
    sh, sw = options["stride_h"], options["stride_w"]
    n, h, w, c = q.shape
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    sums = np.zeros((n, oh, ow, c), np.int64)
    for i in range(kh):
        for j in range(kw):
            sums += q[:, i : i + sh * oh : sh, j : j + sw * ow : sw, :].astype(np.int64)
    return sums


def run_ours(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Execute with source-layout real feeds; outputs come back in source layout."""
    perms = stored_perms(model)
    stored = {k: (v.transpose(perms[k]) if k in perms else v) for k, v in feeds.items()}
    outs = _execute(model, stored)
    return {
        k: (v.transpose(np.argsort(perms[k])) if k in perms else v)
        for k, v in outs.items()
        if k in {o.name for o in model.graph.output}
    }


def _execute(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """qonnx's executor for QONNX graphs; a graph of standard ops only runs as --verify runs it,
    in one onnxruntime session (the same kernels, without qonnx's node-by-node cost: minutes
    on dp_net)."""
    if any(n.domain not in ("", "ai.onnx") for n in model.graph.node):
        return execute_qonnx(model, feeds)
    (outputs,), _ = run_converted(model, [feeds])
    return outputs


@dataclass
class OutputPair:
    """One output on one input: the interpreter's and ours, as real values."""

    name: str
    reference: np.ndarray
    ours: np.ndarray
    grid: tuple[float, int] | None  # (scale, zero point) of an integer output

    def steps(self) -> np.ndarray:
        """|ours - reference| in steps of the output's grid."""
        scale, zero_point = self.grid
        ours = np.round(self.ours.astype(np.float64) / scale) + zero_point
        ref = np.round(self.reference.astype(np.float64) / scale) + zero_point
        return np.abs(ours - ref).ravel()

    def float_error_ok(self, rtol: float = 1e-4) -> bool:
        """max |ours - reference| <= rtol * max(1, max |reference|) over the output."""
        bound = rtol * max(1.0, float(np.max(np.abs(self.reference))))
        return bool(np.max(np.abs(self.ours - self.reference)) <= bound)


def compare(
    model: onnx.ModelProto,
    it,
    *,
    n_inputs: int = 8,
    seed: int = 0,
    low: float = -1.0,
    high: float = 1.0,
) -> list[OutputPair]:
    """Run both on ``n_inputs`` seeded random inputs; one OutputPair per output and input."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n_inputs):
        feeds = {}
        for detail in it.get_input_details():
            x = random_input(detail, rng, low, high)
            it.set_tensor(detail["index"], x)
            feeds[detail["name"]] = real_value(x, detail["quantization"])
        it.reset_all_variables()  # a run starts from the initial state (see ops.recurrent.lstm)
        it.invoke()
        ours = run_ours(model, feeds)
        for detail in it.get_output_details():
            ref = it.get_tensor(detail["index"])
            grid = detail["quantization"] if np.issubdtype(ref.dtype, np.integer) else None
            pairs.append(
                OutputPair(detail["name"], real_value(ref, grid), ours[detail["name"]], grid)
            )
    return pairs


def _quantization(detail: dict) -> tuple[float, int] | None:
    params = detail["quantization_parameters"]
    if len(params["scales"]) != 1:
        return None  # per-axis tensors are constants here, never op-by-op feeds
    return float(params["scales"][0]), int(params["zero_points"][0])


def _exact_average_ties(q: np.ndarray, op) -> np.ndarray:
    """Where TFLite's integer AVERAGE_POOL_2D (VALID) averages land exactly on a half.

    Its output is the raw inputs' window mean rounded half away from zero; float evaluation
    of that mean is off by an ulp or so, enough to round an exact tie either way.
    """
    sums = valid_window_sums(q, op.options)
    count = op.options["filter_height"] * op.options["filter_width"]
    return ((2 * sums) % (2 * count) == count).ravel()


def steps_per_op(path, subgraph, xnnpack: bool, n_inputs: int = 2, bit_exact: bool = False):
    """``bit_exact``: convert with it, and count exact average-pool ties as differences too."""
    it = reference_interpreter(path, preserve_all=True, xnnpack=xnnpack)
    details = it.get_tensor_details()
    steps: dict[tuple[int, str], list[np.ndarray]] = defaultdict(list)
    rng = np.random.default_rng(20261121)
    models = {}
    for _ in range(n_inputs):
        for detail in it.get_input_details():
            it.set_tensor(detail["index"], random_input(detail, rng))
        it.reset_all_variables()
        it.invoke()
        for op in subgraph.operators:
            (out,) = op.outputs
            grid = _quantization(details[out])
            if grid is None or not np.issubdtype(details[out]["dtype"], np.integer):
                continue  # DEQUANTIZE to float: nothing quantized to compare on
            piece = slice_subgraph(subgraph, [op.index])
            if op.index not in models:
                models[op.index] = convert_subgraph(piece, keep_io_layout=True, bit_exact=bit_exact)
            feeds = {
                details[i]["name"]: real_value(it.get_tensor(i), _quantization(details[i]))
                for i in piece.inputs
            }
            ours = run_ours(models[op.index], feeds)[details[out]["name"]]
            scale, zero_point = grid
            ours_q = np.round(ours.astype(np.float64) / scale) + zero_point
            theirs = it.get_tensor(out).astype(np.float64)
            diff = np.abs(ours_q - theirs).ravel()
            # exact ties may round either way in float: count as equal (bit_exact: no leeway)
            if op.name == "AVERAGE_POOL_2D" and not bit_exact:
                diff[_exact_average_ties(it.get_tensor(op.inputs[0]), op) & (diff == 1)] = 0
            steps[(op.index, op.name)].append(diff)
    return {key: np.concatenate(v) for key, v in steps.items()}


def integer_differences(it, session, q: np.ndarray) -> tuple[int, int]:
    """Run the interpreter ``it`` (one input, one output) and the onnxruntime ``session`` of our
    model on the stored input integers ``q``: (output integers that differ, output integers)."""
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    it.set_tensor(inp["index"], q.astype(inp["dtype"]))
    it.invoke()
    theirs = it.get_tensor(out["index"]).astype(np.int64)
    scale, zero_point = inp["quantization"]
    real = (scale * (q.astype(np.float32) - zero_point)).astype(np.float32)
    (ours,) = session.run(None, {inp["name"]: real})
    s_out, zp_out = out["quantization"]
    ours_q = np.round(ours.astype(np.float64) / s_out) + zp_out
    return int(np.sum(ours_q != theirs)), ours_q.size
