"""Converted int8 models agree with the TFLite interpreter (ai-edge-litert) on seeded inputs."""

import json

import numpy as np
import onnx
import pytest
from ai_edge_litert.interpreter import Interpreter, OpResolverType

import tflite2qonnx
from qonnx_ingest.execute import execute_qonnx
from support import CORPUS, EXAMPLES
from tflite2qonnx.api import IO_QUANTIZATION_KEY

MODELS = {
    "example_int8_dense": EXAMPLES / "int8_dense.tflite",
    "tflm_hello_world": CORPUS / "tflite" / "tflm__hello_world_int8.tflite",
}


def reference_interpreter(path):
    """The builtin reference kernels, not XNNPACK: the semantics the file defines."""
    it = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    return it


def random_input(detail, rng):
    if detail["dtype"] == np.float32:
        return rng.uniform(-1, 1, detail["shape"]).astype(np.float32)
    info = np.iinfo(detail["dtype"])
    return rng.integers(info.min, info.max + 1, detail["shape"]).astype(detail["dtype"])


def real_value(array, detail):
    if detail["dtype"] == np.float32:
        return array
    scale, zero_point = detail["quantization"]
    return (scale * (array.astype(np.float64) - zero_point)).astype(np.float32)


def output_grid(it, outd):
    """(scale, zero point) of an int output, or of the tensor a float output DEQUANTIZEs."""
    if outd["dtype"] != np.float32:
        return outd["quantization"]
    for op in it._get_ops_details():
        if op["op_name"] == "DEQUANTIZE" and outd["index"] in op["outputs"]:
            return it.get_tensor_details()[op["inputs"][0]]["quantization"]
    raise AssertionError("float output not produced by DEQUANTIZE")


@pytest.fixture(scope="module", params=sorted(MODELS))
def case(request):
    path = MODELS[request.param]
    if not path.exists():
        pytest.skip(f"{path} not present (corpus missing)")
    return path, tflite2qonnx.convert(path), reference_interpreter(path)


def test_outputs_match_interpreter_within_one_step(case):
    path, model, it = case
    (ind,), (outd,) = it.get_input_details(), it.get_output_details()
    rng = np.random.default_rng(1234)
    steps = []
    for _ in range(32):
        x = random_input(ind, rng)
        it.set_tensor(ind["index"], x)
        it.invoke()
        ref = it.get_tensor(outd["index"])
        ours = execute_qonnx(model, {model.graph.input[0].name: real_value(x, ind)})
        ours = ours[model.graph.output[0].name]
        scale, zero_point = output_grid(it, outd)
        ours = np.round(ours / scale + zero_point)
        if outd["dtype"] == np.float32:
            ref = np.round(ref / scale + zero_point)
        steps.append(np.abs(ours - ref.astype(np.float64)).ravel())
    steps = np.concatenate(steps)
    assert steps.max() <= 1
    assert np.mean(steps == 0) >= 0.999


def test_every_quantized_tensor_has_a_quantizer(case):
    path, model, it = case
    quantized = [
        t
        for t in it.get_tensor_details()
        if len(t["quantization_parameters"]["scales"]) and t["dtype"] != np.float32
    ]
    n_quant = sum(n.op_type == "Quant" for n in model.graph.node)
    assert n_quant == len(quantized)


def test_model_passes_onnx_checker(case):
    onnx.checker.check_model(case[1])


def test_integer_io_scales_are_recorded_in_metadata():
    path = MODELS["tflm_hello_world"]
    model = tflite2qonnx.convert(path)
    recorded = json.loads({p.key: p.value for p in model.metadata_props}[IO_QUANTIZATION_KEY])
    it = reference_interpreter(path)
    for detail in (*it.get_input_details(), *it.get_output_details()):
        entry = recorded[detail["name"]]
        assert entry["dtype"] == np.dtype(detail["dtype"]).name
        np.testing.assert_allclose(entry["scale"], [detail["quantization"][0]], rtol=1e-7)
        assert entry["zero_point"] == [detail["quantization"][1]]


def test_int8_weights_are_marked_narrow_and_biases_32_bit():
    model = tflite2qonnx.convert(MODELS["tflm_hello_world"])
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    consumers = {i: n for n in model.graph.node for i in n.input}
    quants = [n for n in model.graph.node if n.op_type == "Quant"]
    on_matmul_weight = [
        q for q in quants if q.input[0] in inits and consumers[q.output[0]].op_type == "MatMul"
    ]
    on_bias = [q for q in quants if q.input[0] in inits and consumers[q.output[0]].op_type == "Add"]
    assert len(on_matmul_weight) == len(on_bias) == 3
    for q in on_matmul_weight:
        assert onnx.helper.get_node_attr_value(q, "narrow") == 1
        assert inits[q.input[3]] == 8
    for q in on_bias:
        assert inits[q.input[3]] == 32


def test_bytes_input_converts_like_a_path():
    path = MODELS["example_int8_dense"]
    a = tflite2qonnx.convert(path)
    b = tflite2qonnx.convert(path.read_bytes())
    assert [n.op_type for n in a.graph.node] == [n.op_type for n in b.graph.node]
