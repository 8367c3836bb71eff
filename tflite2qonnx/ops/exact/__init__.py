"""The integer back end: TFLite's int8 / uint8 / int16 kernels as exact ONNX arithmetic.

Used under --bit-exact and, for the int16 kernels whose single rounding is far off, by default.
Imports nothing from the float converters (only ``ops.common``, ``ops.padding`` and the fused
activation helper ``ops.activation``); ``tests/test_import_graph.py`` pins it.
"""
