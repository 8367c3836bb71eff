"""Hybrid (dynamic-range) kernels: float activations, int8 weights quantized per call."""
