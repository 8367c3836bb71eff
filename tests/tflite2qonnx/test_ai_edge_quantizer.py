"""Every single-model recipe of Google's ai-edge-quantizer 0.10 on one small float model
(Conv2D -> DepthwiseConv2D -> Dense), converted and compared with the LiteRT interpreter.

What each recipe writes, and what the converter makes of it (docs/tflite.md):
- int8 weights (dynamic_wi8*, legacy, weight-only, static): exact as --verify measures it;
- per-channel int4 / int2 weights: LiteRT's hybrid kernels unpack them to int8 and quantize
  the input on the fly; the converted graph does the same, exact as --verify measures it;
- blockwise int4 weights: the optimized kernel's blockwise product (ops/hybrid/blockwise.py),
  bit for bit;
- int2 convolution filters and blockwise int2 weights: refused, LiteRT's kernels do not
  compute them (values near 1e37; 0.7 off the dequantized weights).
Blockwise int4 models are compared with the builtin optimized kernels: the reference kernel
(BUILTIN_REF) returns the bias alone for a blockwise FULLY_CONNECTED, and --verify distrusts
it (tflite2qonnx/reference_trust.py): a wrong conversion fails instead of hiding in the
allowance that kernel's distance from XNNPACK used to give.
"""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest
from control_flow_models import in_fresh_process
from litert_compare import run_ours
from onnx import numpy_helper

import tflite2qonnx
from qonnx_ingest.errors import ConversionError, ReferenceUnavailable
from qonnx_ingest.quant_lowering import lower_quants
from tflite2qonnx import reference_paths
from tflite2qonnx.api import convert_subgraph, slice_subgraph
from tflite2qonnx.reader import read_model
from tflite2qonnx.reference import verify
from tflite2qonnx.verified import convert_and_verify

if importlib.util.find_spec("ai_edge_quantizer") is None:  # the test command installs it
    pytest.fail("ai-edge-quantizer is not installed: run `bash scripts/setup.sh`", pytrace=False)
pytestmark = pytest.mark.keras

# verified exactly as --verify does (bit_exact: the integer kernels emulated)
EXACT = {
    "dynamic_legacy_wi8_afp32": {},
    "dynamic_wi8_afp32": {},
    "dynamic_wi8c_afp32": {},
    "dynamic_wi8c_hr_afp32": {},
    "dynamic_wi4_afp32": {},  # int4 / int2 per channel: the kernels unpack them to int8
    "dynamic_wi4c_afp32": {},
    "dynamic_wi4c_hr_afp32": {},
    "dynamic_wi2c_hr_afp32": {},
    "dynamic_wi8b32_afp32": {},  # 8-bit blockwise: the quantizer leaves the weights float
    "dynamic_wi8b64_afp32": {},
    "weight_only_wi4_afp32": {},
    "weight_only_wi8_afp32": {},
    "static_wi8_ai8": {"bit_exact": True},
    "static_wi8_ai16": {"bit_exact": True},
}
# blockwise int4: the optimized kernel's on-the-fly quantization and block sums
BLOCKWISE = ("dynamic_wi4b32_afp32", "dynamic_wi4b64_afp32")
# recipe -> the bit width of its dense weight's Quant node
WEIGHT_BITS = {
    "dynamic_wi4_afp32": 4,
    "dynamic_wi4c_afp32": 4,
    "dynamic_wi4c_hr_afp32": 4,
    "dynamic_wi2c_hr_afp32": 2,
    "dynamic_wi4b32_afp32": 4,
    "dynamic_wi4b64_afp32": 4,
    "weight_only_wi4_afp32": 4,
    "dynamic_wi8c_afp32": 8,
}
REFUSED = {
    "dynamic_wi2c_afp32": "int2 filters",
    "dynamic_wi2b32_afp32": "blockwise int2 weights",
    "dynamic_wi2b64_afp32": "blockwise int2 weights",
}


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    names = ["float", *EXACT, *BLOCKWISE, *REFUSED]
    specs = {name: ("recipe_model", {"name": name}) for name in names}
    return in_fresh_process(specs, module="ai_edge_quantizer_models")


def test_every_single_model_recipe_is_covered() -> None:
    from ai_edge_quantizer_models import recipe_names

    assert sorted(recipe_names()) == sorted([*EXACT, *BLOCKWISE, *REFUSED])


@pytest.mark.parametrize("name", sorted(EXACT))
def test_int8_recipe_converts_exactly(models, name) -> None:
    _, figures = convert_and_verify(models[name], **EXACT[name])
    (out,) = figures.outputs
    if EXACT[name]:
        assert out.max_steps == 0  # integer outputs equal the kernels' bit for bit
    else:
        assert out.max_abs_error <= 1e-6


@pytest.mark.parametrize("name", sorted(WEIGHT_BITS))
def test_sub_byte_weights_are_quant_nodes_of_their_width(models, name) -> None:
    model = tflite2qonnx.convert(models[name])
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    weights = [n for n in model.graph.node if n.op_type == "Quant" and n.input[0] in inits]
    bits = {float(inits[n.input[3]]) for n in weights}
    assert bits == {float(WEIGHT_BITS[name])}


def _optimized_kernels(data: bytes):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    resolver = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    it = Interpreter(
        model_content=data, experimental_op_resolver_type=resolver,
        experimental_preserve_all_tensors=True,
    )  # fmt: skip
    it.allocate_tensors()
    return it


@pytest.mark.parametrize("name", BLOCKWISE)
def test_blockwise_int4_fully_connected_equals_the_optimized_kernel_bit_for_bit(models, name):
    """The FULLY_CONNECTED alone, fed the interpreter's own input (grid-aligned inputs too,
    where the on-the-fly quantizer meets ties); then the whole model, whose float convolutions
    differ from the interpreter's in the last bits."""
    data = models[name]
    (subgraph,) = read_model(data).subgraphs
    (op,) = [op for op in subgraph.operators if op.name == "FULLY_CONNECTED"]
    assert subgraph.tensors[op.inputs[1]].quantization.block_size in (32, 64)
    piece = lower_quants(
        convert_subgraph(slice_subgraph(subgraph, [op.index]), keep_io_layout=True)
    )
    model = tflite2qonnx.convert(data)
    it = _optimized_kernels(data)
    rng = np.random.default_rng(1)
    worst = 0.0
    for k in range(6):
        x = rng.uniform(-1, 1, (2, 4, 4, 64)).astype(np.float32)
        x = np.round(x * 8) / 8 if k % 2 else x
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        fc_in = {piece.graph.input[0].name: it.get_tensor(op.inputs[0])}
        fc_out = run_ours(piece, fc_in)[piece.graph.output[0].name]
        np.testing.assert_array_equal(fc_out, it.get_tensor(op.outputs[0]))
        ours = run_ours(model, {model.graph.input[0].name: x})[model.graph.output[0].name]
        theirs = it.get_tensor(it.get_output_details()[0]["index"])
        worst = max(worst, float(np.max(np.abs(ours - theirs))))
    assert worst <= 1e-6


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_unrunnable_recipe_is_refused_in_one_line(models, name) -> None:
    with pytest.raises(ConversionError, match=REFUSED[name]) as exc:
        tflite2qonnx.convert(models[name])
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("name", BLOCKWISE)
def test_blockwise_weights_in_qcdq_are_a_blocked_dequantize_linear(models, name) -> None:
    """Opset 21's DequantizeLinear(axis, block_size), run by onnxruntime, computes what the
    QONNX form computes (its float convolutions in the last bits)."""
    import onnxruntime as ort

    qcdq = tflite2qonnx.convert(models[name], format="qcdq", keep_io_layout=True)
    qonnx = tflite2qonnx.convert(models[name], keep_io_layout=True)
    blocked = [
        {a.name: a.i for a in n.attribute}
        for n in qcdq.graph.node
        if n.op_type == "DequantizeLinear" and any(a.name == "block_size" for a in n.attribute)
    ]
    assert blocked == [{"axis": 1, "block_size": int(name.split("b")[1][:2])}]
    x = np.random.default_rng(2).uniform(-1, 1, (2, 4, 4, 64)).astype(np.float32)
    session = ort.InferenceSession(qcdq.SerializeToString())
    (ours,) = session.run(None, {qcdq.graph.input[0].name: x})
    expected = run_ours(qonnx, {qonnx.graph.input[0].name: x})[qonnx.graph.output[0].name]
    assert float(np.max(np.abs(ours - expected))) <= 1e-6


@pytest.mark.parametrize("name", BLOCKWISE)
def test_verify_distrusts_the_reference_kernels_that_return_the_bias_alone(models, name):
    """The builtin reference kernels are a median 0.7 of the output's spread from both other
    runtimes, which agree within 1e-7: verify holds the model to the optimized kernels."""
    _, figures = convert_and_verify(models[name])
    assert re.search(
        r"; TFLite reference: optimized builtin kernels \(builtin kernels distrusted: on "
        r"StatefulPartitionedCall:0 they are a median 0\.(69|7) of the output's spread from "
        r"optimized builtin kernels and XNNPACK, which agree within [0-9.]+e-0[78]\)$",
        figures.runner,
    ), figures.runner
    (out,) = figures.outputs
    assert out.reference == "TFLite's optimized builtin kernels" and out.max_abs_error <= 1e-6


def test_a_blockwise_conversion_ten_percent_off_fails_verify(models):
    """The broken reference used to pass this: XNNPACK is 0.57 from it, ours within 1.5x."""
    model = tflite2qonnx.convert(models["dynamic_wi4b32_afp32"])
    (quant,) = [n for n in model.graph.node if n.op_type == "Quant"]
    (scale,) = [t for t in model.graph.initializer if t.name == quant.input[1]]
    scale.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scale) * 1.1, scale.name))
    figures = verify(models["dynamic_wi4b32_afp32"], model)
    assert not figures.passed
    assert "from TFLite's optimized builtin kernels" in figures.as_text()


def test_without_an_arbiter_the_disagreeing_runtimes_make_verify_unavailable(models, monkeypatch):
    """Only the broken reference kernels and XNNPACK run: no majority, so no verdict."""
    opened = reference_paths.open_path

    def no_optimized(source, kind, model=None):
        if kind == reference_paths.BUILTIN:
            raise ReferenceUnavailable("the optimized kernels are unavailable")
        return opened(source, kind, model)

    monkeypatch.setattr("tflite2qonnx.reference.open_path", no_optimized)
    with pytest.raises(ReferenceUnavailable, match="disagree beyond rounding") as exc:
        convert_and_verify(models["dynamic_wi4b32_afp32"])
    assert re.search(
        r"on StatefulPartitionedCall:0: builtin kernels and XNNPACK are a median 0\.(69|7) ",
        str(exc.value),
    ), str(exc.value)
