"""Layers: convolutions, fully connected, pooling, resize, softmax, QUANTIZE / DEQUANTIZE."""
