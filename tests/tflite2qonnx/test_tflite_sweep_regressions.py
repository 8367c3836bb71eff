"""Regressions found by scripts/sweep/sweep_keras_tflite.py (seeded Keras models x converter modes),
each compared with the interpreter's builtin reference kernels."""

from __future__ import annotations

import numpy as np
import pytest
from control_flow_models import in_fresh_process
from litert_compare import reference_interpreter, run_ours

import tflite2qonnx
from tflite2qonnx.reader import read_model

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    return in_fresh_process(
        {
            "dense": ("hybrid_dense", {}),
            "pooling_reshape": ("build", {"name": "pooling_reshape", "mode": "dynamic"}),
        },
        module="sweep_models",
    )


@pytest.fixture(scope="module")
def recommender() -> bytes:
    """A process of its own: after the other two, TF's converter builds a broken RESHAPE."""
    spec = {"recommender": ("build", {"name": "recommender", "mode": "int8"})}
    return in_fresh_process(spec, module="sweep_models")["recommender"]


def _edit(data: bytes, edit) -> bytes:
    """``data`` with ``edit(model)`` applied to its object tree (ai-edge-litert's schema)."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    edit(model, schema)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _fc(model, schema):
    (sg,) = model.subgraphs
    for op in sg.operators:
        code = model.operatorCodes[op.opcodeIndex]
        if (
            max(code.builtinCode, code.deprecatedBuiltinCode)
            == schema.BuiltinOperator.FULLY_CONNECTED
        ):
            return sg, op
    raise AssertionError("no FULLY_CONNECTED")


def _symmetric_per_tensor(model, schema):
    """The hybrid FC's weights requantized per tensor, its inputs quantized symmetrically."""
    sg, op = _fc(model, schema)
    op.builtinOptions.asymmetricQuantizeInputs = False
    w = sg.tensors[op.inputs[1]]
    buf = model.buffers[w.buffer]
    q = np.frombuffer(bytes(buf.data), np.int8).reshape(w.shape).astype(np.float64)
    scales = np.asarray(w.quantization.scale, np.float64)
    top = scales.max()
    requant = np.clip(np.round(q * (scales[:, None] / top)), -127, 127).astype(np.int8)
    buf.data = np.frombuffer(requant.tobytes(), np.uint8)
    w.quantization.scale = [float(np.float32(top))]
    w.quantization.zeroPoint = [0]
    w.quantization.quantizedDimension = 0


def _symmetric_per_channel(model, schema):
    _fc(model, schema)[1].builtinOptions.asymmetricQuantizeInputs = False


def _max_error(data: bytes, inputs: int = 8, zero_row: bool = True) -> float:
    fcs = [op for op in read_model(data).subgraphs[0].operators if op.name == "FULLY_CONNECTED"]
    assert any(read_model(data).subgraphs[0].tensors[op.inputs[1]].dtype == "int8" for op in fcs)
    model = tflite2qonnx.convert(data, keep_io_layout=True)
    try:
        it = reference_interpreter(data)
    except ValueError:  # ELU has no reference kernel: the builtin optimized one
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        resolver = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        it = Interpreter(model_content=data, experimental_op_resolver_type=resolver)
        it.allocate_tensors()
    (ind,), (outd,) = it.get_input_details(), it.get_output_details()
    rng = np.random.default_rng(3)
    worst = 0.0
    for k in range(inputs):
        x = rng.uniform(-1, 1, ind["shape"]).astype(np.float32)
        if k % 2:
            x = np.abs(x) * 0.3  # all-positive rows: the zero point sits at -128
        if zero_row and k == 0 and x.shape[0] > 1:
            x[0] = 0.0  # a zero row: the kernel's scaling factor 1, zero point 0
        it.set_tensor(ind["index"], x)
        it.invoke()
        theirs = it.get_tensor(outd["index"])
        ours = run_ours(model, {ind["name"]: x})[outd["name"]]
        worst = max(worst, float(np.max(np.abs(ours - theirs))))
    return worst


def test_hybrid_fully_connected_asymmetric_per_channel_matches_the_kernel(models):
    """TF's dynamic-range Dense: the kernel quantizes each row on the fly (asymmetric, zero
    point and row sums); the float layer on the dequantized weights was off by ~1e-3."""
    assert _max_error(models["dense"]) == 0.0  # bit for bit


def test_hybrid_fully_connected_symmetric_per_tensor_matches_the_kernel(models):
    assert _max_error(_edit(models["dense"], _symmetric_per_tensor)) == 0.0


def test_hybrid_fully_connected_symmetric_per_channel_matches_the_kernel(models):
    """Each unit's scale times the row factor (ai-edge-quantizer's dynamic_wi8c writes this)."""
    assert _max_error(_edit(models["dense"], _symmetric_per_channel)) == 0.0


def test_dynamic_range_mlp_after_conv_matches_the_interpreter(models):
    """Pad, conv, ELU, crop, pool, reshape, permute, flatten, hybrid Dense, LeakyReLU, PReLU,
    swish, tanh: the sweep's pooling_reshape in dynamic-range mode."""
    assert _max_error(models["pooling_reshape"], zero_row=False) <= 1e-5


def test_int8_recommender_on_integer_ids_matches_the_interpreter_bit_for_bit(recommender):
    """Two int32 id inputs (Embedding lookups on int8 tables, a Dot, Dense layers): the sweep
    fed the ids as float and reported six crashes; fed as the integers they are, every mode
    agrees, and --bit-exact's int8 output equals the reference kernels'."""
    data = recommender
    exact = tflite2qonnx.convert(data, keep_io_layout=True, bit_exact=True)
    it = reference_interpreter(data)
    ids = it.get_input_details()
    assert [d["dtype"] for d in ids] == [np.int32, np.int32]
    (out,) = it.get_output_details()
    rng = np.random.default_rng(4)
    for _ in range(6):
        feeds = {d["name"]: rng.integers(0, 20, d["shape"]).astype(np.int32) for d in ids}
        for d in ids:
            it.set_tensor(d["index"], feeds[d["name"]])
        it.invoke()
        theirs = it.get_tensor(out["index"]).astype(np.int64)
        (ours,) = run_ours(exact, feeds).values()
        scale, zero_point = out["quantization"]
        assert np.array_equal(np.round(ours.astype(np.float64) / scale) + zero_point, theirs)
