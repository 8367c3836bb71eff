"""tflite2qonnx: quantized (and float) TFLite models to QONNX, without TensorFlow.

``convert`` and ``convert_and_verify`` are loaded on first use so that the CLI's ``--help``
imports nothing heavy.
"""

from typing import TYPE_CHECKING

from qonnx_ingest import __version__
from qonnx_ingest.errors import (
    ConversionError,
    ConversionWarning,
    InputError,
    ReferenceUnavailable,
    VerificationError,
)

if TYPE_CHECKING:
    from tflite2qonnx.api import convert
    from tflite2qonnx.verified import convert_and_verify

__all__ = [
    "ConversionError",
    "ConversionWarning",
    "InputError",
    "ReferenceUnavailable",
    "VerificationError",
    "__version__",
    "convert",
    "convert_and_verify",
]


def __getattr__(name: str):
    if name == "convert":
        from tflite2qonnx.api import convert

        return convert
    if name == "convert_and_verify":
        from tflite2qonnx.verified import convert_and_verify

        return convert_and_verify
    raise AttributeError(f"module 'tflite2qonnx' has no attribute {name!r}")
