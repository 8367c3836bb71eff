"""What the consumers of our files meet, on every corpus TFLite model: a default onnxruntime
session loads the ``--format qcdq`` file; the default and the ``--channels-last`` file carry the
shape and type of every node output, once each, so qonnx's executor runs the one and qonnx's
cleanup (InferShapes: hls4ml's recipe starts there) takes the other as written."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from litert_compare import reference_interpreter

import tflite2qonnx
from qonnx_ingest.errors import ConversionWarning
from support import CORPUS, requires_corpus

pytestmark = requires_corpus
MODELS = sorted(p.stem for p in (CORPUS / "tflite").glob("*.tflite")) if CORPUS.is_dir() else []
# MoveNet's default conversion binds one Concat to int32 and float (its keypoint decoding):
# onnxruntime refuses it in any form until that is fixed (README corpus table, MoveNet row)
MIXED_DTYPES = "Concat) bound to different types"


@pytest.fixture(scope="module")
def default_conversions() -> dict[str, onnx.ModelProto]:
    """Each corpus model's default conversion, made once for the module."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)
        return {name: tflite2qonnx.convert(CORPUS / "tflite" / f"{name}.tflite") for name in MODELS}


@pytest.mark.parametrize("name", MODELS)
def test_qcdq_file_loads_in_a_default_onnxruntime_session(name, default_conversions):
    from qonnx_ingest.qcdq import to_qcdq

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)  # the tie-rounding warning
        qcdq = to_qcdq(default_conversions[name])
    try:
        ort.InferenceSession(qcdq.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as exc:  # only MoveNet's known dtype mix may stop it
        assert name == "coral__movenet_single_pose_lightning_ptq" and MIXED_DTYPES in str(exc), exc


@pytest.mark.parametrize("name", MODELS)
def test_every_node_output_has_value_info_with_shape_and_type(name, default_conversions):
    graph = default_conversions[name].graph
    known = {v.name: v.type.tensor_type for v in (*graph.value_info, *graph.output)}
    for node in graph.node:
        for out in filter(None, node.output):
            assert out in known, f"{node.op_type} {node.name}: no value_info for {out}"
            assert known[out].elem_type and known[out].HasField("shape"), out


def test_qonnx_executor_runs_dp_net_as_written(default_conversions):
    """qonnx's execute_onnx refused the compact form ("Found unspecified tensor shapes"). Its
    whole-graph checks are quadratic in the tensor count (over two minutes on dp_net's 3,384
    nodes, before a node runs), so they run on the graph's first 20 nodes as written (their
    names, value_info and initializers); that every node output of the whole graph has
    value_info is test_every_node_output_has_value_info_with_shape_and_type, and the order
    onnx's checker. Each node writes a finite tensor of the shape it declares."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx

    model = default_conversions["tflm__dp_net"]
    onnx.checker.check_model(model)  # nodes topologically sorted, among the rest
    graph = model.graph
    rng = np.random.default_rng(0)
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in (*graph.input, *graph.value_info, *graph.output)
    }
    prefix = _first_nodes(model, 20)
    feeds = {
        v.name: rng.uniform(0, 1, shapes[v.name]).astype(np.float32) for v in prefix.graph.input
    }
    # the wrapper as is (its own initializer fix-up is another quadratic pass, not needed)
    wrapper = ModelWrapper(prefix, fix_missing_initializer_valueinfo=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # qonnx warns when a node's result disagrees in shape
        context = execute_onnx(wrapper, feeds, return_full_exec_context=True)
    for node in graph.node[:20]:
        for out in node.output:
            assert list(context[out].shape) == shapes[out], out
            assert np.all(np.isfinite(context[out])), out


def _first_nodes(model: onnx.ModelProto, count: int) -> onnx.ModelProto:
    """The model's first ``count`` nodes as written: the graph inputs, initializers and
    value_info they read, their outputs as the graph's outputs."""
    graph = model.graph
    nodes = graph.node[:count]
    read = {name for node in nodes for name in node.input}
    written = [name for node in nodes for name in node.output]
    info = {v.name: v for v in graph.value_info}
    sub = onnx.helper.make_graph(
        nodes,
        graph.name,
        [v for v in graph.input if v.name in read],
        [info[name] for name in written],
        [t for t in graph.initializer if t.name in read],
        value_info=[v for v in graph.value_info if v.name in read and v.name not in written],
    )
    return onnx.helper.make_model(
        sub, opset_imports=model.opset_import, ir_version=model.ir_version
    )


def test_qonnx_executor_runs_a_quantized_model_as_written_and_matches_the_interpreter():
    """hello_world with --batch-size 1: qonnx's executor needs every shape static (a symbolic
    batch is a zero-length buffer to it); on all 256 int8 inputs it equals the builtin
    kernels on the output grid."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx

    source = CORPUS / "tflite" / "tflm__hello_world_int8.tflite"
    model = ModelWrapper(tflite2qonnx.convert(source, batch_size=1))
    it = reference_interpreter(source)
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    (s_in, z_in), (s_out, z_out) = inp["quantization"], out["quantization"]
    name_in, name_out = model.graph.input[0].name, model.graph.output[0].name
    for q in range(-128, 128):
        it.set_tensor(inp["index"], np.full(inp["shape"], q, np.int8))
        it.invoke()
        expected = it.get_tensor(out["index"]).astype(np.int64)
        x = np.full(inp["shape"], s_in * (q - z_in), np.float32)
        got = execute_onnx(model, {name_in: x})[name_out]
        np.testing.assert_array_equal(np.round(got / s_out) + z_out, expected)


@pytest.mark.parametrize("name", MODELS)
def test_channels_last_output_has_every_shape_qonnx_reads(name):
    """qonnx's InferShapes asks each channels-last op for a shape-compatible stand-in, which
    reads its inputs' shapes from value_info: a Conv weight transposed to OHWI at run time
    (the dynamic-range embedder's 37 hybrid convolutions) had none, and cleanup_model died
    in qonnx/custom_op/channels_last/conv.py. A tensor with two entries (MoveNet) stops
    ModelWrapper itself."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.custom_op.registry import getCustomOp

    from layout.channels_last import CHANNELS_LAST_DOMAIN

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)
        model = tflite2qonnx.convert(CORPUS / "tflite" / f"{name}.tflite", channels_last=True)
    graph = model.graph
    names = [v.name for v in graph.value_info]
    assert len(names) == len(set(names))
    known = {v.name: v.type.tensor_type for v in (*graph.value_info, *graph.output)}
    for node in graph.node:
        for out in filter(None, node.output):
            assert out in known, f"{node.op_type} {node.name}: no value_info for {out}"
            assert known[out].elem_type and known[out].HasField("shape"), out
    custom = [n for n in graph.node if n.domain == CHANNELS_LAST_DOMAIN]
    if custom:  # as is: the wrapper's own initializer fix-up is quadratic (a minute on dp_net)
        wrapper = ModelWrapper(model, fix_missing_initializer_valueinfo=False)
        for node in custom:
            getCustomOp(node).make_shape_compatible_op(wrapper)


def test_qonnx_cleanup_takes_a_hybrid_convolution_in_channels_last_form():
    """cleanup_model (the recipe's first step) on one hybrid CONV_2D of the embedder, whose
    int8 filter is transposed to OHWI in the graph: it runs, and the cleaned model computes
    what the interpreter's builtin kernel computes for that operator on the same input."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.util.cleanup import cleanup_model

    from tflite2qonnx.api import convert_subgraph, slice_subgraph
    from tflite2qonnx.flatbuffer import read_model

    source = CORPUS / "tflite" / "tfexamples__mobilenet_v2_035_96_embedder_dynrange.tflite"
    (subgraph,) = read_model(source).subgraphs
    index = next(
        op.index
        for op in subgraph.operators
        if op.name.endswith("CONV_2D") and subgraph.tensors[op.inputs[1]].dtype == "int8"
    )
    model = convert_subgraph(slice_subgraph(subgraph, [index]), channels_last=True)
    transposed = [n.output[0] for n in model.graph.node if n.output[0].endswith("_ohwi")]
    assert transposed  # the filter is computed in the graph, not folded
    cleaned = cleanup_model(ModelWrapper(model))
    it = reference_interpreter(source, preserve_all=True)
    (ind,) = it.get_input_details()
    it.set_tensor(
        ind["index"], np.random.default_rng(1).uniform(-1, 1, ind["shape"]).astype(np.float32)
    )
    it.invoke()
    op = subgraph.operators[index]
    (name_in,), (name_out,) = (
        [v.name for v in cleaned.graph.input],
        [v.name for v in cleaned.graph.output],
    )
    got = execute_onnx(cleaned, {name_in: it.get_tensor(op.inputs[0])})[name_out]
    np.testing.assert_array_equal(got, it.get_tensor(op.outputs[0]))


def test_qonnx_cleanup_takes_a_model_with_an_unnamed_tensor():
    """The keyword spotter's input tensor has the empty string for a name. Named tensor_52,
    it met qonnx's GiveUniqueTensorNames (in cleanup_model), which renames every tensor to
    tensor_<i> in turn without checking: two tensors merged, and SortGraph found a cycle."""
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.util.cleanup import cleanup_model

    source = CORPUS / "tflite" / "tflm__keyword_scrambled.tflite"
    model = tflite2qonnx.convert(source, channels_last=True)
    cleaned = cleanup_model(ModelWrapper(model))
    assert [v.name for v in cleaned.graph.input] == ["global_in"]
    assert len(cleaned.graph.node) > 0
