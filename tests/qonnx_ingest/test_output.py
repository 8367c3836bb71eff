"""The output stage both converters end in: the options decided once, the passes they add,
and verify-then-save (what is verified is what is saved; nothing saved on a disagreement)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from quant_models import DENSE_W, dense_model, run_ort

from qonnx_ingest.errors import InputError, VerificationError
from qonnx_ingest.output import OutputOptions, finish_output, output_passes
from qonnx_ingest.verification import Agreement, Verification

# integers inside int8, so the input Quant (scale 1) passes them unchanged
X = np.array([[3.0, -2.0, 1.0, 4.0]], np.float32)


def numpy_reference(weights: np.ndarray, seen: list[onnx.ModelProto]):
    """A source stand-in: ``X @ weights`` worked out by numpy against the model's output (run
    by onnxruntime: the QCDQ form); it records the model it was given."""

    def reference(model: onnx.ModelProto) -> Verification:
        seen.append(model)
        (got,) = run_ort(model, {"x": X}).values()
        error = float(np.max(np.abs(got - X @ weights)))
        agreement = Agreement("y", error, passed=error == 0.0)
        return Verification([agreement], inputs=1, runner="numpy")

    return reference


def test_channels_last_alone_fixes_the_batch_at_1_and_a_given_batch_wins():
    assert OutputOptions().batch is None
    assert OutputOptions(channels_last=True).batch == 1
    assert OutputOptions(channels_last=True, batch_size=4).batch == 4
    assert OutputOptions(batch_size=2).batch == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"format": "onnx"}, "format must be one of qonnx, qcdq, finn, hls4ml"),
        ({"batch_size": 0}, "batch_size must be a positive integer, got 0"),
        ({"batch_size": True}, "batch_size must be a positive integer, got True"),
    ],
)
def test_bad_options_are_refused_when_the_record_is_made(options, message):
    with pytest.raises(InputError, match=message):
        OutputOptions(**options)


def test_default_options_add_no_pass_and_each_asked_step_adds_one():
    assert output_passes(OutputOptions()) == []
    assert output_passes(OutputOptions(channels_last=True)) == []  # the converter fixed it
    assert len(output_passes(OutputOptions(batch_size=2))) == 1
    assert len(output_passes(OutputOptions(batch_size=2, format="qcdq"))) == 2


def test_the_lowered_form_is_verified_and_saved(tmp_path):
    seen: list[onnx.ModelProto] = []
    path = tmp_path / "dense.onnx"
    options = OutputOptions(format="qcdq", verify=True, output_path=path)
    model, figures = finish_output(dense_model(), options, numpy_reference(DENSE_W, seen))
    assert figures.passed
    assert [n.op_type for n in seen[0].graph.node if n.op_type == "Quant"] == []
    assert "DequantizeLinear" in {n.op_type for n in seen[0].graph.node}
    assert onnx.load(path) == model == seen[0]


def test_a_disagreement_raises_and_saves_nothing(tmp_path):
    path = tmp_path / "dense.onnx"
    options = OutputOptions(format="qcdq", verify=True, output_path=path)
    with pytest.raises(VerificationError):
        finish_output(dense_model(), options, numpy_reference(2 * DENSE_W, []))
    assert list(tmp_path.iterdir()) == []


def test_verify_without_a_reference_is_refused_before_saving(tmp_path):
    options = OutputOptions(verify=True, output_path=tmp_path / "m.onnx")
    with pytest.raises(InputError, match="verify needs the source model"):
        finish_output(dense_model(), options)
    assert list(tmp_path.iterdir()) == []


def test_an_output_over_an_input_is_refused_before_the_conversion(tmp_path):
    source = tmp_path / "model.tflite"
    source.write_bytes(b"source")
    options = OutputOptions(output_path=source, inputs=(str(source),))
    with pytest.raises(InputError):
        options.check_output()
    assert source.read_bytes() == b"source"
