"""The graph boundary's records: each TFLite tensor's unique ONNX name (which --verify, the
reports and the metadata also key tensors by) and the quantization of integer I/O tensors."""

from __future__ import annotations

from tflite2qonnx.model import Subgraph, Tensor


def unique_tensor_names(subgraph: Subgraph) -> dict[int, str]:
    """Each tensor's ONNX name: its TFLite name, ``unnamed_<index>`` when that is empty, and
    ``<name>:<index>`` for a repeat (TFLite allows both; --verify, --verify-inputs, the
    metadata and the reports key tensors by these). Not ``tensor_<index>``: qonnx's
    GiveUniqueTensorNames (in cleanup_model) renames every tensor to ``tensor_<i>`` in turn,
    and one already so named would merge with another."""
    names: dict[int, str] = {}
    seen: set[str] = set()
    for t in subgraph.tensors:
        name = t.name or f"unnamed_{t.index}"
        if name in seen:
            name = f"{name}:{t.index}"
        seen.add(name)
        names[t.index] = name
    return names


def io_record(tensor: Tensor) -> dict:
    """An integer I/O tensor's quantization, as the metadata records it for raw feeds."""
    q = tensor.quantization
    record = {
        "dtype": tensor.dtype,
        "scale": [float(s) for s in q.scale],
        "zero_point": [int(z) for z in q.zero_point],
    }
    if q.per_axis:
        record["axis"] = q.quantized_dimension
    return record
