"""hls4ml acceptance for HGQ2: our QONNX of an HGQ2 model compiles in hls4ml 1.3.0 (QONNX
frontend, g++ emulation) and predicts what hls4ml's own HGQ2 frontend and HGQ2's ``predict``
predict from the same model, bit for bit; where hls4ml refuses our graph, the refusal is the
known one (message and file:line).

Everything runs in one Keras 3 subprocess (``hgq2_hls4ml.py``: hls4ml's HGQ2 frontend needs
``hgq``); this process compares its files. A few minutes on 2 cores (eight g++ builds).
``layers_sat`` holds QEinsumDense, QEinsumDenseBatchnorm, QBatchNormalization, QSubtract,
QMultiply and QAdd (``hgq2_hls4ml_layers``); every other layer kind of docs/keras.md's
table has its own model, refused as pinned here.
"""

import numpy as np
import pytest
from qkeras3_support import run_qkeras3

from qkeras2qonnx.environment import flavour

pytestmark = [pytest.mark.keras, pytest.mark.hls4ml]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    if flavour.hgq2_dir() is None:
        pytest.skip("hgq2 is not installed beside the venv (scripts/setup.sh installs it)")
    root = tmp_path_factory.mktemp("hgq2_hls4ml")
    run_qkeras3("hgq2_hls4ml.py", root)
    return root


@pytest.mark.parametrize("name", ["dense_sat", "conv_sat", "merge_sat", "layers_sat"])
def test_hls4ml_on_our_qonnx_equals_hls4ml_hgq2_frontend_and_hgq2(built, name):
    d = np.load(built / f"{name}.npz")
    assert len(np.unique(d["hgq2"])) > 10  # not a degenerate (constant) output
    np.testing.assert_array_equal(d["hls4ml_qonnx"], d["hls4ml_hgq2"])
    np.testing.assert_array_equal(d["hls4ml_qonnx"], d["hgq2"])


@pytest.mark.parametrize(
    "name, op",
    [
        ("dense_wrap", "Floor"),  # per-element WRAP activations: standard ops, covering Quant
        ("tables_sat", "Round"),  # a table's grid index (QUnaryFunctionLUT tanh, QSoftmax)
    ],
)
def test_forms_hls4ml_has_no_handler_for_are_refused_where_known(built, name, op):
    """hls4ml 1.3.0's ONNX frontend refuses the first op it has no handler for; the models
    reach hls4ml through its HGQ2 frontend only."""
    assert not (built / f"{name}.npz").exists()
    message, where = (built / f"{name}.refused.txt").read_text().splitlines()
    assert message == f"ERROR: Unsupported operation type: {op}"
    assert where == "onnx_to_hls.py:239"


_NO_HANDLER = "onnx_to_hls.py:239"
_NOT_CHANNELS_LAST = "Please convert the model to channels-last format with qonnx-to-channels-last"


@pytest.mark.parametrize(
    "name, message, where",
    [
        # AveragePool stays between Transposes (qonnx's channels-last pass leaves it NCHW)
        ("avg_pool1d_sat", _NOT_CHANNELS_LAST, "pooling.py:15"),
        ("avg_pool2d_sat", _NOT_CHANNELS_LAST, "pooling.py:15"),
        ("avg_pool3d_sat", _NOT_CHANNELS_LAST, "pooling.py:15"),
        ("global_avg1d_sat", "ERROR: Unsupported operation type: Squeeze", _NO_HANDLER),
        ("global_avg2d_sat", "ERROR: Unsupported operation type: Squeeze", _NO_HANDLER),
        ("global_avg3d_sat", "ERROR: Unsupported operation type: ReduceMean", _NO_HANDLER),
        ("dot_sat", "ERROR: Unsupported operation type: Unsqueeze", _NO_HANDLER),
        ("einsum_sat", "ERROR: Unsupported operation type: Unsqueeze", _NO_HANDLER),
        ("sum_sat", "ERROR: Unsupported operation type: ReduceSum", _NO_HANDLER),
        ("mean_pow2_sat", "ERROR: Unsupported operation type: ReduceSum", _NO_HANDLER),
        # qonnx's ConvertToChannelsLastAndClean (the recipe's step before hls4ml) stops first
        ("conv3d_sat", "Channels last conversion is only available for 3D and 4D tensors.",
         "channels_last.py:228"),
        ("affine_lut_sat", "ERROR: Unsupported operation type: Round", _NO_HANDLER),
        # QMultiHeadAttention: tf2onnx's einsum lowering (its softmax tables would stop next)
        ("attention_sat", "ERROR: Unsupported operation type: Unsqueeze", _NO_HANDLER),
    ],
)  # fmt: skip
def test_each_other_hgq2_layer_kind_is_refused_by_hls4ml_qonnx_with_its_known_message(
    built, name, message, where
):
    """One uniform-SAT model per layer kind (``hgq2_hls4ml_layers.REFUSED``): the recipe
    (docs/hls4ml.md) stops with this exception; no model reaches a compile."""
    assert not (built / f"{name}.npz").exists()
    assert (built / f"{name}.refused.txt").read_text().splitlines() == [message, where]


@pytest.mark.parametrize(
    "name, message, where",
    [
        # qonnx's GemmToMatMul (the recipe's step before hls4ml) fails on tf2onnx's Gemm of
        # an einsum over the first axis (Transpose / Reshape / Gemm with run-time shapes)
        ("einsum_first_sat", "list index out of range", "gemm_to_matmul.py:166"),
        # hls4ml's batch-norm fusion broadcasts the rank-3 output against the bias wrongly
        ("einsum_last_rank3_sat", "operands could not be broadcast together with shapes "
         "(4,3) (6,3) ", "bn_fuse.py:76"),
        ("slice_sat", "ERROR: Unsupported operation type: Slice", _NO_HANDLER),
        # keras.ops.add at batch 1: a squeezed BiasAdd (see hgq2_ops)
        ("arithmetic_sat", "ERROR: Unsupported operation type: Squeeze", _NO_HANDLER),
    ],
)  # fmt: skip
def test_rank3_einsums_and_keras_op_nodes_are_refused_by_hls4ml_qonnx_as_known(
    built, name, message, where
):
    """QEinsumDense on a rank-3 input and Keras 3 op nodes between layers
    (``hgq2_hls4ml_graphs``): exact in QONNX (test_hgq2_convert), refused by the recipe."""
    assert not (built / f"{name}.npz").exists()
    assert (built / f"{name}.refused.txt").read_text().splitlines() == [message, where]
