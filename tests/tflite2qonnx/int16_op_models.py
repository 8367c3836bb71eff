"""Hand-built single-op 16x8 models (int16 activations, zero point 0) for the int16 operator
survey (``scripts/int16_survey.py``) and its tests (``test_int16_ops.py``).

Each case is one builtin with one or two int16 inputs, constant operands where the kernel
needs them, and its output grid either the input's ("same") or another ("diff"): the
requantizing kernels (RELU family, LEAKY_RELU, ABS, ...) take another path when the grids
differ, and the copying kernels (data movement, MAX_POOL_2D, ...) copy the integers whatever
the grids say.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from litert_compare import real_value, reference_interpreter, run_ours
from tflite_writer import build_model

from qonnx_ingest.quant_lowering import lower_quants
from tflite2qonnx.api import convert

S_IN, S_IN2, S_OTHER = 1 / 3000, 0.000123, 1 / 1234.5


def act(name: str, shape, scale: float, dtype: str = "int16") -> dict:
    return {"name": name, "shape": tuple(shape), "dtype": dtype, "quant": ([scale], [0])}


def const(name: str, values, dtype: str = "int32") -> dict:
    data = np.asarray(values, dtype)
    return {"name": name, "shape": data.shape, "dtype": dtype, "data": data}


@dataclass
class Case:
    """One single-op model: ``inputs`` are fed (int16, full range), ``consts`` follow them."""

    op: str
    inputs: list[tuple]  # (shape, scale)
    outputs: list[tuple]  # (shape, scale or None for a non-quantized output, dtype)
    consts: list[dict] = field(default_factory=list)
    lead: list[dict] = field(default_factory=list)  # constant operands ahead of the inputs
    options: tuple | None = None
    version: int = 1
    low: int = -32768  # the least fed integer (positive for LOG, SQRT, RSQRT)

    def model(self, same: bool) -> bytes:
        """The model with every output on the first input's grid (``same``) or another."""
        tensors = [act(f"x{i}", s, sc) for i, (s, sc) in enumerate(self.inputs)]
        n_fed = len(tensors)
        tensors += self.consts + self.lead
        n_in = len(tensors)
        operands = list(range(n_in - len(self.lead), n_in)) + list(range(n_in - len(self.lead)))
        for i, (shape, scale, dtype) in enumerate(self.outputs):
            if scale is None:
                tensors.append({"name": f"y{i}", "shape": tuple(shape), "dtype": dtype})
            else:
                tensors.append(act(f"y{i}", shape, self.inputs[0][1] if same else scale, dtype))
        spec = {"op": self.op, "inputs": operands, "version": self.version}
        spec["outputs"] = list(range(n_in, len(tensors)))
        if self.options is not None:
            spec["options"] = self.options
        return build_model(tensors, [spec], list(range(n_fed)), spec["outputs"])

    def feeds(self, seed: int = 0) -> list[np.ndarray]:
        rng = np.random.default_rng(seed)
        feeds = [rng.integers(self.low, 32768, s).astype(np.int16) for s, _ in self.inputs]
        if self.op in ("DIV", "FLOOR_DIV"):
            feeds[1][feeds[1] == 0] = 1  # the kernels fail on a zero divisor
        return feeds


def _out(shape, scale=S_OTHER, dtype="int16"):
    return (tuple(shape), scale, dtype)


_X4 = (2, 6, 6, 4)
_POOL = ("Pool2DOptions", dict(Padding=1, StrideW=2, StrideH=2, FilterWidth=2, FilterHeight=2))


def _unary(op: str, options=None, version: int = 1, low: int = -32768) -> Case:
    return Case(op, [((4096,), S_IN)], [_out((4096,))], options=options, version=version, low=low)


def _binary(op: str, options=None, version: int = 1, out=None) -> Case:
    return Case(
        op, [((4, 50), S_IN), ((4, 50), S_IN2)], [out or _out((4, 50))], options=options,
        version=version,
    )  # fmt: skip


CASES: dict[str, Case] = {
    "MAX_POOL_2D": Case("MAX_POOL_2D", [(_X4, S_IN)], [_out((2, 3, 3, 4))], options=_POOL),
    "RELU": _unary("RELU", version=3),
    "RELU6": _unary("RELU6", version=3),
    "RELU_N1_TO_1": _unary("RELU_N1_TO_1"),
    "RELU_0_TO_1": _unary("RELU_0_TO_1"),
    "LEAKY_RELU": _unary("LEAKY_RELU", ("LeakyReluOptions", {"Alpha": 0.3}), version=2),
    "ABS": _unary("ABS", version=3),
    "NEG": _unary("NEG"),
    "HARD_SWISH": _unary("HARD_SWISH"),
    "ELU": _unary("ELU"),
    "GELU": _unary("GELU"),
    "EXP": _unary("EXP"),
    "LOG": _unary("LOG", low=1),
    "RSQRT": _unary("RSQRT", low=1, version=2),
    "SQRT": _unary("SQRT", low=1),
    "SQUARE": _unary("SQUARE"),
    "LOG_SOFTMAX": Case("LOG_SOFTMAX", [((4, 64), S_IN)], [_out((4, 64), 16 / 32768)]),
    "L2_NORMALIZATION": Case("L2_NORMALIZATION", [((4, 64), S_IN)], [_out((4, 64), 1 / 32768)]),
    "DEQUANTIZE": Case("DEQUANTIZE", [((4096,), S_IN)], [((4096,), None, "float32")]),
    "PRELU": Case(
        "PRELU",
        [(_X4, S_IN)],
        [_out(_X4)],
        consts=[
            act("alpha", (4,), 1 / 200, "int16") | {"data": np.array([3, -5, 7, 20], np.int16)}
        ],
    ),  # fmt: skip
    "MAXIMUM": _binary("MAXIMUM"),
    "MINIMUM": _binary("MINIMUM"),
    "SQUARED_DIFFERENCE": _binary("SQUARED_DIFFERENCE"),
    "DIV": _binary("DIV"),
    "FLOOR_DIV": _binary("FLOOR_DIV"),
    "POW": _binary("POW"),
    "EQUAL": _binary("EQUAL", out=((4, 50), None, "bool")),
    "NOT_EQUAL": _binary("NOT_EQUAL", out=((4, 50), None, "bool")),
    "LESS": _binary("LESS", out=((4, 50), None, "bool")),
    "GREATER_EQUAL": _binary("GREATER_EQUAL", out=((4, 50), None, "bool")),
    "ARG_MAX": Case(
        "ARG_MAX",
        [((4, 50), S_IN)],
        [((4,), None, "int32")],
        consts=[const("axis", [1])],
        options=("ArgMaxOptions", {"OutputType": 2}),
    ),  # fmt: skip
    "REDUCE_MAX": Case(
        "REDUCE_MAX",
        [((4, 6, 5), S_IN)],
        [_out((4, 5))],
        consts=[const("axes", [1])],
        options=("ReducerOptions", {"KeepDims": False}),
        version=3,
    ),  # fmt: skip
    "REDUCE_MIN": Case(
        "REDUCE_MIN",
        [((4, 6, 5), S_IN)],
        [_out((4, 5))],
        consts=[const("axes", [1])],
        options=("ReducerOptions", {"KeepDims": False}),
        version=3,
    ),  # fmt: skip
    "SUM": Case(
        "SUM",
        [((4, 6, 5), S_IN)],
        [_out((4, 5), 8 / 3000)],
        consts=[const("axes", [1])],
        options=("ReducerOptions", {"KeepDims": False}),
    ),  # fmt: skip
    "REDUCE_PROD": Case(
        "REDUCE_PROD",
        [((4, 3, 5), S_IN)],
        [_out((4, 5))],
        consts=[const("axes", [1])],
        options=("ReducerOptions", {"KeepDims": False}),
    ),  # fmt: skip
    "RESIZE_BILINEAR": Case(
        "RESIZE_BILINEAR",
        [((1, 4, 5, 3), S_IN)],
        [_out((1, 7, 9, 3))],
        consts=[const("size", [7, 9])],
        options=("ResizeBilinearOptions", {"HalfPixelCenters": True}),
        version=3,
    ),  # fmt: skip
    "RESIZE_NEAREST_NEIGHBOR": Case(
        "RESIZE_NEAREST_NEIGHBOR",
        [((1, 4, 5, 3), S_IN)],
        [_out((1, 7, 9, 3))],
        consts=[const("size", [7, 9])],
        options=("ResizeNearestNeighborOptions", {}),
        version=3,
    ),  # fmt: skip
    "RESHAPE": Case("RESHAPE", [((4, 6), S_IN)], [_out((6, 4))], consts=[const("shape", [6, 4])]),
    "TRANSPOSE": Case(
        "TRANSPOSE", [((4, 6, 3), S_IN)], [_out((3, 4, 6))], consts=[const("perm", [2, 0, 1])]
    ),
    "SQUEEZE": Case("SQUEEZE", [((4, 1, 6), S_IN)], [_out((4, 6))]),
    "EXPAND_DIMS": Case(
        "EXPAND_DIMS", [((4, 6), S_IN)], [_out((4, 1, 6))], consts=[const("axis", [1])]
    ),
    "GATHER": Case(
        "GATHER",
        [((5, 6), S_IN)],
        [_out((3, 6))],
        consts=[const("idx", [4, 0, 2])],
        options=("GatherOptions", {"Axis": 0}),
    ),  # fmt: skip
    "GATHER_ND": Case(
        "GATHER_ND", [((5, 6), S_IN)], [_out((2,))], consts=[const("idx", [[4, 1], [0, 5]])]
    ),
    "PAD": Case(
        "PAD",
        [((3, 4), S_IN)],
        [_out((5, 7))],
        consts=[const("pads", [[1, 1], [2, 1]])],
        version=4,
    ),  # fmt: skip
    "PADV2": Case(
        "PADV2",
        [((3, 4), S_IN)],
        [_out((5, 7))],
        consts=[
            const("pads", [[1, 1], [2, 1]]),
            act("value", (), S_IN, "int16") | {"data": np.array(1234, np.int16)},
        ],
    ),  # fmt: skip
    "MIRROR_PAD": Case(
        "MIRROR_PAD",
        [((3, 4), S_IN)],
        [_out((5, 6))],
        consts=[const("pads", [[1, 1], [1, 1]])],
        options=("MirrorPadOptions", {"Mode": 0}),
    ),  # fmt: skip
    "SPACE_TO_DEPTH": Case(
        "SPACE_TO_DEPTH",
        [((1, 4, 4, 3), S_IN)],
        [_out((1, 2, 2, 12))],
        options=("SpaceToDepthOptions", {"BlockSize": 2}),
    ),  # fmt: skip
    "DEPTH_TO_SPACE": Case(
        "DEPTH_TO_SPACE",
        [((1, 2, 2, 12), S_IN)],
        [_out((1, 4, 4, 3))],
        options=("DepthToSpaceOptions", {"BlockSize": 2}),
    ),  # fmt: skip
    "SPACE_TO_BATCH_ND": Case(
        "SPACE_TO_BATCH_ND",
        [((1, 4, 4, 3), S_IN)],
        [_out((4, 2, 2, 3))],
        consts=[const("block", [2, 2]), const("pads", [[0, 0], [0, 0]])],
    ),  # fmt: skip
    "BATCH_TO_SPACE_ND": Case(
        "BATCH_TO_SPACE_ND",
        [((4, 2, 2, 3), S_IN)],
        [_out((1, 4, 4, 3))],
        consts=[const("block", [2, 2]), const("crops", [[0, 0], [0, 0]])],
    ),  # fmt: skip
    "TILE": Case("TILE", [((3, 4), S_IN)], [_out((6, 4))], consts=[const("m", [2, 1])]),
    "BROADCAST_TO": Case(
        "BROADCAST_TO", [((1, 4), S_IN)], [_out((3, 4))], consts=[const("s", [3, 4])]
    ),
    "SLICE": Case(
        "SLICE", [((5, 6), S_IN)], [_out((3, 4))], consts=[const("b", [1, 2]), const("s", [3, 4])]
    ),
    "STRIDED_SLICE": Case(
        "STRIDED_SLICE",
        [((5, 6), S_IN)],
        [_out((2, 3))],
        consts=[const("b", [1, 0]), const("e", [5, 6]), const("s", [2, 2])],
        options=("StridedSliceOptions", {}),
    ),  # fmt: skip
    "REVERSE_V2": Case("REVERSE_V2", [((5, 6), S_IN)], [_out((5, 6))], consts=[const("axis", [1])]),
    "SPLIT": Case(
        "SPLIT",
        [((4, 6), S_IN)],
        [_out((4, 3)), _out((4, 3))],
        lead=[const("axis", 1)],
        options=("SplitOptions", {"NumSplits": 2}),
    ),  # fmt: skip
    "UNPACK": Case(
        "UNPACK",
        [((2, 6), S_IN)],
        [_out((6,)), _out((6,))],
        options=("UnpackOptions", {"Axis": 0, "Num": 2}),
    ),  # fmt: skip
    "PACK": Case(
        "PACK",
        [((6,), S_IN), ((6,), S_IN2)],
        [_out((2, 6))],
        options=("PackOptions", {"Axis": 0, "ValuesCount": 2}),
    ),  # fmt: skip
    "SELECT_V2": Case(
        "SELECT_V2",
        [((4, 50), S_IN), ((4, 50), S_IN2)],
        [_out((4, 50))],
        consts=[const("c", np.arange(200).reshape(4, 50) % 3 == 0, "bool")],
    ),  # fmt: skip
    "TOPK_V2": Case(
        "TOPK_V2",
        [((4, 50), S_IN)],
        [_out((4, 5)), ((4, 5), None, "int32")],
        consts=[const("k", 5)],
    ),  # fmt: skip
    "CUMSUM": Case("CUMSUM", [((4, 50), S_IN)], [_out((4, 50))], consts=[const("axis", 1)]),
}


def _weights(shape, seed: int, per_channel: bool = True) -> dict:
    """Constant int8 weights, per output channel (axis 0) or per tensor."""
    rng = np.random.default_rng(seed)
    n = shape[0] if per_channel else 1
    scales = list(rng.uniform(0.002, 0.02, n))
    data = rng.integers(-127, 128, shape).astype(np.int8)
    return {"name": "w", "shape": shape, "dtype": "int8", "data": data, "quant": (scales, [0] * n)}


def _bias(w: dict, s_in: float, dtype: str = "int64") -> dict:
    """A bias on the accumulator's grid (s_in * s_w per channel), as the kernels assume."""
    n = w["shape"][0]
    data = np.random.default_rng(7).integers(-3000, 3000, n).astype(dtype)
    scales = [float(np.float32(s_in)) * s for s in w["quant"][0]]
    return {"name": "bias", "shape": (n,), "dtype": dtype, "data": data, "quant": (scales, [0] * n)}


_TCONV_W = _weights((5, 3, 3, 3), 1)
CASES["TRANSPOSE_CONV"] = Case(
    "TRANSPOSE_CONV", [((1, 4, 4, 3), S_IN)], [_out((1, 8, 8, 5), 1 / 500)],
    lead=[const("output_shape", [1, 8, 8, 5]), _TCONV_W], consts=[_bias(_TCONV_W, S_IN)],
    options=("TransposeConvOptions", {"Padding": 0, "StrideW": 2, "StrideH": 2}), version=3,
)  # fmt: skip
CASES["BATCH_MATMUL"] = Case(
    "BATCH_MATMUL", [((2, 3, 8), S_IN), ((2, 8, 4), S_IN2)], [_out((2, 3, 4), 1 / 100)],
    options=("BatchMatMulOptions", {}), version=4,
)  # fmt: skip
CASES["SELECT_V2"] = Case(
    "SELECT_V2", [((4, 50), S_IN), ((4, 50), S_IN2)], [_out((4, 50))],
    lead=[const("c", np.arange(200).reshape(4, 50) % 3 == 0, "bool")],
)  # fmt: skip
CASES["PACK"] = Case(
    "PACK", [((6,), S_IN), ((6,), S_IN)], [_out((2, 6))],
    options=("PackOptions", {"Axis": 0, "ValuesCount": 2}),
)  # fmt: skip
CASES["SPLIT_V"] = Case(
    "SPLIT_V", [((4, 6), S_IN)], [_out((4, 2)), _out((4, 4))],
    consts=[const("sizes", [2, 4]), const("axis", 1)], options=("SplitVOptions", {"NumSplits": 2}),
)  # fmt: skip
CASES["ADD_N"] = Case("ADD_N", [((4, 50), S_IN), ((4, 50), S_IN)], [_out((4, 50))])
CASES["L2_POOL_2D"] = Case("L2_POOL_2D", [(_X4, S_IN)], [_out((2, 3, 3, 4))], options=_POOL)
CASES["QUANTIZE_FLOAT"] = Case("QUANTIZE", [((4096,), S_IN)], [_out((4096,))])


def differences(
    data: bytes, feeds: list[np.ndarray], bit_exact: bool, xnnpack: bool = False
) -> np.ndarray:
    """Per output element: |ours - interpreter| in output steps (0/1 for bool and int
    outputs, relative error over 1e-6 for float ones); ``xnnpack``: against the default
    resolver's kernels instead of the builtin reference ones."""
    it = reference_interpreter(data, xnnpack=xnnpack)
    real = {}
    for detail, q in zip(it.get_input_details(), feeds, strict=True):
        it.set_tensor(detail["index"], q)
        real[detail["name"]] = real_value(q, detail["quantization"])
    it.invoke()
    ours = run_ours(lower_quants(convert(data, bit_exact=bit_exact)), real)
    diffs = []
    for out in it.get_output_details():
        ref = it.get_tensor(out["index"])
        mine = np.asarray(ours[out["name"]])
        scale, zero_point = out["quantization"]
        if ref.dtype == np.int16 or ref.dtype == np.int8:
            q = np.round(mine.astype(np.float64) / scale) + zero_point
            diffs.append(np.abs(q - ref.astype(np.float64)).ravel())
        elif ref.dtype == np.float32:
            diffs.append((np.abs(mine - ref) > 1e-6 * np.abs(ref).max()).ravel().astype(float))
        else:
            diffs.append((mine.astype(ref.dtype) != ref).ravel().astype(float))
    return np.concatenate(diffs)
