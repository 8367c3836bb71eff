"""tflite2qonnx: quantized (and float) TFLite models to QONNX, without TensorFlow.

``convert`` is loaded on first use so that the CLI's ``--help`` imports nothing heavy.
"""

from typing import TYPE_CHECKING

from qonnx_ingest import __version__
from qonnx_ingest.errors import ConversionError, ConversionWarning, InputError, VerificationError

if TYPE_CHECKING:
    from tflite2qonnx.api import convert

__all__ = [
    "ConversionError",
    "ConversionWarning",
    "InputError",
    "VerificationError",
    "__version__",
    "convert",
]


def __getattr__(name: str):
    if name == "convert":
        from tflite2qonnx.api import convert

        return convert
    raise AttributeError(f"module 'tflite2qonnx' has no attribute {name!r}")
