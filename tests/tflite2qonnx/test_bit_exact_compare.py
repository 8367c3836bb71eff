"""--bit-exact comparisons, DIV and NEG (int8 and uint8), and LOG, MAXIMUM / MINIMUM and
SQUARED_DIFFERENCE at their edges, against the interpreter's builtin reference kernels
(BUILTIN_REF), on every stored input or pair of stored inputs.

The two-input models take a (1, 256, 1) and a (1, 1, 256) input, so one invocation broadcasts
every stored integer of the first against every one of the second (65,536 pairs). Their
operands' grids are set by hand (``_with_input_grids``) to reach the edges: differing scales,
scales below 1/256 (where the comparison kernel's rescaling merges neighbouring integers),
coarse output grids (where DIV's right shift reaches 32). uint8 models are the int8 ones moved
to uint8 (``test_bit_exact_reduce.as_uint8``). TF's converter keeps NEG and DIV in float, so
those models (and the LOG, MAXIMUM, ... ones) are the int8 TANH / MUL ones with the operator
changed (``hand_built``).
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest
from litert_compare import real_value, reference_interpreter, run_ours

from qonnx_ingest.errors import ConversionWarning
from tflite2qonnx.api import convert
from tflite2qonnx.reader import read_model

pytestmark = pytest.mark.keras

PAIRS = ((1, 256, 1), (1, 1, 256))


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    from tf_models import OpCase, _f, _fn, build_tflite

    cases = {
        "less": OpCase("LESS", _fn(lambda tf, t: _f(tf, tf.less(t[0], t[1]))), PAIRS),
        "mul": OpCase("MUL", _fn(lambda tf, t: t[0] * t[1]), PAIRS),
        "tanh": OpCase("TANH", _fn(lambda tf, x: tf.tanh(x)), ((1, 256),)),
    }
    return {k: build_tflite(c, True, seed=zlib.crc32(k.encode()) % 1000) for k, c in cases.items()}


def _with_input_grids(data: bytes, grids: list[tuple[float, int]]) -> bytes:
    """The model with its first operator's inputs (model inputs) on the given int8 grids."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    sg = model.subgraphs[0]
    for idx, (scale, zero_point) in zip(sg.operators[0].inputs, grids, strict=True):
        sg.tensors[idx].quantization.scale = [scale]
        sg.tensors[idx].quantization.zeroPoint = [zero_point]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _run_both(data: bytes, feeds: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(ours, theirs) as the output's stored integers; inputs fed in name order (x0, x1)."""
    it = reference_interpreter(data)
    ins = sorted(it.get_input_details(), key=lambda d: d["name"])
    (out,) = it.get_output_details()
    for d, q in zip(ins, feeds, strict=True):
        it.set_tensor(d["index"], q.astype(d["dtype"]))
    it.invoke()
    theirs = it.get_tensor(out["index"]).astype(np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)  # nothing left to one rounding
        model = convert(data, bit_exact=True)
    real = {
        d["name"]: real_value(q.astype(d["dtype"]), d["quantization"])
        for d, q in zip(ins, feeds, strict=True)
    }
    ours = run_ours(model, real)[out["name"]].astype(np.float64)
    scale, zero_point = out["quantization"]
    return np.round(ours / scale) + zero_point, theirs


def _stored(uint8: bool) -> np.ndarray:
    return np.arange(256) - (0 if uint8 else 128)


COMPARE_GRIDS = {
    "calibrated": None,
    "differing_scales": [(0.0173, -5), (0.0241, 11)],
    "fine_scales_differing_zero_points": [(0.0031, 0), (0.0029, 3)],
    "one_fine_grid": [(0.0021, -3), (0.0021, -3)],
}


@pytest.mark.parametrize("grids", sorted(COMPARE_GRIDS))
@pytest.mark.parametrize("uint8", [False, True], ids=["int8", "uint8"])
@pytest.mark.parametrize(
    "kind", ["LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"]
)
def test_comparison_equals_builtin_on_every_pair(models, kind, uint8, grids) -> None:
    from hand_built import edit_operator
    from test_bit_exact_reduce import as_uint8

    data = models["less"]
    if kind != "LESS":
        data = edit_operator(data, "LESS", new_op=kind)
    if COMPARE_GRIDS[grids]:
        data = _with_input_grids(data, COMPARE_GRIDS[grids])
    if uint8:
        data = as_uint8(data)
    assert kind in {op.name for op in read_model(data).subgraphs[0].operators}
    q = _stored(uint8)
    ours, theirs = _run_both(data, [q.reshape(PAIRS[0]), q.reshape(PAIRS[1])])
    assert ours.size == 65536 and len(np.unique(theirs)) == 2
    assert np.array_equal(ours, theirs), f"{np.sum(ours != theirs)} of 65536 differ"


def test_comparison_on_one_fine_grid_is_not_a_float_comparison(models) -> None:
    """Why the kernel is needed: with a scale below 1/256, neighbouring integers rescale to one
    value, so the builtin LESS says False where the real values are ordered."""
    data = _with_input_grids(models["less"], COMPARE_GRIDS["one_fine_grid"])
    q = _stored(False)
    _, theirs = _run_both(data, [q.reshape(PAIRS[0]), q.reshape(PAIRS[1])])
    truth = q[:, None] < q[None, :]
    assert np.any((theirs[0] > theirs.min()) != truth)


DIV_OUTPUTS = {"calibrated": None, "coarse": (0.05, 3), "coarser": (0.2, 0), "fine": (0.003, -7)}
# a multiplier near 2^-31: shifts past 63, where x86-64 takes the 64-bit mask's count modulo 64
DIV_OUTPUTS["tiny_multiplier"] = (1e8, 0)


@pytest.mark.parametrize("output", sorted(DIV_OUTPUTS))
@pytest.mark.parametrize("uint8", [False, True], ids=["int8", "uint8"])
def test_div_equals_builtin_on_every_pair(models, uint8, output) -> None:
    """Every dividend against every divisor but the zero point (the kernel refuses that one;
    it is replaced by its neighbour)."""
    from hand_built import edit_operator
    from test_bit_exact_reduce import as_uint8

    edit = {"output_quantization": DIV_OUTPUTS[output]} if DIV_OUTPUTS[output] else {}
    data = edit_operator(models["mul"], "MUL", new_op="DIV", version=2, **edit)
    if uint8:
        data = as_uint8(data)
    sub = read_model(data).subgraphs[0]
    (op,) = sub.operators
    zp2 = int(sub.tensors[op.inputs[1]].quantization.zero_point[0])
    q = _stored(uint8)
    q2 = np.where(q == zp2, zp2 + 1, q)
    ours, theirs = _run_both(data, [q.reshape(PAIRS[0]), q2.reshape(PAIRS[1])])
    assert np.array_equal(ours, theirs), f"{np.sum(ours != theirs)} of 65536 differ"


@pytest.mark.parametrize("zero_points", [(-3, 5), (100, 90), (-128, -128)])
def test_neg_equals_builtin_on_every_stored_input(models, zero_points) -> None:
    """int8 NEG (version 1, the runtime's only one): the stored integer negated in int8 (-128
    wraps to itself), whatever the two grids; the default conversion negates real values."""
    from hand_built import edit_operator

    data = _with_input_grids(models["tanh"], [(0.0123, zero_points[0])])
    data = edit_operator(
        data, "TANH", new_op="NEG", version=1, output_quantization=(0.0123, zero_points[1])
    )
    ours, theirs = _run_both(data, [_stored(False).reshape(1, 256)])
    assert np.array_equal(ours, theirs), f"{np.sum(ours != theirs)} of 256 differ"


@pytest.mark.parametrize("uint8", [False, True], ids=["int8", "uint8"])
@pytest.mark.parametrize("kind", ["MAXIMUM", "MINIMUM"])
def test_maximum_minimum_between_differing_grids_equal_builtin(models, kind, uint8) -> None:
    """MAXIMUM / MINIMUM compare the stored integers, grids ignored: already exact (no
    kernel of their own), on every pair of operands on three different grids."""
    from hand_built import edit_operator
    from test_bit_exact_reduce import as_uint8

    data = _with_input_grids(models["mul"], COMPARE_GRIDS["differing_scales"])
    data = edit_operator(data, "MUL", new_op=kind, version=2, output_quantization=(0.02, -3))
    if uint8:
        data = as_uint8(data)
    q = _stored(uint8)
    ours, theirs = _run_both(data, [q.reshape(PAIRS[0]), q.reshape(PAIRS[1])])
    assert np.array_equal(ours, theirs), f"{np.sum(ours != theirs)} of 65536 differ"


def test_log_of_every_stored_input_equals_builtin(models) -> None:
    """int8 LOG with the zero point mid-range: logf of the positive inputs through the
    kernel's float table; zero and negative inputs (-inf, NaN) give the lowest output integer.
    (The runtime has no uint8 LOG: --bit-exact refuses one.)"""
    from hand_built import edit_operator
    from test_bit_exact_reduce import as_uint8

    from qonnx_ingest.errors import ConversionError

    data = _with_input_grids(models["tanh"], [(0.031, 5)])
    data = edit_operator(data, "TANH", new_op="LOG", version=2, output_quantization=(0.019, 60))
    with pytest.raises(ConversionError, match="no uint8 LOG"):
        convert(as_uint8(data), bit_exact=True)
    ours, theirs = _run_both(data, [_stored(False).reshape(1, 256)])
    assert np.sum(theirs == theirs.min()) > 128  # the non-positive half is there
    assert np.array_equal(ours, theirs), f"{np.sum(ours != theirs)} of 256 differ"


def test_squared_difference_between_differing_grids_equals_builtin_on_every_pair(models) -> None:
    """int8 SQUARED_DIFFERENCE (ops.exact.int8) on every pair; the runtime has no uint8 kernel,
    so --bit-exact refuses a uint8 one rather than guess."""
    from hand_built import edit_operator
    from test_bit_exact_reduce import as_uint8

    from qonnx_ingest.errors import ConversionError

    data = _with_input_grids(models["mul"], COMPARE_GRIDS["differing_scales"])
    data = edit_operator(
        data, "MUL", new_op="SQUARED_DIFFERENCE", version=2, output_quantization=(0.021, -120)
    )
    q = _stored(False)
    ours, theirs = _run_both(data, [q.reshape(PAIRS[0]), q.reshape(PAIRS[1])])
    assert np.array_equal(ours, theirs), f"{np.sum(ours != theirs)} of 65536 differ"
    with pytest.raises(ConversionError, match="no uint8 SQUARED_DIFFERENCE"):
        convert(as_uint8(data), bit_exact=True)
