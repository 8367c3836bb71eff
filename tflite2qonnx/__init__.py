"""tflite2qonnx: quantized (and float) TFLite models to QONNX, without TensorFlow."""

from tflite2qonnx.api import convert

__all__ = ["convert"]
