"""qonnx's ModelWrapper with its per-name lookups answered from indexes.

ModelWrapper looks every tensor up by scanning the graph (``get_tensor_shape``,
``get_initializer``, ``get_tensor_datatype``, ``find_producer`` ...), and qonnx's analyses and
transformations call those once per node: quadratic, seconds on a MobileNet and minutes on a
2,000-operator model. This wrapper answers the same questions from dictionaries and keeps them
current through its own setters. Anything that edits the graph behind its back (removing
nodes from the proto, a transformation returning a new ModelWrapper) must call ``reindex()``
or wrap the result again; ``transform`` is only for passes run without deep copy or cleanup.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper
from qonnx.core.datatype import DataType
from qonnx.core.modelwrapper import ModelWrapper

_DATATYPE_KEY = "finn_datatype"
# ModelWrapper.get_tensor_datatype's fallback for a tensor without an annotation
_FROM_ONNX = {onnx.TensorProto.FLOAT: "FLOAT32", onnx.TensorProto.FLOAT16: "FLOAT16"}


class IndexedModelWrapper(ModelWrapper):
    """ModelWrapper answering lookups in constant time (same answers, same setters' effects)."""

    def __init__(self, model: onnx.ModelProto, cache_arrays: bool = False) -> None:
        """``cache_arrays``: decode each initializer once and hand out copies (qonnx's passes
        read a quantizer's scale, zero point and bit width once per pass; decoding a small
        tensor costs ~60 us, copying it ~1 us), for short-lived wrappers: the cache holds a
        second copy of every weight read."""
        super().__init__(model, fix_missing_initializer_valueinfo=False)
        self._arrays: dict[str, np.ndarray] | None = {} if cache_arrays else None
        self.reindex()

    def reindex(self) -> None:
        graph = self.graph
        self._infos = {v.name: v for v in (*graph.value_info, *graph.output, *graph.input)}
        self._inits = {t.name: t for t in graph.initializer}
        if self._arrays is not None:
            self._arrays.clear()
        self._notes = {a.tensor_name: a for a in graph.quantization_annotation}
        self._producers: dict[str, onnx.NodeProto] = {}
        self._consumers: dict[str, list[onnx.NodeProto]] = {}
        for node in graph.node:
            for name in node.output:
                self._producers.setdefault(name, node)
            for name in node.input:
                self._consumers.setdefault(name, []).append(node)

    # ---------------------------------------------------------------- shapes and value info
    def get_tensor_valueinfo(self, tensor_name: str) -> onnx.ValueInfoProto | None:
        return self._infos.get(tensor_name)

    def get_tensor_shape(self, tensor_name: str, fix_missing_init_shape: bool = False):
        info = self._infos.get(tensor_name)
        if info is not None:
            return [d.dim_value for d in info.type.tensor_type.shape.dim]
        init = self._inits.get(tensor_name)
        if init is None:
            return None
        if fix_missing_init_shape:
            self.set_tensor_shape(tensor_name, list(init.dims), dtype=init.data_type)
        return list(init.dims)

    def set_tensor_shape(self, tensor_name: str, tensor_shape: Sequence[int], dtype=None) -> None:
        old = self._infos.get(tensor_name)
        if dtype is None:
            dtype = old.type.tensor_type.elem_type if old is not None else onnx.TensorProto.FLOAT
        new = helper.make_tensor_value_info(tensor_name, dtype, list(tensor_shape))
        if old is not None:
            old.CopyFrom(new)  # in place: an input or output keeps its position
        else:
            self.graph.value_info.append(new)
            self._infos[tensor_name] = self.graph.value_info[-1]

    # ---------------------------------------------------------------- initializers
    def get_initializer(self, tensor_name: str, return_dtype: bool = False):
        init = self._inits.get(tensor_name)
        if init is None:
            return (None, None) if return_dtype else None
        if self._arrays is None:
            value = numpy_helper.to_array(init)
        else:  # a fresh array per call, as ModelWrapper's: callers may edit what they get
            cached = self._arrays.get(tensor_name)
            if cached is None:
                cached = self._arrays[tensor_name] = numpy_helper.to_array(init)
            value = cached.copy()
        return (value, init.data_type) if return_dtype else value

    def set_initializer(self, tensor_name: str, tensor_value: np.ndarray) -> None:
        proto = numpy_helper.from_array(tensor_value, tensor_name)
        if self._arrays is not None:
            self._arrays.pop(tensor_name, None)
        old = self._inits.get(tensor_name)
        if old is not None:
            old.CopyFrom(proto)
        else:
            self.graph.initializer.append(proto)
            self._inits[tensor_name] = self.graph.initializer[-1]
        self.set_tensor_shape(tensor_name, list(tensor_value.shape), proto.data_type)

    # ---------------------------------------------------------------- datatypes
    def get_tensor_datatype(self, tensor_name: str):
        note = self._notes.get(tensor_name)
        if note is not None:
            for entry in note.quant_parameter_tensor_names:
                if entry.key == _DATATYPE_KEY:
                    return DataType[entry.value]
        info = self._infos.get(tensor_name)
        if info is not None:
            elem = info.type.tensor_type.elem_type
        else:
            init = self._inits.get(tensor_name)
            elem = init.data_type if init is not None else None
        return DataType[_FROM_ONNX.get(elem, "FLOAT32")]

    def set_tensor_datatype(self, tensor_name: str, datatype) -> None:
        note = self._notes.get(tensor_name)
        if note is None:
            if datatype is None:
                return
            note = self.graph.quantization_annotation.add()
            note.tensor_name = tensor_name
            self._notes[tensor_name] = note
        for entry in note.quant_parameter_tensor_names:
            if entry.key == _DATATYPE_KEY:
                if datatype is None:
                    entry.Clear()
                else:
                    entry.value = datatype.name
                return
        if datatype is not None:
            note.quant_parameter_tensor_names.append(
                onnx.StringStringEntryProto(key=_DATATYPE_KEY, value=datatype.name)
            )

    # ---------------------------------------------------------------- graph structure
    def find_producer(self, tensor_name: str) -> onnx.NodeProto | None:
        return self._producers.get(tensor_name)

    def find_consumers(self, tensor_name: str) -> list[onnx.NodeProto]:
        return list(self._consumers.get(tensor_name, ()))

    def find_consumer(self, tensor_name: str) -> onnx.NodeProto | None:
        users = self._consumers.get(tensor_name)
        return users[0] if users else None
