"""IndexedModelWrapper answers every lookup as qonnx's ModelWrapper does, without scanning."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from qonnx.core.datatype import DataType
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.transformation.infer_datatypes import InferDataTypes

import tflite2qonnx
from qonnx_ingest.indexed import IndexedModelWrapper
from support import CORPUS, requires_corpus

pytestmark = requires_corpus

PERSON = CORPUS / "tflite" / "tflm__person_detect.tflite"


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return tflite2qonnx.convert(PERSON)


def _names(model: onnx.ModelProto) -> list[str]:
    graph = model.graph
    names = {n for node in graph.node for n in (*node.input, *node.output)}
    return sorted(names | {t.name for t in graph.initializer} | {"no_such_tensor"})


def _copy(model):
    proto = onnx.ModelProto()
    proto.CopyFrom(model)
    return proto


def test_lookups_answer_as_modelwrappers_do(model):
    ours, theirs = IndexedModelWrapper(_copy(model)), ModelWrapper(_copy(model))
    for name in _names(model):
        assert ours.get_tensor_shape(name) == theirs.get_tensor_shape(name), name
        assert ours.get_tensor_datatype(name) == theirs.get_tensor_datatype(name), name
        a, b = ours.get_initializer(name), theirs.get_initializer(name)
        assert (a is None) == (b is None), name
        if a is not None:
            np.testing.assert_array_equal(a, b)
        producer = ours.find_producer(name)
        assert producer == theirs.find_producer(name), name
        assert ours.find_consumers(name) == theirs.find_consumers(name), name


def test_infer_datatypes_annotates_as_on_a_modelwrapper(model):
    ours = IndexedModelWrapper(_copy(model))
    ours = ours.transform(InferDataTypes(allow_scaledint_dtypes=True), make_deepcopy=False,
                          cleanup=False)  # fmt: skip
    theirs = ModelWrapper(_copy(model)).transform(
        InferDataTypes(allow_scaledint_dtypes=True), make_deepcopy=False, cleanup=False
    )
    kinds = set()
    for name in _names(model):
        assert ours.get_tensor_datatype(name) == theirs.get_tensor_datatype(name), name
        kinds.add(ours.get_tensor_datatype(name).name)
    assert {"SCALEDINT<8>", "FLOAT32"} <= kinds  # the pass did annotate


def test_setters_keep_the_indexes_current(model):
    ours = IndexedModelWrapper(_copy(model))
    name = model.graph.initializer[0].name
    ours.set_initializer(name, np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(ours.get_initializer(name), np.zeros((2, 3)))
    assert ours.get_tensor_shape(name) == [2, 3]
    ours.set_initializer("fresh", np.ones(4, np.int64))
    assert ours.get_tensor_shape("fresh") == [4]
    assert ours.get_initializer("fresh", return_dtype=True)[1] == onnx.TensorProto.INT64
    ours.set_tensor_datatype("fresh", DataType["UINT4"])
    assert ours.get_tensor_datatype("fresh") == DataType["UINT4"]
    assert ModelWrapper(ours.model).get_tensor_datatype("fresh") == DataType["UINT4"]
    ours.set_tensor_datatype("fresh", None)
    plain = ModelWrapper(ours.model)
    assert ours.get_tensor_datatype("fresh") == plain.get_tensor_datatype("fresh")


def test_cached_arrays_are_fresh_copies_and_follow_set_initializer(model):
    ours = IndexedModelWrapper(_copy(model), cache_arrays=True)
    name = model.graph.initializer[0].name
    first = ours.get_initializer(name)
    first += 1  # a caller editing what it got does not change the next answer
    np.testing.assert_array_equal(
        ours.get_initializer(name), ModelWrapper(model).get_initializer(name)
    )
    ours.set_initializer(name, np.full((2, 3), 7, dtype=np.float32))
    np.testing.assert_array_equal(ours.get_initializer(name), np.full((2, 3), 7))
