"""Integer shape arithmetic beside quantized and float tensors: every ONNX value's element type
follows from its TFLite tensor's type (a quantized tensor is a dequantized float, an
unquantized int32 tensor stays int32, constants included), so onnxruntime accepts the
converted models (it refused a Concat bound to int32 and float on MoveNet) and they agree
with the TFLite interpreter."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from control_flow_models import in_fresh_process
from int_arith_models import MODELS as INT_MODELS
from int_arith_models import shape_with_quantized_output
from litert_compare import reference_interpreter
from onnx import TensorProto, helper, numpy_helper
from shape_arith_models import MODELS, MODES

import tflite2qonnx
from qonnx_ingest.errors import ConversionError, ConversionWarning
from qonnx_ingest.qcdq import to_qcdq
from qonnx_ingest.quant_lowering import lower_quants
from support import CORPUS, requires_corpus
from tflite2qonnx.element_types import check_element_types
from tflite2qonnx.model import Tensor
from tflite2qonnx.reader import read_model
from tflite2qonnx.reference import verify

FAMILY = [f"{name}-{mode}" for name in MODELS for mode in MODES]
SHAPE_OPS = {"SHAPE", "PACK", "UNPACK", "STRIDED_SLICE", "GATHER", "CONCATENATION", "RESHAPE",
             "FILL", "RANGE", "TILE"}  # fmt: skip
MOVENET = CORPUS / "tflite" / "coral__movenet_single_pose_lightning_ptq.tflite"
CORPUS_MODELS = sorted((CORPUS / "tflite").glob("*.tflite")) if CORPUS.is_dir() else []


@pytest.fixture(scope="session")
def family() -> dict[str, bytes]:
    """Every model of shape_arith_models in every mode, built once, in a fresh process."""
    specs = {
        f"{name}-{mode}": ("build", {"name": name, "mode": mode})
        for name in MODELS
        for mode in MODES
    }
    return in_fresh_process(specs, module="shape_arith_models")


def assert_element_types_consistent(model: onnx.ModelProto) -> None:
    """No node's inputs mix element types where its schema binds them to one type, and every
    value has the type the converter declared from its TFLite tensor: onnx's type inference in
    strict mode (which checks the declared value_info and graph outputs too) on the model with
    its Quant nodes as standard ops, and onnxruntime's session creation on the same graph."""
    lowered = lower_quants(model)
    onnx.shape_inference.infer_shapes(lowered, check_type=True, strict_mode=True)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    ort.InferenceSession(lowered.SerializeToString(), options, providers=["CPUExecutionProvider"])


def assert_agrees_in_onnxruntime(
    source, model: onnx.ModelProto, exact: bool, inputs: int = 16
) -> None:
    """--verify's rule, run by onnxruntime (never qonnx's fallback executor); ``exact``: the
    outputs equal the interpreter's bit for bit."""
    result = verify(source, model, inputs=inputs)
    assert result.passed, result.as_text()
    assert result.runner.startswith("onnxruntime"), result.runner
    if exact:
        assert all(a.max_abs_error == 0 for a in result.outputs), result.as_text()


@pytest.mark.keras
def test_family_computes_shapes_at_run_time_beside_quantized_tensors(family) -> None:
    """The family is what it claims: the ten shape ops, run-time int32 tensors without
    quantization, and (quantized modes) int8 / uint8 / int16 tensors on a grid."""
    seen: set[str] = set()
    for key, data in family.items():
        sg = read_model(data).subgraphs[0]
        seen |= {op.name for op in sg.operators}
        computed_ints = [t for t in sg.tensors if t.dtype == "int32" and t.data is None]
        assert computed_ints and all(t.quant is None for t in computed_ints), key
        grids = {t.dtype for t in sg.tensors if t.quant is not None and t.data is None}
        mode = key.rsplit("-", 1)[1]
        assert grids == {"float": set(), "int8": {"int8"}, "uint8": {"int8", "uint8"},
                         "int16": {"int16"}}[mode], (key, grids)  # fmt: skip
    assert seen >= SHAPE_OPS


@pytest.mark.keras
@pytest.mark.parametrize("bit_exact", [False, True], ids=["default", "bit_exact"])
@pytest.mark.parametrize("key", FAMILY)
def test_family_model_runs_in_onnxruntime_and_matches_interpreter(family, key, bit_exact):
    """Measured: every output equals the interpreter's on all 16 inputs, either way (float:
    within 1.2e-7); the exact check is held where --bit-exact promises it."""
    model = tflite2qonnx.convert(family[key], bit_exact=bit_exact)
    assert_element_types_consistent(model)
    quantized = not key.endswith("-float")
    assert_agrees_in_onnxruntime(family[key], model, exact=bit_exact and quantized)


@pytest.mark.keras
@pytest.mark.parametrize("key", [k for k in FAMILY if not k.endswith("-float")])
def test_family_model_in_qcdq_form_runs_in_onnxruntime_and_matches_interpreter(family, key):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)  # QuantizeLinear's tie rounding
        model = to_qcdq(tflite2qonnx.convert(family[key]))
    assert not {"Quant", "IntQuant"} & {n.op_type for n in model.graph.node}
    assert_agrees_in_onnxruntime(family[key], model, exact=False)


@requires_corpus
@pytest.mark.parametrize("bit_exact", [False, True], ids=["default", "bit_exact"])
@pytest.mark.parametrize("path", CORPUS_MODELS, ids=lambda p: p.stem)
def test_no_op_of_a_converted_corpus_model_mixes_element_types(path, bit_exact):
    model = tflite2qonnx.convert(path, bit_exact=bit_exact)
    assert_element_types_consistent(model)


@requires_corpus
@pytest.mark.parametrize(
    "form, bit_exact",
    [("qonnx", False), ("qcdq", False), ("qonnx", True), ("qcdq", True)],
    ids=["default", "qcdq", "bit_exact", "qcdq_bit_exact"],
)
def test_movenet_runs_in_onnxruntime_and_matches_interpreter(form, bit_exact):
    """MoveNet's keypoint decoding (ARG_MAX, FLOOR_DIV, MUL / SUB, PACK of int32 with an int32
    constant, GATHER_ND, CAST into QUANTIZE) beside its int8 tensors. Measured on 16 inputs:
    max abs error 0.385 (qcdq 0.393) against XNNPACK's 0.414 by default, 0 with --bit-exact."""
    model = tflite2qonnx.convert(MOVENET, bit_exact=bit_exact)
    if form == "qcdq":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConversionWarning)
            model = to_qcdq(model)
    # equality needs no spread measured over many inputs: 4 keep the exact forms quick
    assert_agrees_in_onnxruntime(MOVENET, model, exact=bit_exact, inputs=4 if bit_exact else 16)


def _int32_feed(detail: dict, rng: np.random.Generator, name: str) -> np.ndarray:
    """FLOOR_DIV's dividends reach +-2**30 (float32 holds integers exactly only below 2**24);
    ADD's operands stay small enough not to overflow, around the activations' bounds."""
    if name == "floor_div_int32":
        big = rng.integers(-(2**30), 2**30, detail["shape"])
        return np.where(rng.random(detail["shape"]) < 0.5, big, big % 23 - 11).astype(np.int32)
    return rng.integers(-9, 10, detail["shape"]).astype(np.int32)


@pytest.mark.parametrize("name", sorted(INT_MODELS))
def test_int32_arithmetic_stays_integer_and_equals_the_interpreter(name):
    """FLOOR_DIV (mixed signs, dividends beyond float32's exact integers), int32 ADD with a
    fused RELU / RELU6 / RELU_N1_TO_1 and PADV2 with an int32 value: integer ONNX ops only,
    bit-equal to the builtin kernels."""
    data = INT_MODELS[name]()
    model = tflite2qonnx.convert(data)
    assert_element_types_consistent(model)
    assert not any(
        n.op_type == "Cast" and n.attribute[0].i == onnx.TensorProto.FLOAT for n in model.graph.node
    ), "an integer op went through float"
    it = reference_interpreter(data)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    for _ in range(8):
        feeds = {d["name"]: _int32_feed(d, rng, name) for d in it.get_input_details()}
        for d in it.get_input_details():
            it.set_tensor(d["index"], feeds[d["name"]])
        it.invoke()
        (out,) = it.get_output_details()
        (ours,) = session.run(None, feeds)
        assert ours.dtype == np.int32
        np.testing.assert_array_equal(ours, it.get_tensor(out["index"]))


def test_shape_output_with_a_scale_is_refused_naming_the_tensor():
    """An int32 SHAPE output carrying a scale: the kernel writes plain integers, the graph would
    put a float quantizer on them; refused (naming the tensor), not written for onnxruntime to
    refuse."""
    with pytest.raises(ConversionError, match=r"tensor 1 'dims' \(quantized int32\) carries"):
        tflite2qonnx.convert(shape_with_quantized_output())


def _graph(nodes, inputs, outputs, initializers=()) -> onnx.GraphProto:
    return helper.make_graph(nodes, "g", inputs, outputs, list(initializers))


def test_element_type_check_names_the_node_that_mixes_types():
    """The class the issue met: Concat of an int32 constant and a float value."""
    graph = _graph(
        [helper.make_node("Concat", ["shape", "n"], ["packed"], axis=0, name="stack/Concat")],
        [helper.make_tensor_value_info("n", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("packed", TensorProto.INT32, [2])],
        [numpy_helper.from_array(np.array([4], np.int32), "shape")],
    )
    with pytest.raises(ConversionError, match=r"mixes element types.*stack/Concat"):
        check_element_types(graph, 13, {}, None)


def _tensor(index: int, name: str, dtype: str) -> Tensor:
    return Tensor(index, name, (3,), (3,), dtype, 0, None, None, False, None)


def test_element_type_check_names_the_tflite_tensor_of_the_wrong_type():
    """A value each op accepts, but not of its TFLite tensor's type: ArgMax's int64 left
    uncast where the file says int32."""
    graph = _graph(
        [helper.make_node("ArgMax", ["x"], ["idx"], axis=0)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("idx", TensorProto.INT64, [])],
    )
    tensors = [_tensor(0, "scores", "float32"), _tensor(1, "best", "int32")]
    with pytest.raises(ConversionError, match=r"tensor 1 'best' \(int32\) is computed as int64"):
        check_element_types(graph, 13, {0: "x", 1: "idx"}, tensors.__getitem__)
    tensors[1] = _tensor(1, "best", "int64")
    check_element_types(graph, 13, {0: "x", 1: "idx"}, tensors.__getitem__)
