"""tflite2qonnx: quantized (and float) TFLite models to QONNX, without TensorFlow.

``convert`` and ``convert_and_verify`` are loaded on first use so that the CLI's ``--help``
imports nothing heavy.
"""

from typing import TYPE_CHECKING

from qonnx_ingest import public
from qonnx_ingest.public import *  # noqa: F403  (the errors and the version)

if TYPE_CHECKING:
    from tflite2qonnx.api import convert
    from tflite2qonnx.verified import convert_and_verify

__all__ = [*public.__all__, "convert", "convert_and_verify"]
__getattr__ = public.lazy_attributes(
    "tflite2qonnx",
    {"convert": "tflite2qonnx.api", "convert_and_verify": "tflite2qonnx.verified"},
)
