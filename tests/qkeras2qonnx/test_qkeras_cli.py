"""The qkeras2qonnx command: exit codes 0/1/2, one-line errors, and a written model that
computes what QKeras computes."""

import os
import stat

import onnx
import pytest
from qkeras_helpers import (
    CORPUS,
    assert_matches_qkeras,
    count_quantizers,
    keras,
    quant_nodes,
    set_seeded_weights,
)

from support import requires_corpus

pytestmark = pytest.mark.keras


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from qkeras import QLSTM, QActivation, QDense, quantized_bits

    k = keras()
    root = tmp_path_factory.mktemp("cli")
    inp = k.Input((5,), name="x")
    h = QDense(4, kernel_quantizer=quantized_bits(6, 0, alpha=1), name="fc")(inp)
    h = QActivation("quantized_relu(5,1)", name="relu")(h)
    good = k.Model(inp, h)
    set_seeded_weights(good, 41)
    good.save(root / "good.h5")
    h = QActivation(quantized_bits(8, 0, alpha="auto"), name="auto_act")(inp)
    bad = k.Model(inp, h)
    bad.save(root / "bad.h5")
    h = k.layers.Lambda(lambda t: t + 1.0, name="plus_one")(good.output)
    k.Model(inp, h).save(root / "lambda.h5")
    (root / "notes.txt").write_text("not a model\n")
    data = (root / "good.h5").read_bytes()
    (root / "corrupt.h5").write_bytes(data[: len(data) // 2])
    (root / "arch.json").write_text(good.to_json())
    seq = k.Input((3, 2), name="seq")
    q = quantized_bits(6, 0, alpha=1)  # return_state is not converted: refused naming "rnn"
    h = QLSTM(4, kernel_quantizer=q, return_state=True, name="rnn")(seq)
    k.Model(seq, h).save(root / "rnn.h5")
    return good, root


def run(argv):
    from qkeras2qonnx.cli import main

    return main([str(a) for a in argv])


def test_converts_and_writes_beside_the_input(files, capsys):
    model, root = files
    assert run([root / "good.h5"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert_matches_qkeras(model, onnx.load(root / "good.onnx"), batch=8)


def test_batch_size_and_output_options(files, tmp_path):
    model, root = files
    out = tmp_path / "fixed.onnx"
    assert run([root / "good.h5", "-o", out, "--batch-size", "8", "--int-quant"]) == 0
    converted = onnx.load(out)
    dims = converted.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [8, 5]
    assert "IntQuant" in {n.op_type for n in converted.graph.node}
    assert_matches_qkeras(model, converted, batch=8)


def test_unsupported_quantizer_exits_1_naming_it(files, tmp_path, capsys):
    _, root = files
    assert run([root / "bad.h5", "-o", tmp_path / "bad.onnx"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "auto_act activation" in err and "alpha='auto'" in err
    assert not (tmp_path / "bad.onnx").exists()


def test_lambda_needs_the_flag(files, tmp_path, capsys):
    _, root = files
    out = tmp_path / "lambda.onnx"
    assert run([root / "lambda.h5", "-o", out]) == 2
    assert "--allow-lambda" in capsys.readouterr().err
    assert run([root / "lambda.h5", "-o", out, "--allow-lambda"]) == 0
    assert out.exists()


@pytest.mark.parametrize("argv", [["--batch-size", "0"], ["--batch-size", "two"]])
def test_bad_batch_size_is_a_usage_error(files, argv):
    _, root = files
    with pytest.raises(SystemExit) as info:
        run([root / "good.h5", *argv])
    assert info.value.code == 2


@requires_corpus
def test_json_with_weights(tmp_path):
    from qkeras2qonnx.environment.load import load_model

    out = tmp_path / "3layer.onnx"
    weights = CORPUS / "qkeras_3layer_weights.h5"
    assert run([CORPUS / "qkeras_3layer.json", "--weights", weights, "-o", out]) == 0
    model = load_model(CORPUS / "qkeras_3layer.json", weights=weights)
    assert len(quant_nodes(onnx.load(out))) == count_quantizers(model)
    assert run([CORPUS / "qkeras_3layer.json", "-o", out]) == 2


@pytest.mark.parametrize(
    "source, code, names",
    [
        ("notes.txt", 2, "notes.txt"),
        ("corrupt.h5", 2, "corrupt.h5"),
        ("arch.json", 2, "--weights"),
        ("rnn.h5", 1, "rnn"),
        ("bad.h5", 1, "auto_act activation"),
        ("lambda.h5", 2, "plus_one"),
        ("missing.h5", 2, "missing.h5"),
    ],
)
def test_bad_inputs_fail_in_one_line_and_write_nothing(
    files, tmp_path, capsys, source, code, names
):
    _, root = files
    out = tmp_path / "out.onnx"
    assert run([root / source, "-o", out]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("qkeras2qonnx: error: "), err
    assert names in err and "internal error" not in err, err
    assert not out.exists() and not list(tmp_path.iterdir())


def test_report_and_encodings_files_get_the_models_mode(files, tmp_path):
    """The model, --report-json and --encodings files are all created under the umask (0666
    less it), as a plain open() would; the side files used to be mkstemp's 0600."""
    _, root = files
    names = ("m.onnx", "r.json", "e.json")
    out, report, encodings = (tmp_path / n for n in names)
    before = os.umask(0o027)
    try:
        code = run([root / "good.h5", "-o", out, "--report-json", report, "--encodings", encodings])
    finally:
        os.umask(before)
    assert code == 0
    assert {n: stat.S_IMODE((tmp_path / n).stat().st_mode) for n in names} == dict.fromkeys(
        names, 0o640
    )
