"""The tflite flatbuffer bindings' internals: a generated table's raw field access."""

from __future__ import annotations

from typing import Any

from qonnx_ingest.compat import Pin, require

PIN = Pin("tflite", "tflite", "2.18.0", user="tflite2qonnx")


def int32_field(table: Any, vtable_offset: int) -> int:
    """The int32 field at ``vtable_offset`` of a generated flatbuffer object as stored (its
    private ``_tab``), 0 when absent, bypassing the accessor's own interpretation."""
    require(PIN, "flatbuffer table _tab")
    import flatbuffers

    tab = table._tab
    o = tab.Offset(vtable_offset)
    return int(tab.Get(flatbuffers.number_types.Int32Flags, o + tab.Pos)) if o else 0
