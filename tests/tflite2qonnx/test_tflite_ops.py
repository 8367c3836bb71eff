"""Each operator, alone, against the TFLite interpreter: float and full-integer int8 models
generated with TensorFlow's converter (so the keras extra is needed)."""

from __future__ import annotations

import zlib

import composite_models
import hand_built
import numpy as np
import pytest
import tflm_signal_models
from hand_built import custom_op_examples
from litert_compare import compare, random_input, reference_interpreter
from signal_models import AUDIO_CASES, SIGNAL_CASES
from svdf_models import float_svdf
from tf_models import CASES, DYNAMIC_SIZE, OpCase, build_tflite
from tf_models_gap import GAP_CASES, GAP_MODELS

import tflite2qonnx
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.finish import MIN_OPSET
from support import CORPUS
from tflite2qonnx.ops import CONVERTERS
from tflite2qonnx.reader import read_model

pytestmark = pytest.mark.keras

PARAMS = [pytest.param(name, False, id=f"{name}-float") for name in CASES] + [
    pytest.param(name, True, id=f"{name}-int8") for name, case in CASES.items() if case.quantized
]

_BUILT: dict[tuple[str, bool], bytes] = {}


def generated(name: str, quantized: bool) -> bytes:
    key = (name, quantized)
    if key not in _BUILT:
        _BUILT[key] = build_tflite(CASES[name], quantized, seed=zlib.crc32(name.encode()) % 1000)
    return _BUILT[key]


def op_names(data) -> set[str]:
    return {op.name for sg in read_model(data).subgraphs for op in sg.operators}


def interpreter(data: bytes, xnnpack: bool = False):
    """The interpreter with dynamic input dims resized to DYNAMIC_SIZE."""
    it = reference_interpreter(data, xnnpack=xnnpack)
    details = it.get_input_details()
    if any(-1 in d["shape_signature"] for d in details):
        for detail in details:
            shape = [DYNAMIC_SIZE if d < 0 else d for d in detail["shape_signature"]]
            it.resize_tensor_input(detail["index"], shape)
        it.allocate_tensors()
    return it


def xnnpack_agreement(data: bytes, case: OpCase, n_inputs: int = 8, seed: int = 0) -> float:
    """Fraction of output elements on which TFLite's two CPU paths (builtin, XNNPACK) agree."""
    ref, xnn = interpreter(data), interpreter(data, xnnpack=True)
    rng = np.random.default_rng(seed)
    equal = []
    for _ in range(n_inputs):
        for detail in ref.get_input_details():
            x = random_input(detail, rng, case.low, case.high)
            ref.set_tensor(detail["index"], x)
            xnn.set_tensor(detail["index"], x)
        ref.invoke()
        xnn.invoke()
        for detail in ref.get_output_details():
            a, b = ref.get_tensor(detail["index"]), xnn.get_tensor(detail["index"])
            equal.append((a == b).ravel())
    return float(np.mean(np.concatenate(equal)))


@pytest.mark.parametrize("name, quantized", PARAMS)
def test_single_op_model_matches_interpreter(name: str, quantized: bool) -> None:
    """Float: within 1e-4 relative. int8: never more than one step apart, and on the same
    value for >= 99% of elements, or as often as TFLite's XNNPACK path agrees with its builtin
    kernels where that is less (MEAN, RESIZE_BILINEAR: their fixed-point rounding differs).

    One-step disagreements are TFLite's integer arithmetic, not conversion errors: its
    requantization rounds twice (MultiplyByQuantizedMultiplier), and exact ties of integer
    division (an int8 AVERAGE_POOL_2D over 4 or 6 cells) are rounded either way once evaluated
    in float. The corpus models' op-by-op test holds real networks to 99.9%.
    """
    case = CASES[name]
    data = generated(name, quantized)
    assert case.op in op_names(data), f"TF's converter did not emit {case.op}"
    assert_matches_interpreter(tflite2qonnx.convert(data), data, case, quantized)


def assert_matches_interpreter(
    model, data: bytes, case: OpCase, quantized: bool, xnnpack_data: bytes | None = None
) -> None:
    """The criteria of test_single_op_model_matches_interpreter; XNNPACK's agreement is
    measured on ``xnnpack_data`` where XNNPACK refuses ``data``."""
    it = interpreter(data, xnnpack=case.interpreter == "default")
    pairs = compare(model, it, n_inputs=8, low=case.low, high=case.high)
    if quantized:
        steps = np.concatenate([p.steps() for p in pairs])
        assert steps.max() <= 1
        equal = np.mean(steps == 0)
        if equal < 0.99:
            assert equal >= xnnpack_agreement(xnnpack_data or data, case)
    else:
        assert all(p.float_error_ok() for p in pairs)


# int8 kernels that copy, compare, pool or interpolate raw integers without requantizing
# (each ran 29-40 steps off before GraphBuilder.reinterpret). Their output's grid is moved off
# the input's: scale x1.37 and zero point +5. The int8 PACK, UNPACK, EXPAND_DIMS, MIRROR_PAD,
# CONCATENATION, REDUCE_MAX and REDUCE_MIN kernels refuse differing grids (PADV2 refuses a pad
# value off the output's grid). XNNPACK refuses such an int8 DEPTH_TO_SPACE (which has no
# reference kernel) and RESIZE_BILINEAR: the latter's agreement is measured on the original.
RAW_INTEGER_CASES = [
    "transpose", "reshape_after_nhwc", "squeeze", "pad", "slice",
    "strided_slice_steps_reverse", "split_channels", "split_v_height", "gather_channels",
    "gather_batch_dims_width", "gather_nd", "tile", "reverse", "max_pool_same",
    "average_pool_valid", "maximum", "minimum", "select", "space_to_depth",
    "resize_nearest_asymmetric", "resize_bilinear_align_corners",
]  # fmt: skip


def moved_output_grid(name: str, data: bytes) -> bytes:
    """``data`` with the output grid of the case's operator moved off its input's."""
    case = CASES[name]
    subgraph = read_model(data).subgraphs[0]
    op = next(o for o in subgraph.operators if o.name == case.op)
    source = next(
        subgraph.tensors[i].quantization
        for i in op.inputs
        if i >= 0 and subgraph.tensors[i].data is None and subgraph.tensors[i].quantization
    )
    grid = (float(source.scale[0]) * 1.37, min(127, int(source.zero_point[0]) + 5))
    return hand_built.edit_operator(data, case.op, output_quantization=grid)


@pytest.mark.parametrize("name", RAW_INTEGER_CASES)
def test_int8_data_movement_keeps_the_integers_on_a_different_output_grid(name: str) -> None:
    """TFLite hands the input's integers to the output unchanged, whatever the output's scale
    and zero point: the real value changes, and ours with it, within the usual criteria."""
    original = generated(name, True)
    data = moved_output_grid(name, original)
    model = tflite2qonnx.convert(data)
    assert any(n.op_type == "Mul" and "_as_" in n.name for n in model.graph.node)
    assert_matches_interpreter(model, data, CASES[name], quantized=True, xnnpack_data=original)


# Converters that switch ONNX forms with the opset: TFLite op -> (first opset of the form, its
# ONNX op type, that node's input count). Reductions take axes as an input from opset 18
# (ReduceSum from 13: its form never changes, but it shares reduce_axes); Gelu exists from
# opset 20, HardSwish from 14.
OPSET_FORMS: dict[str, tuple[int, str, int]] = {
    "MEAN": (18, "ReduceMean", 2),
    "REDUCE_MAX": (18, "ReduceMax", 2),
    "REDUCE_MIN": (18, "ReduceMin", 2),
    "REDUCE_PROD": (18, "ReduceProd", 2),
    "SUM": (13, "ReduceSum", 2),
    "L2_NORMALIZATION": (13, "ReduceSum", 2),
    "GELU": (20, "Gelu", 1),
    "HARD_SWISH": (14, "HardSwish", 1),
}
OPSET_PARAMS = [p for p in PARAMS if CASES[p.values[0]].op in OPSET_FORMS]


def uses_new_form(model, op: str) -> bool:
    _, op_type, n_inputs = OPSET_FORMS[op]
    return any(n.op_type == op_type and len(n.input) == n_inputs for n in model.graph.node)


@pytest.mark.parametrize("opset", [18, 21], ids=lambda o: f"opset{o}")
@pytest.mark.parametrize("name, quantized", OPSET_PARAMS)
def test_opset_dependent_ops_match_interpreter_at_high_opsets(
    name: str, quantized: bool, opset: int
) -> None:
    """Opset 18 (axes inputs) and 21 (Gelu), run by onnxruntime node by node: the same
    criteria as at the default opset, and the graph uses the form the opset allows."""
    case = CASES[name]
    data = generated(name, quantized)
    model = tflite2qonnx.convert(data, opset=opset)
    assert uses_new_form(model, case.op) == (opset >= OPSET_FORMS[case.op][0])
    assert_matches_interpreter(model, data, case, quantized)


@pytest.mark.parametrize("op", sorted(OPSET_FORMS))
def test_opset_dependent_forms_switch_at_their_first_opset(op: str) -> None:
    """One opset before the form's first, the older form; from it on, the new one."""
    name = next(name for name, case in CASES.items() if case.op == op)
    data = generated(name, False)
    since = OPSET_FORMS[op][0]
    if since > MIN_OPSET:
        assert not uses_new_form(tflite2qonnx.convert(data, opset=since - 1), op)
    assert uses_new_form(tflite2qonnx.convert(data, opset=since), op)


def test_every_registered_op_is_exercised_by_a_generated_or_corpus_model() -> None:
    # QUANTIZE: the rounding test's input
    seen = {case.op for case in (*CASES.values(), *GAP_CASES.values())} | {"QUANTIZE"}
    corpus = sorted((CORPUS / "tflite").glob("*.tflite")) if CORPUS.is_dir() else []
    for path in corpus:
        seen |= op_names(path)
    builders = [*hand_built.MODELS.values(), *GAP_MODELS.values()]
    for data in [*(build() for build in builders), *custom_op_examples(), float_svdf(rank=1)]:
        seen |= op_names(data)
    # built by TensorFlow (keras extra) in test_control_flow.py, against the interpreter there
    seen |= {"IF", "WHILE", "CALL_ONCE", "VAR_HANDLE", "READ_VARIABLE", "ASSIGN_VARIABLE"}
    # the signal and audio ops: TF-built in test_signal_ops.py, which checks each model's ops
    seen |= set().union(*(case.ops for case in (*SIGNAL_CASES.values(), *AUDIO_CASES.values())))
    # TFLite Micro's Signal ops: checked against TFLM's interpreter in test_tflm_signal.py
    for data in tflm_signal_models.examples():
        seen |= op_names(data)
    # STABLEHLO_COMPOSITE: hand-built with LiteRT's schema, against the interpreter in
    # test_stablehlo_composite.py
    seen |= op_names(composite_models.float_conv_composite())
    assert set(CONVERTERS) - seen == set()


def test_half_up_rounding_matches_tflite_quantize_on_ties() -> None:
    """TFLite's QUANTIZE rounds x / scale half away from zero, then adds the zero point.

    QONNX's Quant rounds x / scale + zero_point, so on exact ties the two agree wherever that
    shift keeps the sign; HALF_UP (half away from zero) matches them all, ROUND (half to
    even) misses about half of them. Ties in the band between 0 and -zero_point are one step
    apart under any mode: that is the price of QONNX's formula and no mode avoids it.
    """
    data = build_tflite(CASES["relu6"], True, seed=3, float_input=True)
    it = reference_interpreter(data)
    (ind,) = it.get_input_details()
    quantize = next(op for op in it._get_ops_details() if op["op_name"] == "QUANTIZE")
    qdetail = it.get_tensor_details()[quantize["outputs"][0]]
    scale = np.float32(qdetail["quantization"][0])
    zero_point = int(qdetail["quantization"][1])
    # every x / scale = k + 0.5 that float32 represents exactly, in the int8 range
    k = np.arange(-128 - zero_point, 127 - zero_point, dtype=np.float32)
    x = ((k + 0.5) * scale).astype(np.float32)
    x = x[(x / scale) == (k + 0.5)][: int(np.prod(ind["shape"]))]
    x = np.resize(x, ind["shape"]).astype(np.float32)
    v = (x / scale).ravel()
    assert np.all(v % 1 == 0.5)
    it.set_tensor(ind["index"], x)
    it.invoke()
    tflite_q = it.get_tensor(qdetail["index"]).astype(np.int64).ravel()

    def ours(rounding: str) -> np.ndarray:
        model = tflite2qonnx.convert(data, keep_io_layout=True)
        first = next(n for n in model.graph.node if n.input[0] == model.graph.input[0].name)
        assert first.op_type == "Quant"
        for attr in first.attribute:
            if attr.name == "rounding_mode":
                attr.s = rounding.encode()
        del model.graph.value_info[:]  # the quantized input becomes the output
        model.graph.output[0].name = first.output[0]
        del model.graph.output[1:]
        real = execute_qonnx(model, {model.graph.input[0].name: x})[first.output[0]]
        return np.round(real.astype(np.float64).ravel() / scale).astype(np.int64) + zero_point

    band = (np.sign(v) != np.sign(v + zero_point)) & (v + zero_point != 0)
    half_up, half_even = ours("HALF_UP"), ours("ROUND")
    assert np.all(half_up[~band] == tflite_q[~band])
    assert np.all(np.abs(half_up - tflite_q) <= 1)
    assert np.mean(half_even[~band] != tflite_q[~band]) > 0.3
