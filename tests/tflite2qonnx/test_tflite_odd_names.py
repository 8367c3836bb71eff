"""Any tensor name TFLite allows works end to end: empty (TFLite Micro's keyword model names
its input ''; --verify crashed on it), repeated, non-ASCII, 300 characters. The converted
graph names an empty-named tensor ``tensor_<index>`` and a repeat ``<name>:<index>``;
--verify-inputs takes arrays under those names or by position (arr_0, arr_1, ...)."""

from __future__ import annotations

import json
import re

import numpy as np
import onnx
import pytest
from odd_name_models import FRESH_NAMES, LONG, fresh_names_model, odd_names_model

from support import CORPUS, requires_corpus, snapshot
from tflite2qonnx import convert
from tflite2qonnx.cli import main
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.reference import verify

KEYWORD = CORPUS / "tflite" / "tflm__keyword_scrambled.tflite"
OUTPUTS = ["dup", "ausgabe_ü∂_出力", LONG]


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    path = tmp_path_factory.mktemp("odd") / "odd names.tflite"
    path.write_bytes(odd_names_model())
    return path


def test_converted_graph_names_empty_and_repeated_tensors_uniquely(odd) -> None:
    model = convert(odd)
    onnx.checker.check_model(model)
    assert [i.name for i in model.graph.input] == ["unnamed_0", "unnamed_1"]
    assert [o.name for o in model.graph.output] == OUTPUTS
    values = [o for n in model.graph.node for o in n.output]
    assert len(values) == len(set(values))
    assert any(v.startswith("dup:3") for v in values)  # the second "dup" (MUL, tensor 3)
    io = json.loads({p.key: p.value for p in model.metadata_props}["tflite2qonnx.io_quantization"])
    assert io["unnamed_1"] == {"dtype": "int8", "scale": [pytest.approx(0.04)], "zero_point": [-7]}


def test_cli_verify_report_and_encodings_on_odd_names(odd, tmp_path, capsys) -> None:
    out, enc = tmp_path / "odd.onnx", tmp_path / "enc.json"
    assert main([str(odd), "-o", str(out), "--verify", "--report", "--encodings", str(enc)]) == 0
    text = capsys.readouterr().out
    assert "verify: ok, all 3 outputs\n" in text, text
    verdicts = [line for line in text.splitlines() if re.match(r"  \S.*: (ok|FAILED), ", line)]
    assert len(verdicts) == 3 and all(": ok, " in v for v in verdicts), text
    assert verdicts[1].lstrip().startswith("ausgabe_ü∂_出力: ok, ")
    assert "unnamed_0 " in text and "unnamed_1 " in text  # the report's input rows
    names = {e["name"] for e in json.loads(enc.read_text(encoding="utf-8"))["encodings"]}
    model = onnx.load(out)
    graph_values = {i.name for i in model.graph.input} | {
        o for n in model.graph.node for o in n.output
    }
    assert {"unnamed_0", "unnamed_1"} <= names <= graph_values


@pytest.mark.parametrize("keys", ["converted", "positional"])
def test_verify_inputs_keyed_by_converted_name_or_position(odd, tmp_path, capsys, keys) -> None:
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-128, 128, (5, 1, 6)).astype(np.int8) for _ in range(2))
    npz = tmp_path / f"{keys}.npz"
    if keys == "converted":
        np.savez(npz, unnamed_0=a, unnamed_1=b)
    else:
        np.savez(npz, a, b)
    argv = [str(odd), "-o", str(tmp_path / "o.onnx"), "--verify-inputs", str(npz)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "verify: ok, all 3 outputs" in text and "  on 5 inputs; " in text, text


def test_verify_inputs_under_other_names_is_a_one_line_error_naming_the_keys(
    odd, tmp_path, capsys
) -> None:
    npz = tmp_path / "bad.npz"
    np.savez(npz, x=np.zeros((2, 1, 6), np.int8))
    before = snapshot(tmp_path)
    assert main([str(odd), "-o", str(tmp_path / "o.onnx"), "--verify-inputs", str(npz)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "expected arrays named unnamed_0, unnamed_1" in err, err
    assert snapshot(tmp_path) == before  # no output file


@requires_corpus
def test_keyword_model_with_an_empty_named_input_verifies(tmp_path, capsys) -> None:
    """Was: internal error: Required inputs (['tensor_52']) are missing from input feed ([''])."""
    assert main([str(KEYWORD), "-o", str(tmp_path / "kw.onnx"), "--verify"]) == 0
    captured = capsys.readouterr()
    # one output (int32 unnamed_53): its verdict leads, unnamed
    assert "\nverify: ok, 100.00% of output values equal to TFLite's builtin" in captured.out
    warnings = [line for line in captured.err.splitlines() if "stateful" in line]
    assert len(warnings) == 1 and "unnamed_4, unnamed_12, unnamed_20 and 4 more" in warnings[0]


def test_tensors_named_like_generated_names_convert_and_equal_the_interpreter(
    tmp_path, monkeypatch
) -> None:
    """Graph outputs are bound to their TFLite names last; names the builder generates before
    (a Quant output, its scale, an op's float result) must not take them: it made a cycle
    ("the graph has a cycle") or could wire a value to the wrong name."""
    plain, clash = tmp_path / "plain.tflite", tmp_path / "clash.tflite"
    plain.write_bytes(fresh_names_model(("x", "t1", "t2", "t3", "t4")))
    clash.write_bytes(fresh_names_model())
    generated: list[str] = []
    fresh = GraphBuilder.fresh
    monkeypatch.setattr(
        GraphBuilder, "fresh", lambda b, h: generated.append(fresh(b, h)) or generated[-1]
    )
    convert(plain)
    monkeypatch.undo()
    assert set(FRESH_NAMES[1:]) <= set(generated)  # the clash model does reuse them
    model = convert(clash)
    onnx.checker.check_model(model)
    values = [o for n in model.graph.node for o in n.output]
    assert len(values) == len(set(values))
    assert [o.name for o in model.graph.output] == list(FRESH_NAMES[1:])
    result = verify(clash, model, inputs=16)
    assert result.passed and all(a.max_abs_error == 0 for a in result.outputs), result.as_text()
