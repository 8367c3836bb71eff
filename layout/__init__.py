"""Source-layout (channels-last) ONNX graphs to channels-first, by layout propagation.

Converters build the graph as the source framework lays it out and call ``to_channels_first``;
``OP_CLASSES`` is the table that says how each op type takes part.
"""

from layout.channels_first import to_channels_first
from layout.classes import table_summary
from layout.op_table import OP_CLASSES, QONNX_CLASSES, Kind, OpClass
from layout.rewrite import LAYOUT_KEY, stored_perms

__all__ = [
    "LAYOUT_KEY",
    "OP_CLASSES",
    "QONNX_CLASSES",
    "Kind",
    "OpClass",
    "stored_perms",
    "table_summary",
    "to_channels_first",
]
