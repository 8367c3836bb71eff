"""Sub-byte tensor types (INT4, UINT4, INT2) unpacked as LiteRT packs them: lowest bits
first, two-complement for the signed ones. Expected values derived by hand from the bytes;
the int2 / int4 recipes of ai-edge-quantizer pin the order against the interpreter
(test_ai_edge_quantizer)."""

from __future__ import annotations

import numpy as np

from tflite2qonnx.dtypes import INTEGER_TYPES, unpack_sub_byte
from tflite2qonnx.schema import TENSOR_TYPE_NAMES


def test_int4_low_nibble_first_sign_extended() -> None:
    # 0x7F: low 0xF = -1, high 0x7 = 7; 0x08: low 0x8 = -8, high 0x0 = 0
    raw = np.array([0x7F, 0x08], np.uint8)
    np.testing.assert_array_equal(unpack_sub_byte(raw, 4, True), [-1, 7, -8, 0])


def test_uint4_low_nibble_first_unsigned() -> None:
    raw = np.array([0x7F, 0x08], np.uint8)
    np.testing.assert_array_equal(unpack_sub_byte(raw, 4, False), [15, 7, 8, 0])


def test_int2_four_per_byte_lowest_bits_first() -> None:
    # 0b11_10_01_00 = 0xE4: crumbs from the low end 00, 01, 10, 11 = 0, 1, -2, -1
    raw = np.array([0xE4, 0x1B], np.uint8)  # 0x1B = 0b00_01_10_11: -1, -2, 1, 0
    np.testing.assert_array_equal(unpack_sub_byte(raw, 2, True), [0, 1, -2, -1, -1, -2, 1, 0])


def test_litert_type_codes_are_named_beyond_the_bindings() -> None:
    assert TENSOR_TYPE_NAMES[19] == "INT2" and TENSOR_TYPE_NAMES[20] == "UINT4"
    assert INTEGER_TYPES["int2"] == (2, True) and INTEGER_TYPES["uint4"] == (4, False)
