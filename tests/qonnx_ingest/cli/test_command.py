"""The shared CLI maps outcomes to exit codes and one-line messages, and never harms the input."""

import pytest
from onnx import TensorProto, helper

from qonnx_ingest.cli.command import default_output, make_parser, run
from qonnx_ingest.errors import ConversionError, InputError


def tiny_model(args):
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    return helper.make_model(graph)


def raiser(exc):
    def convert(args):
        raise exc

    return convert


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "model.h5"
    path.write_bytes(b"input bytes")
    return path


def call(convert, argv):
    return run(make_parser("tool", "test tool", "the model"), convert, argv)


def test_success_writes_default_output_beside_input(source, capsys):
    assert call(tiny_model, [str(source)]) == 0
    assert source.with_suffix(".onnx").exists()
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize(
    "exc, code",
    [
        (ConversionError("unsupported quantizer quantized_po2", "dense_1"), 1),
        (InputError("not an HDF5 file", "model.h5"), 2),
        (RuntimeError("boom\nsecond line"), 1),
    ],
)
def test_failures_give_one_line_an_exit_code_and_no_output(source, capsys, exc, code):
    assert call(raiser(exc), [str(source)]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tool: error:")
    assert "Traceback" not in err
    assert not source.with_suffix(".onnx").exists()
    assert source.read_bytes() == b"input bytes"


def test_conversion_error_message_names_the_layer(source, capsys):
    call(raiser(ConversionError("unsupported quantizer quantized_po2", "dense_1")), [str(source)])
    assert "dense_1: unsupported quantizer quantized_po2" in capsys.readouterr().err


def test_verbose_shows_the_traceback(source, capsys):
    call(raiser(RuntimeError("boom")), [str(source), "--verbose"])
    assert "Traceback" in capsys.readouterr().err


def test_missing_input_is_exit_2(tmp_path, capsys):
    assert call(tiny_model, [str(tmp_path / "nope.h5")]) == 2
    assert "nope.h5" in capsys.readouterr().err


def test_output_equal_to_input_is_refused_before_converting(source):
    called = []

    def convert(args):
        called.append(1)
        return tiny_model(args)

    assert call(convert, [str(source), "-o", str(source)]) == 2
    assert not called
    assert source.read_bytes() == b"input bytes"


def test_output_in_missing_directory_is_exit_2(source, tmp_path):
    assert call(tiny_model, [str(source), "-o", str(tmp_path / "no" / "x.onnx")]) == 2


def test_version_and_help_exit_cleanly(capsys):
    for flag in ("--version", "--help"):
        with pytest.raises(SystemExit) as info:
            call(tiny_model, [flag])
        assert info.value.code == 0


def test_usage_error_is_exit_2():
    with pytest.raises(SystemExit) as info:
        call(tiny_model, ["--opset", "thirteen", "m.h5"])
    assert info.value.code == 2


@pytest.mark.parametrize(
    "given, expected",
    [
        ("a/model.h5", "a/model.onnx"),
        ("m.tflite", "m.onnx"),
        ("saved/", "saved.onnx"),
        ("dir/saved_model", "dir/saved_model.onnx"),
    ],
)
def test_default_output_names(given, expected):
    assert str(default_output(given)) == expected


def test_summary_counts_quantizers(source, capsys):
    from qonnx_ingest.quant import make_quant

    def convert(args):
        q = make_quant("x", "y", 0.5)
        graph = helper.make_graph(
            [],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        )
        q.add_to(graph)
        return helper.make_model(graph)

    assert call(convert, [str(source)]) == 0
    assert "1 quantizers" in capsys.readouterr().out
