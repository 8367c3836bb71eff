"""A small int8 model whose tensors carry every name TFLite allows and ONNX tools trip on:
the empty string (two inputs), a name repeated, non-ASCII, 300 characters."""

from __future__ import annotations

from tflite_writer import build_model

LONG = "very/" * 59 + "long"  # 299 characters
ODD_NAMES = ("", "", "dup", "dup", "ausgabe_ü∂_出力", LONG)


def odd_names_model() -> bytes:
    """Inputs 0 and 1 (both named ''), ADD -> 'dup', MUL(dup, input 0) -> 'dup' again,
    RELU -> non-ASCII, TANH -> a 299-character name; outputs: tensors 2, 4 and 5."""
    grids = [(0.05, 3), (0.04, -7), (0.08, 1), (0.1, -5), (0.1, -5), (1 / 128, 0)]
    tensors = [
        {"name": name, "shape": (1, 6), "dtype": "int8", "quant": ([scale], [zp])}
        for name, (scale, zp) in zip(ODD_NAMES, grids, strict=True)
    ]
    ops = [
        {"op": "ADD", "inputs": [0, 1], "outputs": [2],
         "options": ("AddOptions", {"FusedActivationFunction": 0})},
        {"op": "MUL", "inputs": [2, 0], "outputs": [3],
         "options": ("MulOptions", {"FusedActivationFunction": 0})},
        {"op": "RELU", "inputs": [3], "outputs": [4]},
        {"op": "TANH", "inputs": [4], "outputs": [5]},
    ]  # fmt: skip
    return build_model(tensors, ops, [0, 1], [2, 4, 5])


# the names GraphBuilder.fresh gives, converting this model, to the input's Quant output and
# its scale, to ADD's float result and to MAXIMUM's float result
FRESH_NAMES = ("x", "x_quantized", "Add", "x_quantized_scale", "Max")


def fresh_names_model(names=FRESH_NAMES) -> bytes:
    """int8 x -> ADD(x, x) -> MUL(., x) -> MAXIMUM(., ADD's) -> TANH, every result an output,
    the tensors named ``names``: by default the converter's own generated names."""
    grids = [(0.05, 3), (0.1, -2), (0.08, 1), (0.1, -5), (1 / 128, 0)]
    tensors = [
        {"name": name, "shape": (1, 6), "dtype": "int8", "quant": ([scale], [zp])}
        for name, (scale, zp) in zip(names, grids, strict=True)
    ]
    ops = [
        {"op": "ADD", "inputs": [0, 0], "outputs": [1],
         "options": ("AddOptions", {"FusedActivationFunction": 0})},
        {"op": "MUL", "inputs": [1, 0], "outputs": [2],
         "options": ("MulOptions", {"FusedActivationFunction": 0})},
        {"op": "MAXIMUM", "inputs": [2, 1], "outputs": [3]},
        {"op": "TANH", "inputs": [3], "outputs": [4]},
    ]  # fmt: skip
    return build_model(tensors, ops, [0], [1, 2, 3, 4])
