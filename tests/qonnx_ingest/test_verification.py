"""--verify's shared side: measuring agreement, reading user inputs, choosing a runner, and
the CLI's exit code 3. Expected figures are derived by hand from the arrays in each test."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from quant_models import activation_model, dense_model

from qonnx_ingest.cli.command import make_parser, run
from qonnx_ingest.errors import ConversionError, InputError
from qonnx_ingest.execute import execute_qonnx
from qonnx_ingest.verification import (
    Agreement,
    Verification,
    VerificationError,
    check_count,
    input_dtype,
    input_range,
    load_inputs,
    measure,
    output_grids,
    run_converted,
    seeded_values,
    steps_apart,
    within_relative,
)

# ----------------------------------------------------------------------------- measure


def test_measure_on_a_grid():
    reference = [np.array([0.1, 0.2, 0.3]), np.array([0.4, 0.5, 0.6])]
    ours = [np.array([0.1, 0.2, 0.4]), np.array([0.4, 0.5, 0.6])]
    a = measure("y", reference, ours, grid=(0.1, 0))
    # codes round(v / 0.1): [1,2,3],[4,5,6] vs [1,2,4],[4,5,6] -> one of six is one step off
    assert a.max_abs_error == pytest.approx(0.1)
    assert a.equal_fraction == pytest.approx(5 / 6)
    assert a.max_steps == 1
    assert a.argmax_agreement is None  # [input, values]: no class axis


def test_measure_argmax_over_input_batch_classes():
    reference = [np.array([[0.1, 0.9]]), np.array([[0.8, 0.2]])]  # classes 1, 0
    ours = [np.array([[0.2, 0.7]]), np.array([[0.3, 0.6]])]  # classes 1, 1
    a = measure("probs", reference, ours)
    assert a.argmax_agreement == 0.5
    assert a.max_abs_error == pytest.approx(0.5)  # |0.8 - 0.3|
    assert a.equal_fraction is None and a.max_steps is None


def test_measure_refuses_different_shapes():
    with pytest.raises(ConversionError, match=r"^y: shapes differ: source \(3,\), converted"):
        measure("y", [np.zeros(3)], [np.zeros(2)])


def test_steps_apart_ignores_the_zero_point_of_on_grid_values():
    # grid (0.5, 3): reals are 0.5 * (q - 3), so v / 0.5 is q - 3 whatever the zero point
    a = np.array([1.0, -0.5, 2.0, 0.74])
    b = np.array([1.5, -0.5, 0.0, 0.76])
    # codes: [2, -1, 4, round(1.48)=1] vs [3, -1, 0, round(1.52)=2]
    np.testing.assert_array_equal(steps_apart(a, b, (0.5, 3)), [1, 0, 4, 1])


def test_within_relative():
    agreement = Agreement("y", max_abs_error=2e-6)
    assert within_relative(agreement, [np.array([4.0, -1.0])], 1e-6)  # 2e-6 <= 1e-6 * 4
    assert not within_relative(agreement, [np.array([0.5])], 1e-6)  # 2e-6 > 1e-6 * max(1, .5)
    assert within_relative(Agreement("y", 0.0), [np.zeros(0)], 1e-6)


def test_count_must_be_positive():
    check_count(1)
    with pytest.raises(InputError, match="--verify-count must be at least 1, got 0") as info:
        check_count(0)
    assert info.value.exit_code == 2


# ----------------------------------------------------------------------------- load_inputs


def test_inputs_by_name_in_the_models_order(tmp_path):
    a, b = np.arange(12.0).reshape(3, 4), -np.arange(6.0).reshape(3, 2)
    np.savez(tmp_path / "in.npz", b=b, a=a, unused=np.zeros(1))
    feeds = load_inputs(tmp_path / "in.npz", ["a", "b"])
    assert len(feeds) == 3
    for i, feed in enumerate(feeds):
        assert list(feed) == ["a", "b"]
        np.testing.assert_array_equal(feed["a"], a[i])
        np.testing.assert_array_equal(feed["b"], b[i])


def test_inputs_by_position(tmp_path):
    a, b = np.ones((2, 4)), np.zeros((2, 1))
    np.savez(tmp_path / "in.npz", a, b)  # arr_0, arr_1
    feeds = load_inputs(tmp_path / "in.npz", ["first", "second"])
    assert len(feeds) == 2
    np.testing.assert_array_equal(feeds[1]["first"], a[1])
    np.testing.assert_array_equal(feeds[1]["second"], b[1])


def write_npy(path):
    with open(path, "wb") as f:  # np.save(path) would add ".npy" to the name
        np.save(f, np.zeros((2, 4)))


def write_text(path):
    path.write_text("not numpy\n")


def write_broken_zip(path):
    path.write_bytes(b"PK\x03\x04" + b"\x00" * 20)


@pytest.mark.parametrize(
    "write, message",
    [
        (lambda p: np.savez(p, y=np.ones((2, 4))), r"expected arrays named x \(or arr_0\.\.\)"),
        (lambda p: np.savez(p, np.ones((2, 4)), np.ones((2, 4))), r"expected arrays named x"),
        (lambda p: np.savez(p, x=np.float32(1.0)), r"every input array needs the same number"),
        (write_npy, r"cannot read inputs: not an \.npz archive"),
        (write_text, r"cannot read inputs: Cannot load file containing pickled data"),
        (write_broken_zip, r"cannot read inputs: "),
        (lambda p: None, r"cannot read inputs: .*No such file"),
    ],
    ids=["wrong_name", "too_many_arrays", "no_samples", "npy", "text", "broken_zip", "missing"],
)
def test_unusable_inputs_are_input_errors(tmp_path, write, message):
    path = tmp_path / "in.npz"
    write(path)
    with pytest.raises(InputError, match=message) as info:
        load_inputs(path, ["x"])
    assert info.value.exit_code == 2 and info.value.where == str(path)


def test_unequal_sample_counts(tmp_path):
    np.savez(tmp_path / "in.npz", a=np.ones((2, 1)), b=np.ones((3, 1)))
    with pytest.raises(InputError, match="same number of samples"):
        load_inputs(tmp_path / "in.npz", ["a", "b"])


# ----------------------------------------------------------------------------- model facts


def test_input_range_is_the_input_quantizers_range_one_step_beyond():
    # int8, scale 1 (dense_model): codes [-128, 127] -> reals [-129, 128] one step beyond
    assert input_range(dense_model(), "x") == (-129.0, 128.0)
    # uint8, scale 0.5, zero point 100: 0.5 * ([0, 255] - 100) widened by a step
    model = activation_model(relu=False, scale=0.5, zero_point=100, signed=False)
    assert input_range(model, "x") == (0.5 * (0 - 100 - 1), 0.5 * (255 - 100 + 1))
    assert input_range(activation_model(), "x") == (-1.0, 1.0)  # Relu first: no input quantizer


@pytest.mark.parametrize("shape", [(2,), (16, 3)])
def test_seeded_bool_inputs_hold_both_values(shape):
    """Random bits of two elements are all equal one time in two: one is flipped then."""
    for seed in range(8):
        mask = seeded_values(np.random.default_rng(seed), np.bool_, shape)
        assert mask.dtype == np.bool_ and mask.shape == shape
        assert mask.any() and not mask.all()


def test_seeded_integer_inputs_stay_in_the_range_and_the_type():
    rng = np.random.default_rng(0)
    ids = seeded_values(rng, np.int32, (4000,), integer_range=(0, 9))
    assert ids.dtype == np.int32 and set(ids.tolist()) == set(range(10))
    small = seeded_values(rng, np.int8, (4000,), integer_range=(-1000, 1000))
    assert small.min() == -128 and small.max() == 127
    default = seeded_values(rng, np.uint8, (4000,))
    assert set(default.tolist()) == set(range(9))  # 0..8: no negative index


def test_seeded_float_inputs_and_the_same_draws_for_the_same_seed():
    a = seeded_values(np.random.default_rng(3), np.float32, (100,), (2.0, 3.0))
    b = seeded_values(np.random.default_rng(3), np.float32, (100,), (2.0, 3.0))
    assert a.dtype == np.float32 and np.array_equal(a, b)
    assert a.min() >= 2.0 and a.max() < 3.0


def test_seeded_inputs_of_a_type_without_a_rule_ask_for_verify_inputs():
    with pytest.raises(InputError, match="--verify-inputs"):
        seeded_values(np.random.default_rng(0), np.str_, (2,))


def test_input_dtype_reads_the_graph_input():
    x = helper.make_tensor_value_info("m", TensorProto.BOOL, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.BOOL, [1, 4])
    graph = helper.make_graph([helper.make_node("Identity", ["m"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph)
    assert input_dtype(model, "m") == np.bool_
    assert input_dtype(model, "absent") == np.float32


def test_output_grids():
    assert output_grids(activation_model(scale=0.25, zero_point=3)) == {"y": (0.25, 3)}
    assert output_grids(activation_model(bipolar=True)) == {}
    assert output_grids(dense_model()) == {}  # MatMul output: no quantizer


# ----------------------------------------------------------------------------- runners


def float_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "f",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


STANDARD_OPS = "onnxruntime, Quant as standard ops"


@pytest.mark.parametrize(
    "model, runner",
    [
        (lambda: activation_model(), "onnxruntime after QCDQ lowering"),  # ROUND, zp 0: exact
        # QuantizeLinear would round these ties or zero points differently: standard ops
        (lambda: activation_model(rounding_mode="HALF_UP"), STANDARD_OPS),
        (lambda: activation_model(zero_point=2), STANDARD_OPS),
        # int16 QuantizeLinear (opset 21): exact with ROUND and no zero point
        (lambda: activation_model(bits=16), "onnxruntime after QCDQ lowering"),
        # no QuantizeLinear holds it: the QCDQ form writes it as standard ops
        (lambda: activation_model(bits=24), "onnxruntime after QCDQ lowering"),
        (lambda: activation_model(bipolar=True), "qonnx's executor"),  # no onnxruntime form
        (float_model, "onnxruntime"),
    ],
    ids=["round", "half_up", "zero_point", "16_bit", "24_bit", "bipolar", "float"],
)
def test_runner_choice_and_results(model, runner):
    model = model()
    feeds = [{"x": np.linspace(-3, 3, 8, dtype=np.float32)[None] * k} for k in (1, 7)]
    outputs, used = run_converted(model, feeds)
    assert used == runner
    for feed, out in zip(feeds, outputs, strict=True):
        np.testing.assert_array_equal(out["y"], execute_qonnx(model, feed)["y"])


def qdq_model_default_sessions_refuse() -> onnx.ModelProto:
    """Q/DQ int8 at opset 21, the DequantizeLinear read by two Unsqueezes: onnxruntime 1.31's
    QDQ propagation (default session options) inserts a QuantizeLinear there that its own type
    check refuses; with graph optimizations off the model loads and runs."""
    scale = helper.make_tensor("s", TensorProto.FLOAT, [], [0.25])
    zero = helper.make_tensor("z", TensorProto.INT8, [], [0])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    graph = helper.make_graph(
        [
            helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
            helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
            helper.make_node("Unsqueeze", ["d", "axes"], ["u0"]),
            helper.make_node("Unsqueeze", ["d", "axes"], ["u1"]),
            helper.make_node("Concat", ["u0", "u1"], ["y"], axis=1),
        ],
        "refused",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8])],
        [scale, zero, axes],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    return model


def test_a_model_of_standard_ops_runs_as_users_run_it_in_a_default_session():
    # the file as written is what users load: a default session refusing it is an error
    # (with optimizations off, as --verify ran it before, it loaded and "passed")
    import onnxruntime as ort

    model = qdq_model_default_sessions_refuse()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    with pytest.raises(ConversionError, match="a default onnxruntime session cannot load"):
        run_converted(model, [{"x": np.zeros((1, 8), np.float32)}], as_written=True)


# ----------------------------------------------------------------------------- the error


def verification(passed: bool) -> Verification:
    a = Agreement("y", 0.25, equal_fraction=0.5, max_steps=1, passed=passed, tolerance="t")
    return Verification([a, Agreement("z", 0.0, tolerance="t")], inputs=2, runner="r")


def test_verification_error_names_the_failed_output():
    error = VerificationError(verification(False))
    assert isinstance(error, ConversionError) and error.exit_code == 3
    assert str(error) == "--verify: verification failed on output y"
    text = verification(False).as_text().splitlines()
    assert text == [
        "verify: FAILED, 1 of 2 outputs: y",
        "  y: FAILED, max abs error 0.25 from the source model, 50.00% equal on the output "
        "grid, max 1 step apart (needs: t)",
        "  z: ok, max abs error 0 from the source model",
        "  on 2 inputs; converted model run by r",
    ]
    d = verification(False).as_dict()
    assert d["passed"] is False and d["inputs"] == 2 and d["outputs"][0]["name"] == "y"


def quantized_output(passed: bool, equal: float, steps: int) -> Verification:
    """One int8 output held to TFLite's own spread (XNNPACK 99.25% equal, 11 steps)."""
    a = Agreement("out", 0.0586, equal_fraction=equal, max_steps=steps, argmax_agreement=1.0,
                  passed=passed, tolerance="rule", reference="TFLite's builtin kernels",
                  baseline={"equal_fraction": 0.9925, "max_steps": 11},
                  baseline_name="TFLite's own CPU paths (XNNPACK, builtin)")  # fmt: skip
    return Verification([a], inputs=16, runner="onnxruntime")


def test_one_output_leads_with_the_verdict_then_the_figures_and_the_sources_own_spread():
    """Was: "max 15 steps apart, ..., XNNPACK 99.25% / 11 steps -> ok (quantized: equal
    fraction within 0.1 pt and max steps within 1.5x of ...)", the verdict at the far end."""
    text = quantized_output(True, 0.9926, 15).as_text().splitlines()
    assert text == [
        "verify: ok, 99.26% of output values equal to TFLite's builtin kernels, max 15 steps "
        "apart, argmax agrees on 100.0%; TFLite's own CPU paths (XNNPACK, builtin) differ on "
        "0.75%, by up to 11 steps",
        "  on 16 inputs; converted model run by onnxruntime",
    ]
    failed = quantized_output(False, 0.5, 40).as_text().splitlines()[0]
    assert failed.startswith("verify: FAILED, 50.00% of output values equal to TFLite's")
    assert failed.endswith("by up to 11 steps (needs: rule)")


def test_the_json_form_has_every_figure_the_text_prints():
    import json

    (out,) = json.loads(json.dumps(quantized_output(True, 0.9926, 15).as_dict()))["outputs"]
    assert (out["equal_fraction"], out["max_steps"], out["argmax_agreement"]) == (0.9926, 15, 1)
    assert out["baseline"] == {"equal_fraction": 0.9925, "max_steps": 11}
    assert out["reference"] == "TFLite's builtin kernels" and out["tolerance"] == "rule"
    assert out["passed"] is True


# ----------------------------------------------------------------------------- the CLI side


def run_tool(tmp_path, verify, *options):
    source = tmp_path / "model.bin"
    source.write_bytes(b"stand-in source")
    parser = make_parser("tool", "test tool", "the model")
    argv = [str(source), "--verify", *map(str, options)]
    return run(parser, lambda args: activation_model(), argv, verify=verify)


def test_disagreement_exits_3_and_keeps_the_model_for_inspection(tmp_path, capsys):
    assert run_tool(tmp_path, lambda args, model: verification(False)) == 3
    out, err = capsys.readouterr()
    assert err == "tool: error: --verify: verification failed on output y\n"
    assert "verify: FAILED, 1 of 2 outputs: y\n" in out and "tool: wrote" in out
    assert onnx.load(tmp_path / "model.onnx").graph.node  # written for inspection


def test_agreement_exits_0(tmp_path, capsys):
    assert run_tool(tmp_path, lambda args, model: verification(True)) == 0
    out, err = capsys.readouterr()
    assert err == "" and "verify: ok, all 2 outputs\n  y: ok, max abs error 0.25" in out


def test_what_is_verified_is_what_is_written(tmp_path):
    seen = []

    def verify(args, model):
        seen.append({n.op_type for n in model.graph.node})
        return verification(True)

    assert run_tool(tmp_path, verify, "--format", "qcdq") == 0
    (written,) = seen
    assert "QuantizeLinear" in written and "Quant" not in written
    assert written == {n.op_type for n in onnx.load(tmp_path / "model.onnx").graph.node}


def test_unusable_verify_inputs_exit_2_and_write_nothing(tmp_path, capsys):
    def verify(args, model):
        raise InputError("cannot read inputs: bad", args.verify_inputs)

    assert run_tool(tmp_path, verify, "--verify-inputs", "in.npz") == 2
    assert capsys.readouterr().err == "tool: error: in.npz: cannot read inputs: bad\n"
    assert not (tmp_path / "model.onnx").exists()
