"""``convert(..., bit_exact=True)``: the builtin reference kernels' integer arithmetic, exactly.

Everything is compared with the TFLite interpreter (BUILTIN_REF resolver), never with values
computed by our own fixed-point code: single-op int8 models generated with TF, every covered
operator of two corpus MobileNets fed the interpreter's own tensors, and the MobileNets end to
end, where the interpreter's XNNPACK path is measured on the same inputs as the bar to meet.
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest
from litert_compare import (
    compare,
    random_input,
    real_value,
    reference_interpreter,
    run_ours,
    steps_per_op,
)

from support import CORPUS, requires_corpus
from tflite2qonnx.api import convert
from tflite2qonnx.cli import main
from tflite2qonnx.reader import read_model

COVERED = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MEAN", "AVERAGE_POOL_2D"}
COVERED |= {"SOFTMAX", "QUANTIZE", "MUL", "SUB", "LOGISTIC", "TANH", "HARD_SWISH", "LEAKY_RELU"}
V1 = "t2o__mobilenet_v1_0.25_128_quant.tflite"
CORAL = "coral__tf2_mobilenet_v2_1.0_224_ptq.tflite"
HELLO_WORLD = "tflm__hello_world_int8.tflite"
# the default conversion of the two corpus MobileNets, as before bit_exact existed
# CORAL: its MEAN rounds twice as the kernel does (ops/kernel_rounding.py: 4 nodes more)
# the graphs of before plus 5 nodes (Div, Quant, Div, Quant, Mul) for each of their 28 / 53
# int8 convolutions, whose accumulator the default form rounds twice (ops/nn/conv_rounding.py)
DEFAULT_NODE_COUNTS = {V1: 120 + 5 * 28, CORAL: 281 + 5 * 53}
BIT_EXACT_ONLY_OPS = {"Cast", "Floor", "Sign", "Abs", "ReduceSum"}

# TF-generated single-op int8 models of each covered operator (tf_models.CASES, plus the padded
# average pool the default test only checks in float: its ties of integer division are exact here)
SINGLE_OP_CASES = [
    "conv_same_stride2_relu6",
    "conv_dilated_valid",
    "depthwise_multiplier2",
    "fully_connected",
    "fully_connected_keep_num_dims",
    "average_pool_valid",
    "average_pool_same",
    "add",
    "add_relu_broadcast_constant",
    "mean_spatial_keepdims",
    "mean_spatial",
    "mean_channels",
]


def _int8_model(name: str) -> bytes:
    from tf_models import CASES, build_tflite

    return build_tflite(CASES[name], True, seed=zlib.crc32(name.encode()) % 1000)


@pytest.mark.keras
@pytest.mark.parametrize("name", SINGLE_OP_CASES)
def test_single_op_int8_model_equals_builtin_kernels(name: str) -> None:
    """Every output element equal to the builtin kernels' on 8 seeded inputs (the default
    conversion is off by a step on some)."""
    from tf_models import CASES

    data = _int8_model(name)
    assert CASES[name].op in {op.name for op in read_model(data).subgraphs[0].operators}
    model = convert(data, bit_exact=True)
    case = CASES[name]
    pairs = compare(model, reference_interpreter(data), n_inputs=8, low=case.low, high=case.high)
    steps = np.concatenate([p.steps() for p in pairs])
    assert steps.size and np.all(steps == 0), f"{name}: {np.mean(steps != 0):.4%} differ"


@requires_corpus
@pytest.mark.parametrize("model", [V1, CORAL, HELLO_WORLD])
def test_every_covered_operator_equals_builtin_kernels(model: str) -> None:
    """Op by op on the interpreter's own tensors (2 inputs): covered operators 100% equal
    (hello_world: per-tensor int8 FULLY_CONNECTED; the MobileNets: uint8 and per-channel int8
    convolutions, ADD, MEAN, AVERAGE_POOL_2D, SOFTMAX, Coral's int8 -> uint8 QUANTIZE)."""
    path = CORPUS / "tflite" / model
    per_op = steps_per_op(path, read_model(path).subgraphs[0], xnnpack=False, bit_exact=True)
    covered = {key: steps for key, steps in per_op.items() if key[1] in COVERED}
    assert covered
    for (index, name), steps in covered.items():
        assert np.all(steps == 0), f"operator {index} {name}: {np.mean(steps != 0):.4%} differ"


def _end_to_end(model: str, n_inputs: int, seed: int = 0):
    """(ours, XNNPACK) fractions of output elements equal to the builtin kernels', and
    whether our argmax equals theirs on every input."""
    path = CORPUS / "tflite" / model
    ours_model = convert(path, bit_exact=True)
    ref = reference_interpreter(path)
    xnn = reference_interpreter(path, xnnpack=True)
    rng = np.random.default_rng(seed)
    (out,) = ref.get_output_details()
    ours_eq, xnn_eq, argmax_ok = [], [], []
    for _ in range(n_inputs):
        feeds = {}
        for detail in ref.get_input_details():
            x = random_input(detail, rng)
            ref.set_tensor(detail["index"], x)
            xnn.set_tensor(detail["index"], x)
            feeds[detail["name"]] = real_value(x, detail["quantization"])
        ref.invoke()
        xnn.invoke()
        theirs = ref.get_tensor(out["index"]).astype(np.int64)
        scale, zero_point = out["quantization"]
        ours = run_ours(ours_model, feeds)[out["name"]].astype(np.float64)
        ours_q = np.round(ours / scale) + zero_point
        ours_eq.append((ours_q == theirs).ravel())
        xnn_eq.append((xnn.get_tensor(out["index"]).astype(np.int64) == theirs).ravel())
        argmax_ok.append(bool(np.all(ours_q.argmax(-1) == theirs.argmax(-1))))
    return float(np.mean(ours_eq)), float(np.mean(xnn_eq)), all(argmax_ok)


@requires_corpus
@pytest.mark.parametrize("model, n_inputs", [(V1, 4), (CORAL, 2)])
def test_end_to_end_at_least_as_close_as_xnnpack(model: str, n_inputs: int) -> None:
    """The issue's bar: agreement with the builtin kernels >= XNNPACK's on the same inputs,
    argmax equal on every input. (Measured: 100% equal on both; XNNPACK ~99.2-99.4%.) Coral
    takes ~25 s per input in qonnx's executor."""
    ours, xnnpack, argmax_equal = _end_to_end(model, n_inputs)
    assert ours >= xnnpack, f"ours {ours:.4%} < XNNPACK {xnnpack:.4%}"
    assert argmax_equal
    assert ours == 1.0, f"bit exact, yet {1 - ours:.4%} of the outputs differ"


@requires_corpus
@pytest.mark.parametrize("model", [V1, CORAL])
def test_default_conversion_is_unchanged(model: str) -> None:
    """bit_exact=False is the graph of before: same node count, none of the new op types, no
    float64 constant, and the same bytes as not passing the option at all."""
    path = CORPUS / "tflite" / model
    default = convert(path, bit_exact=False)
    assert default.SerializeToString() == convert(path).SerializeToString()
    assert len(default.graph.node) == DEFAULT_NODE_COUNTS[model]
    assert not {n.op_type for n in default.graph.node} & BIT_EXACT_ONLY_OPS
    assert all(t.data_type != 11 for t in default.graph.initializer)  # TensorProto.DOUBLE
    exact = convert(path, bit_exact=True)
    assert {"Cast", "Floor"} <= {n.op_type for n in exact.graph.node}


@requires_corpus
def test_cli_bit_exact_flag(tmp_path) -> None:
    out = tmp_path / "v1.onnx"
    assert main([str(CORPUS / "tflite" / V1), "-o", str(out), "--bit-exact"]) == 0
    import onnx

    assert "Cast" in {n.op_type for n in onnx.load(out).graph.node}


def test_float_model_is_unaffected_by_bit_exact() -> None:
    """Float ops keep their conversion under bit_exact (the conv-quant-fp16 corpus model is
    float with float16 weights)."""
    path = CORPUS / "tflite" / "t2o__conv-quant-fp16.float32.tflite"
    if not path.exists():
        pytest.skip(f"no corpus model {path}")
    assert convert(path, bit_exact=True).SerializeToString() == convert(path).SerializeToString()


@requires_corpus
@pytest.mark.keras
def test_integer_operators_left_to_single_rounding_are_named():
    """Never a silent approximation: int8 SQUARE (no emulated kernel; the int8 TANH model's
    operator changed into it) is named by the warning; the corpus MobileNets, SOFTMAX and
    QUANTIZE included, convert without one."""
    from hand_built import edit_operator

    from qonnx_ingest.errors import ConversionWarning

    only_square = r"leaves 1 integer operator rounding.*: SQUARE$"
    square = edit_operator(_int8_model("tanh"), "TANH", new_op="SQUARE", version=1)
    with pytest.warns(ConversionWarning, match=only_square):
        convert(square, bit_exact=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        for model in (V1, CORAL, "t2o__conv.uint8.tflite"):
            convert(CORPUS / "tflite" / model, bit_exact=True)


@requires_corpus
def test_hello_world_equals_builtin_kernels_on_every_stored_input() -> None:
    """hello_world's one int8 input, all 256 values: its per-tensor int8 FULLY_CONNECTED layers
    requantize with one rounding (the 64-bit multiply); two roundings differ on 23 inputs."""
    from litert_compare import real_value

    from qonnx_ingest.verification import run_converted

    path = CORPUS / "tflite" / HELLO_WORLD
    model = convert(path, bit_exact=True)
    it = reference_interpreter(path)
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    theirs, feeds = [], []
    for q in range(-128, 128):
        x = np.full(inp["shape"], q, np.int8)
        it.set_tensor(inp["index"], x)
        it.invoke()
        theirs.append(int(it.get_tensor(out["index"]).ravel()[0]))
        feeds.append({inp["name"]: real_value(x, inp["quantization"])})
    outputs, _ = run_converted(model, feeds)
    scale, zero_point = out["quantization"]
    ours = [int(np.round(o[out["name"]].ravel()[0] / scale) + zero_point) for o in outputs]
    differ = sum(a != b for a, b in zip(ours, theirs, strict=True))
    assert ours == theirs, f"{differ} of 256 differ"


@requires_corpus
def test_uint8_ssd_up_to_its_postprocess_equals_builtin_kernels() -> None:
    """The uint8 SSD MobileNet v1 without its custom TFLite_Detection_PostProcess (the
    converter lacks it): box and class tensors 100% equal on 4 inputs, through its uint8
    LOGISTIC and its CONCATENATIONs of inputs on differing grids (each rescaled by a table)."""
    from litert_compare import real_value

    from layout import stored_perms
    from qonnx_ingest.verification import run_converted
    from tflite2qonnx.api import convert_subgraph, slice_subgraph

    path = CORPUS / "tflite" / "tfexamples__ssd_mobilenet_v1_coco_quant_detect.tflite"
    if not path.exists():
        pytest.skip(f"no corpus model {path.name}")
    sg = read_model(path).subgraphs[0]
    *body, post = sg.operators
    assert post.name == "TFLite_Detection_PostProcess"
    outs = [t for t in post.inputs if sg.tensors[t].data is None]
    model = convert_subgraph(
        slice_subgraph(sg, [op.index for op in body], outputs=outs), bit_exact=True
    )

    def grid_of(t: int) -> tuple:
        q = sg.tensors[t].quantization
        return float(q.scale[0]), int(q.zero_point[0])

    rescaled = [
        t
        for op in body
        if op.name == "CONCATENATION"
        for t in op.inputs
        if grid_of(t) != grid_of(op.outputs[0])
    ]
    assert rescaled  # inputs on grids other than their concatenation's
    gathers = sum(n.op_type == "Gather" for n in model.graph.node)
    assert gathers == len(rescaled) + 1  # one table per rescaled input, one for LOGISTIC
    it = reference_interpreter(path, preserve_all=True)
    details = it.get_tensor_details()
    perms = stored_perms(model)
    rng = np.random.default_rng(3)
    (inp,) = it.get_input_details()
    for _ in range(4):
        x = random_input(inp, rng)
        it.set_tensor(inp["index"], x)
        it.invoke()
        feed = real_value(x, inp["quantization"])
        if inp["name"] in perms:
            feed = feed.transpose(perms[inp["name"]])
        (ours,), _ = run_converted(model, [{inp["name"]: feed}])
        for t in outs:
            name = details[t]["name"]
            y = ours[name] if name not in perms else ours[name].transpose(np.argsort(perms[name]))
            scale, zero_point = details[t]["quantization"]
            q = np.round(y.astype(np.float64) / scale) + zero_point
            assert np.array_equal(q, it.get_tensor(t)), f"{name}: {np.mean(q != it.get_tensor(t))}"


@requires_corpus
def test_retinaface_end_to_end_equals_builtin_kernels() -> None:
    """TFLM's int8 RetinaFace (LEAKY_RELU and RELU onto other grids, SOFTMAX, QUANTIZE): all
    three outputs equal on 2 inputs, in onnxruntime (before these kernels: 10% / 97% / 10%)."""
    from litert_compare import real_value

    from layout import stored_perms
    from qonnx_ingest.errors import ConversionWarning
    from qonnx_ingest.verification import run_converted

    path = CORPUS / "tflite" / "tflm__retinaface.tflite"
    if not path.exists():
        pytest.skip(f"no corpus model {path.name}")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        model = convert(path, bit_exact=True)
    it = reference_interpreter(path)
    perms = stored_perms(model)
    rng = np.random.default_rng(5)
    (inp,) = it.get_input_details()
    for _ in range(2):
        x = random_input(inp, rng)
        it.set_tensor(inp["index"], x)
        it.invoke()
        feed = real_value(x, inp["quantization"])
        if inp["name"] in perms:
            feed = feed.transpose(perms[inp["name"]])
        (ours,), _ = run_converted(model, [{inp["name"]: feed}])
        for out in it.get_output_details():
            y = ours[out["name"]]
            if out["name"] in perms:
                y = y.transpose(np.argsort(perms[out["name"]]))
            theirs = it.get_tensor(out["index"])
            assert np.array_equal(y, theirs), f"{out['name']}: {np.mean(y != theirs):.4%} differ"
