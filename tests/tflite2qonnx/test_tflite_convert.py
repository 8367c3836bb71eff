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
    "t2o_conv_uint8": CORPUS / "tflite" / "t2o__conv.uint8.tflite",
    "t2o_depthwise_uint8": CORPUS / "tflite" / "t2o__depthwise-conv.uint8.tflite",
    "t2o_mobilenet_v1_uint8": CORPUS / "tflite" / "t2o__mobilenet_v1_0.25_128_quant.tflite",
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


def stored_perms(model):
    """tensor name -> perm from source (NHWC) to stored order, from the layout metadata."""
    props = {p.key: p.value for p in model.metadata_props}
    return {k: v["perm"] for k, v in json.loads(props.get("layout", "{}")).items()}


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


# Deep int8 networks accumulate requantization differences: TFLite's own XNNPACK path differs
# from its builtin kernels by up to ~10 steps there, so those are held to "no worse than XNNPACK".
DEEP = {"t2o_mobilenet_v1_uint8"}


def steps_apart(path, model, it, n_inputs=16, seed=1234):
    """|ours - builtin| and |XNNPACK - builtin| in output quantization steps, and argmaxes."""
    xnnpack = Interpreter(model_path=str(path))
    xnnpack.allocate_tensors()
    (ind,), (outd,) = it.get_input_details(), it.get_output_details()
    perms = stored_perms(model)
    in_name, out_name = model.graph.input[0].name, model.graph.output[0].name
    scale, zero_point = output_grid(it, outd)
    rng = np.random.default_rng(seed)
    ours_steps, xnn_steps, argmax = [], [], []
    for _ in range(n_inputs):
        x = random_input(ind, rng)
        grids = []
        for interp in (it, xnnpack):
            interp.set_tensor(ind["index"], x)
            interp.invoke()
            out = interp.get_tensor(outd["index"]).astype(np.float64)
            grids.append(np.round(out / scale + zero_point) if outd["dtype"] == np.float32 else out)
        feed = real_value(x, ind)
        if in_name in perms:
            feed = feed.transpose(perms[in_name])
        ours = execute_qonnx(model, {in_name: feed})[out_name]
        if out_name in perms:
            ours = ours.transpose(np.argsort(perms[out_name]))
        ours = np.round(ours / scale + zero_point)
        ours_steps.append(np.abs(ours - grids[0]).ravel())
        xnn_steps.append(np.abs(grids[1] - grids[0]).ravel())
        argmax.append((ours.argmax(), grids[0].argmax()))
    return np.concatenate(ours_steps), np.concatenate(xnn_steps), argmax


def test_outputs_match_interpreter(case, request):
    path, model, it = case
    ours, xnnpack, argmax = steps_apart(path, model, it)
    if request.node.callspec.id in DEEP:
        assert ours.max() <= xnnpack.max()
        assert np.mean(ours == 0) >= np.mean(xnnpack == 0) - 1e-9
        assert all(a == b for a, b in argmax)
    else:
        assert ours.max() <= 1
        assert np.mean(ours == 0) >= 0.999


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


def test_no_transposes_remain(case):
    """These models have no terminate op that needs NHWC order: the layout pass leaves none."""
    assert [n.name for n in case[1].graph.node if n.op_type == "Transpose"] == []


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
