"""Keras 3 models (qkeras-v3) convert exactly, in memory, from a .keras or Keras-3 HDF5 file
and on the command line, although this test process imported QKeras 0.9 (a file of the other
generation is converted in a subprocess; see ``qkeras2qonnx.environment.flavour``).

The models are built, run (qkeras-v3's own predict) and converted in memory by
``qkeras3_models.py`` under qkeras-v3; this process only compares files.
"""

import numpy as np
import onnx
import pytest
from qkeras3_support import (
    assert_matches_reference,
    keras2_era_hdf5,
    made_models,
    run_cli_on_keras3_file,
)
from qkeras_helpers import quant_nodes

from qonnx_ingest.errors import ConversionError

pytestmark = pytest.mark.keras

CONVERTED = ("dense", "conv_bn", "dense_bn", "v3_quantizers", "mixed_conv", "mixed_1d")
# In memory only: QScaleShift and quantized_linear activations; Bidirectional QLSTM / QGRU
# (reset_after=True) and a backwards QSimpleRNN, unrolled.
IN_MEMORY = ("v3_layers", "recurrent")


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return made_models(tmp_path_factory)


def reference(made, name):
    return dict(np.load(made / f"{name}.npz"))


@pytest.mark.parametrize("name", CONVERTED + IN_MEMORY)
def test_in_memory_keras3_model_matches_qkeras3_predict(made, name):
    converted = onnx.load(made / f"{name}.inmemory.onnx")
    onnx.checker.check_model(converted)
    ref = reference(made, name)
    assert len(quant_nodes(converted)) == int(ref["quantizers"])
    assert_matches_reference(converted, ref)


def test_keras3_conv1d_layers_are_rank3_ops(made):
    """qkeras-v3's QConv1D / QSeparableConv1D come out as 1-D Conv on rank-3 tensors, with
    rank-3 weights, not tf2onnx's Unsqueeze -> 2-D Conv -> Squeeze (qkeras2qonnx.emit.conv1d)."""
    graph = onnx.load(made / "mixed_1d.inmemory.onnx").graph
    ops = [n.op_type for n in graph.node]
    assert "Unsqueeze" not in ops and "Squeeze" not in ops, ops
    dims = {t.name: list(t.dims) for t in graph.initializer}
    producers = {o: n for n in graph.node for o in n.output}
    convs = [n for n in graph.node if n.op_type == "Conv"]
    assert len(convs) == 3  # QConv1D, and QSeparableConv1D's depthwise and pointwise
    for conv in convs:
        kernel = next(list(a.ints) for a in conv.attribute if a.name == "kernel_shape")
        weight = producers[conv.input[1]].input[0]  # each kernel is quantized
        assert len(kernel) == 1 and len(dims[weight]) == 3, (conv.name, kernel, dims[weight])


@pytest.mark.parametrize("name", CONVERTED)
def test_keras_file_converts_in_a_subprocess_from_a_qkeras09_process(made, name):
    import qkeras

    import qkeras2qonnx
    from qkeras2qonnx.environment import flavour

    assert qkeras.__version__.startswith("0.9")  # this process cannot import qkeras-v3
    assert flavour.file_flavour(made / f"{name}.keras") == flavour.KERAS3
    converted = qkeras2qonnx.convert(made / f"{name}.keras", verify=True)
    onnx.checker.check_model(converted)
    ref = reference(made, name)
    assert len(quant_nodes(converted)) == int(ref["quantizers"])
    assert_matches_reference(converted, ref)


def test_batchnorm_folded_layers_keep_no_batchnorm(made):
    for name in ("conv_bn", "dense_bn"):
        converted = onnx.load(made / f"{name}.inmemory.onnx")
        assert not any(n.op_type == "BatchNormalization" for n in converted.graph.node), name


def test_keras3_hdf5_converts_through_the_keras3_path(made, tmp_path):
    """An HDF5 model written by Keras 3 (here with QDenseBatchnorm, which QKeras 0.9 lacks)."""
    import qkeras2qonnx
    from qkeras2qonnx.environment import flavour

    assert flavour.file_flavour(made / "dense_bn.h5") == flavour.KERAS3
    converted = qkeras2qonnx.convert(made / "dense_bn.h5", tmp_path / "out.onnx")
    assert (tmp_path / "out.onnx").exists()
    assert_matches_reference(converted, reference(made, "dense_bn"))


def test_keras2_era_hdf5_with_qdensebatchnorm_converts_through_the_keras3_path(made, tmp_path):
    """A legacy HDF5 as tf.keras 2 writes it (keras_version 2.x) naming QDenseBatchnorm, the
    layer of QKeras's git master the MLPerf Tiny forks trained with: QKeras 0.9 cannot load
    it, qkeras-v3 can, and it converts exactly."""
    import h5py
    from qkeras.utils import load_qmodel

    import qkeras2qonnx
    from qkeras2qonnx.environment import flavour

    path = keras2_era_hdf5(made / "dense_bn.h5", tmp_path / "fork.h5")
    with h5py.File(path, "r") as f:
        assert f.attrs["keras_version"].startswith("2.")
    with pytest.raises(ValueError, match="QDenseBatchnorm"):
        load_qmodel(path, compile=False)  # this process runs QKeras 0.9
    assert flavour.file_flavour(path) == flavour.KERAS3
    converted = qkeras2qonnx.convert(path)
    onnx.checker.check_model(converted)
    assert_matches_reference(converted, reference(made, "dense_bn"))


@pytest.mark.parametrize(
    "name, fragments",
    [
        ("linear_1bit", ("fc kernel_quantizer", "quantized_linear(1,0", "1-bit")),
    ],
)
def test_unsupported_keras3_models_are_refused_naming_the_layer(made, name, fragments, tmp_path):
    import qkeras2qonnx

    in_memory = (made / f"{name}.error.txt").read_text()
    assert not (made / f"{name}.inmemory.onnx").exists()
    with pytest.raises(ConversionError) as caught:  # relayed from the subprocess
        qkeras2qonnx.convert(made / f"{name}.keras", tmp_path / "out.onnx")
    assert not (tmp_path / "out.onnx").exists()
    for fragment in fragments:
        assert fragment in in_memory and fragment in str(caught.value)


def test_recurrent_quantizers_are_nodes_on_every_step(made):
    """Both directions of each Bidirectional, and the backwards QSimpleRNN, step by step."""
    names = {n.name for n in quant_nodes(onnx.load(made / "recurrent.inmemory.onnx"))}
    for cell in ("bi_lstm/forward", "bi_lstm/backward", "bi_gru/forward", "bi_gru/backward"):
        assert f"{cell}/state_quantizer/t1/0" in names
        assert f"{cell}/kernel_quantizer" in names
    # qkeras-v3 1.2.1's QSimpleRNN drops its name= argument: found by its node instead
    simple = [n for n in names if n.endswith("/activation_quantizer/t1/0") and n.count("/") == 3]
    assert len(simple) == 1


def test_load_model_refuses_a_keras3_file_in_a_qkeras09_process(made):
    from qkeras2qonnx.environment.load import load_model

    with pytest.raises(ConversionError, match="qkeras-v3 on Keras 3.*subprocess"):
        load_model(made / "dense.keras")


def test_cli_converts_a_keras3_file_and_verifies(made, tmp_path):
    """A fresh ``qkeras2qonnx`` process picks Keras 3 from the file and runs it in-process."""
    out = tmp_path / "dense.onnx"
    done = run_cli_on_keras3_file(made / "conv_bn.keras", "-o", out, "--verify")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "verify: ok, " in done.stdout
    assert_matches_reference(onnx.load(out), reference(made, "conv_bn"))
