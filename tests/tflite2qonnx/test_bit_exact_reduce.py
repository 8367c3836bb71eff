"""--bit-exact SUM, REDUCE_PROD and uint8 SOFTMAX against the interpreter's builtin kernels.

SUM is compared with the optimized builtin kernel (BUILTIN_WITHOUT_DEFAULT_DELEGATES: no
XNNPACK): the reference resolver's int8 SUM writes wrong values (see tf_models.py). REDUCE_PROD
and SOFTMAX with the reference kernels (BUILTIN_REF), as everywhere else. The uint8 models are
the int8 ones with every int8 tensor moved to uint8 (zero point + 128): the same real values,
the uint8 kernel.
"""

from __future__ import annotations

import warnings
import zlib

import flatbuffers
import numpy as np
import pytest
from litert_compare import compare

from qonnx_ingest.errors import ConversionWarning
from tflite2qonnx.api import convert
from tflite2qonnx.reader import read_model

pytestmark = pytest.mark.keras


def _cases():
    from tf_models import OpCase, _fn

    def sum_(axes, keep):
        return _fn(lambda tf, x: tf.reduce_sum(x, axes, keepdims=keep))

    def prod(axes, keep):
        return _fn(lambda tf, x: tf.reduce_prod(x, axes, keepdims=keep))

    return {
        "sum_height_width": OpCase("SUM", sum_([1, 2], False)),
        "sum_width_keepdims": OpCase("SUM", sum_([2], True), ((1, 6, 8),)),
        "sum_channels_positive_input": OpCase("SUM", sum_([3], False), ((1, 5, 6, 7),), 0, 2),
        "sum_first_and_last_keepdims": OpCase("SUM", sum_([0, 2], True), ((3, 4, 5),)),
        "prod_width_keepdims": OpCase("REDUCE_PROD", prod([2], True), low=0.5, high=1.5),
        "prod_height_channels_signed": OpCase(
            "REDUCE_PROD", prod([1, 3], False), ((1, 3, 4, 2),), -1.3, 1.3
        ),
        "prod_height_width_positive": OpCase(
            "REDUCE_PROD", prod([1, 2], True), ((1, 2, 3, 4),), 0.2, 1.8
        ),
        "softmax": OpCase("SOFTMAX", _fn(lambda tf, x: tf.nn.softmax(x * 3.0)), ((2, 10),)),
    }


def as_uint8(data: bytes) -> bytes:
    """The model with each int8 tensor (constants too) stored as uint8 on the same grid."""
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    for tensor in model.subgraphs[0].tensors:
        if tensor.type != schema.TensorType.INT8:
            continue
        assert len(tensor.quantization.scale) == 1, "per-tensor grids only"
        tensor.type = schema.TensorType.UINT8
        buffer = model.buffers[tensor.buffer] if tensor.buffer else None
        if buffer is not None and buffer.data is not None and len(buffer.data):
            q = np.asarray(buffer.data, np.uint8).view(np.int8).astype(np.int16) + 128
            buffer.data = q.astype(np.uint8)
        tensor.quantization.zeroPoint = [z + 128 for z in tensor.quantization.zeroPoint]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


@pytest.fixture(scope="module")
def models():
    from tf_models import build_tflite

    cases = _cases()
    return {
        name: build_tflite(case, True, seed=zlib.crc32(name.encode()) % 1000)
        for name, case in cases.items()
    }


def _interpreter(data: bytes, optimized: bool):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = "BUILTIN_WITHOUT_DEFAULT_DELEGATES" if optimized else "BUILTIN_REF"
    it = Interpreter(
        model_content=data, experimental_op_resolver_type=getattr(OpResolverType, kind)
    )
    it.allocate_tensors()
    return it


def _steps(data: bytes, kind: str, optimized: bool = False, **kwargs) -> np.ndarray:
    """|ours - builtin| in output steps on seeded inputs; nothing may be left to one rounding."""
    assert kind in {op.name for op in read_model(data).subgraphs[0].operators}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        model = convert(data, bit_exact=True)
    pairs = compare(model, _interpreter(data, optimized), **kwargs)
    return np.concatenate([p.steps() for p in pairs])


@pytest.mark.parametrize(
    "name",
    [
        "sum_height_width",
        "sum_width_keepdims",
        "sum_channels_positive_input",
        "sum_first_and_last_keepdims",
    ],
)
def test_sum_equals_the_optimized_builtin_kernel(models, name: str) -> None:
    """The raw integers summed, scaled and offset in float32, rounded half away from zero."""
    steps = _steps(models[name], "SUM", optimized=True, n_inputs=8)
    assert steps.size and np.all(steps == 0), f"{np.mean(steps != 0):.4%} differ"


@pytest.mark.parametrize(
    "name",
    ["prod_width_keepdims", "prod_height_channels_signed", "prod_height_width_positive"],
)
def test_reduce_prod_equals_builtin(models, name: str) -> None:
    """Each partial product rescaled by the 64-bit multiplier, in memory order, then once more."""
    steps = _steps(models[name], "REDUCE_PROD", n_inputs=8)
    assert steps.size and np.all(steps == 0), f"{np.mean(steps != 0):.4%} differ"


def test_reduce_prod_default_conversion_rounds_once_and_differs(models) -> None:
    """Why the kernel is needed: rounding the product once is a step off somewhere."""
    data = models["prod_height_width_positive"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)
        model = convert(data)
    steps = np.concatenate([p.steps() for p in compare(model, _interpreter(data, False))])
    assert np.any(steps != 0)


def test_uint8_softmax_equals_builtin(models) -> None:
    """uint8 SOFTMAX: the same float table as int8, its (int)(p + 0.5f) rounding."""
    data = as_uint8(models["softmax"])
    it = _interpreter(data, False)
    assert [d["dtype"] for d in it.get_input_details() + it.get_output_details()] == [np.uint8] * 2
    steps = _steps(data, "SOFTMAX", n_inputs=16)
    assert steps.size and np.all(steps == 0), f"{np.mean(steps != 0):.4%} differ"


def _reduce_model(op: str, dtype: str, shape, axes, grid_in, grid_out) -> bytes:
    """A hand-built one-op SUM / REDUCE_PROD model (keep_dims off)."""
    from tflite_writer import build_model

    out_shape = [d for k, d in enumerate(shape) if k not in axes]
    tensors = [
        {"name": "x", "shape": tuple(shape), "dtype": dtype, "quant": ([grid_in[0]], [grid_in[1]])},
        {"name": "axes", "shape": (len(axes),), "dtype": "int32", "data": np.int32(axes)},
        {"name": "y", "shape": tuple(out_shape), "dtype": dtype,
         "quant": ([grid_out[0]], [grid_out[1]])},
    ]  # fmt: skip
    spec = {"op": op, "inputs": [0, 1], "outputs": [2], "options": ("ReducerOptions", {})}
    return build_model(tensors, [spec], [0], [2])


def _integer_feeds(dtype: str, shape, zero_point: int, seed: int) -> list[np.ndarray]:
    """Uniform over the range, the range's ends (saturating sums, wrapping products), and
    values next to the zero point (sums where the zero point's offset matters most)."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    ends = [info.min, info.min + 1, info.max, zero_point, zero_point + 1, zero_point - 1]
    near = np.clip(zero_point + rng.integers(-2, 3, shape), info.min, info.max)
    return [
        rng.integers(info.min, info.max + 1, shape).astype(dtype),
        rng.choice(np.clip(ends, info.min, info.max), shape).astype(dtype),
        near.astype(dtype),
        np.full(shape, info.max, dtype),
    ]


def _integer_mismatches(data: bytes, feeds: list[np.ndarray], optimized: bool) -> tuple[int, int]:
    """(outputs that differ, outputs) between --bit-exact and the builtin kernel, on integers
    (the Quant nodes lowered: one onnxruntime session, as --verify runs it)."""
    from litert_compare import real_value, run_ours

    from qonnx_ingest.quant_lowering import lower_quants

    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        model = lower_quants(convert(data, bit_exact=True))
    it = _interpreter(data, optimized)
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    bad = total = 0
    for q in feeds:
        it.set_tensor(inp["index"], q)
        it.invoke()
        theirs = it.get_tensor(out["index"]).astype(np.int64)
        (ours,) = run_ours(model, {inp["name"]: real_value(q, inp["quantization"])}).values()
        scale, zero_point = out["quantization"]
        bad += int(np.sum(np.round(ours.astype(np.float64) / scale) + zero_point != theirs))
        total += theirs.size
    return bad, total


SUM_SHAPES = [((4, 6, 5), [1]), ((2, 3, 4), [0, 1, 2]), ((2, 3, 4, 5), [1, 2]), ((5, 7), [0])]


@pytest.mark.parametrize(
    "dtype, zero_point",
    [("int8", 0), ("int8", -5), ("int8", 7), ("uint8", 128), ("uint8", 3), ("int16", 0)],
)
def test_sum_on_one_grid_equals_the_optimized_builtin_kernel(dtype: str, zero_point: int) -> None:
    """On one grid the default resolver's SUM is ``sum(q) - (N - 1) * zp``, saturated (not
    the raw integers wrapping in the storage type): scale 1, offset ``-zp * N`` in the same
    float32 arithmetic as between grids. Was refused under --bit-exact."""
    bad = total = 0
    for k, (shape, axes) in enumerate(SUM_SHAPES):
        data = _reduce_model("SUM", dtype, shape, axes, (0.05, zero_point), (0.05, zero_point))
        feeds = _integer_feeds(dtype, shape, zero_point, seed=k)
        b, t = _integer_mismatches(data, feeds, optimized=True)
        bad, total = bad + b, total + t
    assert total > 0 and bad == 0, f"{bad} of {total} differ"


def test_long_sum_equals_the_optimized_builtin_kernel() -> None:
    """140,000 int8 elements: the int32 sum passes 2^24 and the kernel's float conversion
    rounds it; summing in float32 (as before) would not be that rounding."""
    shape = (1, 140_000)
    for grid_out in [(0.05, -3), (0.07, 4)]:
        data = _reduce_model("SUM", "int8", shape, [1], (0.05, -3), grid_out)
        feeds = _integer_feeds("int8", shape, -3, seed=1)
        assert _integer_mismatches(data, feeds, optimized=True) == (0, 4)


def test_sum_whose_int32_sum_could_overflow_is_refused() -> None:
    from qonnx_ingest.errors import ConversionError

    data = _reduce_model("SUM", "int16", (1, 40_000), [1], (0.05, 0), (0.5, 0))
    with pytest.raises(ConversionError, match="SUM over too many elements for an int32 sum"):
        convert(data, bit_exact=True)


def _prod_configs(count: int, seed: int = 42):
    """Seeded REDUCE_PROD grids: input scales 1e-3..3, output scales 1e-4..10 (multipliers
    that wrap the kernel's int32 partial products, and ones that round everything to 0)."""
    rng = np.random.default_rng(seed)
    for k in range(count):
        n = int(rng.integers(1, 7))
        shape, axes = ((3, n, 4), [1]) if k % 2 else ((2, 3, n), [2])
        grid_in = (float(10 ** rng.uniform(-3, 0.5)), int(rng.integers(-20, 21)))
        grid_out = (float(10 ** rng.uniform(-4, 1)), int(rng.integers(-20, 21)))
        yield shape, axes, grid_in, grid_out


def test_int8_reduce_prod_equals_builtin_over_scales_and_wraparound() -> None:
    """40 seeded grids x 6 inputs (uniform, the range's ends, around the zero point): 100%
    equal. Where a partial product leaves int32 the kernel's int64 -> int32 cast wraps; this
    was refused (a quarter of these grids) and is emulated in int64 now."""
    bad = total = 0
    for k, (shape, axes, grid_in, grid_out) in enumerate(_prod_configs(40)):
        data = _reduce_model("REDUCE_PROD", "int8", shape, axes, grid_in, grid_out)
        feeds = _integer_feeds("int8", shape, grid_in[1], seed=k)
        b, t = _integer_mismatches(data, feeds, optimized=False)
        bad, total = bad + b, total + t
    assert total > 0 and bad == 0, f"{bad} of {total} differ"


@pytest.mark.parametrize(
    "grid_in, grid_out",
    [((1.0, 0), (1e-4, 0)), ((0.5, 3), (1e-5, -7)), ((1e-9, 0), (1e4, 5))],
    ids=["wraps", "wraps_zero_points", "multiplier_underflows"],
)
def test_int8_reduce_prod_edge_grids_equal_builtin(grid_in, grid_out) -> None:
    """Products 128^4 rescaled by ~10 each step leave int32 in the kernel and wrap; a
    multiplier under 2^-32 is 0 in QuantizeMultiplier, every output the zero point."""
    shape = (3, 4, 5)
    data = _reduce_model("REDUCE_PROD", "int8", shape, [1], grid_in, grid_out)
    feeds = _integer_feeds("int8", shape, grid_in[1], seed=3)
    assert _integer_mismatches(data, feeds, optimized=False)[0] == 0
