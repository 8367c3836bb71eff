"""Messages a person can act on: each names what to do next, short enough to read."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest

from qonnx_ingest.errors import ConversionWarning
from support import CORPUS, assert_cli_fails, requires_corpus, snapshot
from tflite2qonnx import convert
from tflite2qonnx.cli import main
from tflite2qonnx.reader import read_model

TFLITE = CORPUS / "tflite"
CONV = TFLITE / "t2o__conv.uint8.tflite"  # input 'input' [1,4,4,3] feeds a CONV_2D
PERSON = TFLITE / "tflm__person_detect.tflite"
CORAL = TFLITE / "coral__tf2_mobilenet_v2_1.0_224_ptq.tflite"

pytestmark = [requires_corpus, pytest.mark.filterwarnings("ignore::UserWarning")]


def test_pinning_an_input_to_nhwc_points_to_keep_io_layout(tmp_path, capsys):
    argv = [CONV, "-o", tmp_path / "m.onnx", "--layout", "input=NHWC"]
    err = assert_cli_fails(capsys, main, "tflite2qonnx", argv, 1, "layout conflict")
    assert "drop --layout and use --keep-io-layout" in err
    # and that advice works: the input stays NHWC
    assert main([str(CONV), "-o", str(tmp_path / "m.onnx"), "--keep-io-layout"]) == 0
    model = onnx.load(tmp_path / "m.onnx")
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [1, 4, 4, 3]


def test_a_layout_for_a_missing_tensor_lists_what_exists(tmp_path, capsys):
    argv = [CONV, "-o", tmp_path / "m.onnx", "--layout", "inptu=NCHW"]
    assert_cli_fails(
        capsys,
        main,
        "tflite2qonnx",
        argv,
        2,
        "inptu",
        "does not have",
        "did you mean input?",
        "inputs: input; outputs: output",
    )
    assert list(tmp_path.iterdir()) == []


def test_strict_names_a_few_tensors_briefly(tmp_path, capsys):
    argv = [PERSON, "-o", tmp_path / "m.onnx", "--format", "qcdq", "--strict"]
    err = assert_cli_fails(capsys, main, "tflite2qonnx", argv, 1, "32 activation quantizers")
    assert "and 29 more" in err and ";" not in err
    assert len(err) < 400, err  # was 1.5 kB of ';'-joined fused names


def test_qcdq_summary_counts_quantize_dequantize_pairs(tmp_path, capsys):
    assert main([str(CONV), "-o", str(tmp_path / "m.onnx"), "--format", "qcdq"]) == 0
    out = capsys.readouterr().out
    nodes = onnx.load(tmp_path / "m.onnx").graph.node
    q = sum(n.op_type == "QuantizeLinear" for n in nodes)
    dq = sum(n.op_type == "DequantizeLinear" for n in nodes)
    assert q > 0
    assert 0 < q < dq  # the weights and biases are constants behind a DequantizeLinear alone
    expected = f"{q} QuantizeLinear/DequantizeLinear pairs, {dq - q} dequantized constants)"
    assert f"({len(nodes)} nodes, {expected}" in out and "quantizers" not in out


@pytest.mark.keras
def test_bit_exact_counts_every_operator_it_leaves():
    """Two int8 SQUARE (an integer op without an emulated kernel; TF keeps SQUARE in float,
    so the LOG and TANH of an int8 model are changed into it) are named once with their
    count, and the count says two."""
    import zlib

    from hand_built import edit_operator
    from tf_models import OpCase, _fn, build_tflite

    case = OpCase("LOG", _fn(lambda tf, x: tf.tanh(tf.math.log(x))), ((1, 10),), 0.05, 4)
    data = build_tflite(case, True, seed=zlib.crc32(b"twice") % 1000)
    for kind in ("LOG", "TANH"):
        data = edit_operator(data, kind, new_op="SQUARE", version=1)
    kinds = [op.name for op in read_model(data).subgraphs[0].operators]
    assert kinds.count("SQUARE") == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConversionWarning)
        convert(data, bit_exact=True)
    (message,) = [str(w.message) for w in caught if "--bit-exact leaves" in str(w.message)]
    assert "leaves 2 integer operators rounding once" in message
    assert message.endswith(": SQUARE x2")


@pytest.fixture
def verify_inputs(tmp_path):
    pytest.importorskip(
        "ai_edge_litert", reason="--verify needs the TFLite interpreter: pip install '.[verify]'"
    )
    rng = np.random.default_rng(3)
    nhwc = rng.uniform(-1, 1, (2, 4, 4, 3)).astype(np.float32)
    np.savez(tmp_path / "nhwc.npz", input=nhwc)
    np.savez(tmp_path / "nhwc_batch.npz", input=nhwc[:, None])
    np.savez(tmp_path / "nchw.npz", input=nhwc.transpose(0, 3, 1, 2))
    return tmp_path


def test_verify_inputs_in_the_wrong_layout_are_refused_naming_both_shapes(verify_inputs, capsys):
    tmp = verify_inputs
    before = snapshot(tmp)
    argv = [CONV, "-o", tmp / "m.onnx", "--verify-inputs", tmp / "nchw.npz"]
    assert_cli_fails(
        capsys,
        main,
        "tflite2qonnx",
        argv,
        2,
        "nchw.npz",
        "samples of shape (3, 4, 4)",
        "takes (1, 4, 4, 3) (NHWC",
    )
    assert snapshot(tmp) == before


@pytest.mark.parametrize("name", ["nhwc.npz", "nhwc_batch.npz"])
def test_verify_inputs_in_the_source_layout_are_taken(name, verify_inputs, capsys):
    tmp = verify_inputs
    assert main([str(CONV), "-o", str(tmp / "m.onnx"), "--verify-inputs", str(tmp / name)]) == 0
    assert "  on 2 inputs; " in capsys.readouterr().out


def test_an_onnx_model_is_said_to_be_onnx_already_in_one_line(tmp_path, capsys):
    """(was "file identifier is b'qonn'": the bytes of the producer name)"""
    from support import EXAMPLES

    converted = tmp_path / "m.onnx"
    assert main([str(EXAMPLES / "int8_dense.tflite"), "-o", str(converted), "-q"]) == 0
    capsys.readouterr()
    before = snapshot(tmp_path)
    argv = [converted, "-o", tmp_path / "again.onnx"]
    assert_cli_fails(capsys, main, "tflite2qonnx", argv, 2, "m.onnx: this is already an ONNX model")
    assert snapshot(tmp_path) == before
    # bytes that only start like ONNX keep the flatbuffer message
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x08\x07" + bytes(range(30)))
    argv = [junk, "-o", tmp_path / "junk.onnx"]
    assert_cli_fails(capsys, main, "tflite2qonnx", argv, 2, "not a TFLite flatbuffer")
