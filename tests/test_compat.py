"""Dependencies' private internals live in the ``compat`` packages only (``qkeras2qonnx``'s,
``tflite2qonnx``'s, ``qonnx_ingest``'s), each guarded by a version check naming the pin
constraints.txt holds."""

import ast
import re
from pathlib import Path

import pytest

import qonnx_ingest.compat as compat
from qkeras2qonnx.compat import hgq2, keras, qkeras, tf2onnx
from qonnx_ingest.compat import qonnx
from qonnx_ingest.errors import InputError
from support import ROOT
from tflite2qonnx.compat import tflite

PACKAGES = ("qkeras2qonnx", "qonnx_ingest", "tflite2qonnx", "layout")
DEPENDENCIES = {"tf2onnx", "tensorflow", "tf_keras", "keras", "qkeras", "hgq", "qonnx", "tflite"}
DEPENDENCIES |= {"flatbuffers", "onnxscript"}
# the private names of our dependencies we use (or used) somewhere
PRIVATE = {
    "_get_optimizers",
    "_nodes_by_depth",
    "_tensor_usage_count",
    "_run_through_graph",
    "_flatten_layers",
    "_get_function",
    "_is_graph_network",
    "_functional",
    "_saved_model_inputs_spec",
    "_build_shapes_dict",
    "_inbound_nodes",
    "_outbound_nodes",
    "_add_supported_quantized_objects",
    "_sigmoid",
    "_min_exp",
    "_max_exp",
    "_mask",
    "_input_shape",
    "_scale",
    "_shape",
    "_is_weight",
    "_enable_oq",
    "_rewrite_rule_set",
    "_tab",
}
# module paths that are a dependency's internals
PRIVATE_MODULES = ("tensorflow.python", "keras.src", "tf_keras.src")
PINS = [tf2onnx.PIN, keras.TENSORFLOW, keras.TF_KERAS, keras.KERAS3]
PINS += [qkeras.QKERAS09, qkeras.QKERAS3, hgq2.PIN, qonnx.PIN, tflite.PIN]
COMPAT_MODULES = {
    "qkeras2qonnx/compat/tf2onnx.py",
    "qkeras2qonnx/compat/keras.py",
    "qkeras2qonnx/compat/qkeras.py",
    "qkeras2qonnx/compat/hgq2.py",
    "qonnx_ingest/compat/qonnx.py",
    "tflite2qonnx/compat/tflite.py",
}


def _private_uses(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE and not _own(node.value):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "hasattr", "setattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in PRIVATE
        ):
            found.append(f"line {node.lineno}: {node.func.id}(..., {node.args[1].value!r})")
        elif isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.append(node.module)
                if node.module.split(".")[0] in DEPENDENCIES:
                    names = [a.name for a in node.names]
                    modules += [f"{node.module}.{n}" for n in names if _is_private(n)]
            for module in modules:
                parts = module.split(".")
                if parts[0] in DEPENDENCIES and (
                    module.startswith(PRIVATE_MODULES) or any(map(_is_private, parts))
                ):
                    found.append(f"line {node.lineno}: import {module}")
    return found


def _own(receiver: ast.expr) -> bool:
    """``self._shape`` in our own classes is ours, not a dependency's."""
    return isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _scan(allowed) -> dict[str, list[str]]:
    offenders = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if allowed(relative):
                continue
            uses = _private_uses(ast.parse(path.read_text()))
            if uses:
                offenders[str(relative)] = uses
    return offenders


def _in_compat(path: Path) -> bool:
    return path.parts[1:2] == ("compat",)


def test_private_internals_of_dependencies_are_used_only_in_compat_modules():
    assert _scan(_in_compat) == {}


def test_the_scan_finds_the_private_accesses_the_compat_modules_make():
    offenders = _scan(lambda path: not _in_compat(path))
    assert set(offenders) == COMPAT_MODULES
    assert any("tensorflow.python" in u for u in offenders["qkeras2qonnx/compat/keras.py"])


def test_every_pin_is_the_one_constraints_txt_holds():
    text = (ROOT / "constraints.txt").read_text()
    for pin in PINS:
        line = f"{pin.distribution}=={pin.version}"
        assert re.search(rf"^{re.escape(line)}$", text, re.M | re.I), line


def test_a_version_outside_the_pinned_series_is_refused_in_one_line_naming_the_pin(monkeypatch):
    monkeypatch.setattr(compat, "found_version", lambda pin: "1.18.0")
    with pytest.raises(InputError) as caught:
        tf2onnx.optimizers_without("optimize_transpose")
    message = str(caught.value)
    assert message == (
        "qkeras2qonnx needs tf2onnx 1.17.0's private _get_optimizers (pinned in "
        "constraints.txt); found 1.18.0"
    )
    assert caught.value.exit_code == 2


def test_a_patch_release_of_the_pinned_series_is_accepted(monkeypatch):
    monkeypatch.setattr(compat, "found_version", lambda pin: "2.19.4")
    compat.require(keras.TENSORFLOW, "tensorflow.python.ops")
    monkeypatch.setattr(compat, "found_version", lambda pin: "2.20.0")
    with pytest.raises(compat.IncompatibleDependency, match="tensorflow 2.19.1's private"):
        compat.require(keras.TENSORFLOW, "tensorflow.python.ops")


def test_the_installed_site_packages_versions_are_the_pinned_ones():
    for pin in (tf2onnx.PIN, keras.TENSORFLOW, keras.TF_KERAS, keras.KERAS3, qonnx.PIN, tflite.PIN):
        assert compat.found_version(pin) == pin.version, pin


def test_another_qonnx_takes_its_public_path_instead_of_the_private_rule_set(monkeypatch):
    from qonnx.transformation.qonnx_to_qcdq import QuantToQCDQ

    assert qonnx.rewrite_rule_set(QuantToQCDQ()) is not None  # the pinned qonnx: the fast path
    monkeypatch.setattr(compat, "found_version", lambda pin: "1.1.0")
    assert qonnx.rewrite_rule_set(QuantToQCDQ()) is None


def test_the_tflite_path_names_its_own_package_and_the_tflite_pin(monkeypatch):
    monkeypatch.setattr(compat, "found_version", lambda pin: "2.19.0")
    with pytest.raises(compat.IncompatibleDependency) as caught:
        tflite.int32_field(object(), 10)
    assert str(caught.value).startswith("tflite2qonnx needs tflite 2.18.0's private ")
