"""Shared core of qonnx-ingest: QONNX node builders, model finishing, saving and CLI plumbing.

Both converters import from here; neither imports the other. Nothing here imports TensorFlow.
"""

from qonnx_ingest.errors import (
    ConversionError,
    ConversionWarning,
    InputError,
    ReferenceUnavailable,
    VerificationError,
)

__version__ = "0.1.0"
# ONNX opset of the default domain in converted models; kept here so --help needs no onnx import.
DEFAULT_OPSET = 13

__all__ = [
    "DEFAULT_OPSET",
    "ConversionError",
    "ConversionWarning",
    "InputError",
    "ReferenceUnavailable",
    "VerificationError",
    "__version__",
]
