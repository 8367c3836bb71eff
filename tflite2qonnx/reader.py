"""Read a ``.tflite`` file: ``read_model`` and the data model it returns, in one import.

The reading itself is ``tflite2qonnx.flatbuffer``, the data model ``tflite2qonnx.model``
(converters import that one); this facade keeps the names tests and scripts use.
"""

from tflite2qonnx.flatbuffer import read_model
from tflite2qonnx.model import (
    DimensionMetadata,
    MissingOperandError,
    MissingOptionError,
    OpCode,
    Operator,
    Quantization,
    SignatureDef,
    Sparsity,
    Subgraph,
    Tensor,
    TFLiteModel,
)

__all__ = [
    "DimensionMetadata",
    "MissingOperandError",
    "MissingOptionError",
    "OpCode",
    "Operator",
    "Quantization",
    "SignatureDef",
    "Sparsity",
    "Subgraph",
    "TFLiteModel",
    "Tensor",
    "read_model",
]
