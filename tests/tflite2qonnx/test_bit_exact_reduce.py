"""--bit-exact SUM, REDUCE_PROD and uint8 SOFTMAX against the interpreter's builtin kernels.

SUM is compared with the optimized builtin kernel (BUILTIN_WITHOUT_DEFAULT_DELEGATES: no
XNNPACK): the reference resolver's int8 SUM writes wrong values (see tf_models.py). REDUCE_PROD
and SOFTMAX with the reference kernels (BUILTIN_REF), as everywhere else. The uint8 models are
the int8 ones with every int8 tensor moved to uint8 (zero point + 128): the same real values,
the uint8 kernel.
"""

from __future__ import annotations

import warnings
import zlib

import flatbuffers
import numpy as np
import pytest
from litert_compare import compare

from qonnx_ingest.errors import ConversionWarning
from tflite2qonnx.api import convert
from tflite2qonnx.reader import read_model

pytestmark = pytest.mark.keras


def _cases():
    from tf_models import OpCase, _fn

    def sum_(axes, keep):
        return _fn(lambda tf, x: tf.reduce_sum(x, axes, keepdims=keep))

    def prod(axes, keep):
        return _fn(lambda tf, x: tf.reduce_prod(x, axes, keepdims=keep))

    return {
        "sum_height_width": OpCase("SUM", sum_([1, 2], False)),
        "sum_width_keepdims": OpCase("SUM", sum_([2], True), ((1, 6, 8),)),
        "sum_channels_positive_input": OpCase("SUM", sum_([3], False), ((1, 5, 6, 7),), 0, 2),
        "sum_first_and_last_keepdims": OpCase("SUM", sum_([0, 2], True), ((3, 4, 5),)),
        "prod_width_keepdims": OpCase("REDUCE_PROD", prod([2], True), low=0.5, high=1.5),
        "prod_height_channels_signed": OpCase(
            "REDUCE_PROD", prod([1, 3], False), ((1, 3, 4, 2),), -1.3, 1.3
        ),
        "prod_height_width_positive": OpCase(
            "REDUCE_PROD", prod([1, 2], True), ((1, 2, 3, 4),), 0.2, 1.8
        ),
        "softmax": OpCase("SOFTMAX", _fn(lambda tf, x: tf.nn.softmax(x * 3.0)), ((2, 10),)),
    }


def as_uint8(data: bytes) -> bytes:
    """The model with each int8 tensor (constants too) stored as uint8 on the same grid."""
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    for tensor in model.subgraphs[0].tensors:
        if tensor.type != schema.TensorType.INT8:
            continue
        assert len(tensor.quantization.scale) == 1, "per-tensor grids only"
        tensor.type = schema.TensorType.UINT8
        buffer = model.buffers[tensor.buffer] if tensor.buffer else None
        if buffer is not None and buffer.data is not None and len(buffer.data):
            q = np.asarray(buffer.data, np.uint8).view(np.int8).astype(np.int16) + 128
            buffer.data = q.astype(np.uint8)
        tensor.quantization.zeroPoint = [z + 128 for z in tensor.quantization.zeroPoint]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


@pytest.fixture(scope="module")
def models():
    from tf_models import build_tflite

    cases = _cases()
    return {
        name: build_tflite(case, True, seed=zlib.crc32(name.encode()) % 1000)
        for name, case in cases.items()
    }


def _interpreter(data: bytes, optimized: bool):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = "BUILTIN_WITHOUT_DEFAULT_DELEGATES" if optimized else "BUILTIN_REF"
    it = Interpreter(
        model_content=data, experimental_op_resolver_type=getattr(OpResolverType, kind)
    )
    it.allocate_tensors()
    return it


def _steps(data: bytes, kind: str, optimized: bool = False, **kwargs) -> np.ndarray:
    """|ours - builtin| in output steps on seeded inputs; nothing may be left to one rounding."""
    assert kind in {op.name for op in read_model(data).subgraphs[0].operators}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        model = convert(data, bit_exact=True)
    pairs = compare(model, _interpreter(data, optimized), **kwargs)
    return np.concatenate([p.steps() for p in pairs])


@pytest.mark.parametrize(
    "name",
    [
        "sum_height_width",
        "sum_width_keepdims",
        "sum_channels_positive_input",
        "sum_first_and_last_keepdims",
    ],
)
def test_sum_equals_the_optimized_builtin_kernel(models, name: str) -> None:
    """The raw integers summed, scaled and offset in float32, rounded half away from zero."""
    steps = _steps(models[name], "SUM", optimized=True, n_inputs=8)
    assert steps.size and np.all(steps == 0), f"{np.mean(steps != 0):.4%} differ"


@pytest.mark.parametrize(
    "name",
    ["prod_width_keepdims", "prod_height_channels_signed", "prod_height_width_positive"],
)
def test_reduce_prod_equals_builtin(models, name: str) -> None:
    """Each partial product rescaled by the 64-bit multiplier, in memory order, then once more."""
    steps = _steps(models[name], "REDUCE_PROD", n_inputs=8)
    assert steps.size and np.all(steps == 0), f"{np.mean(steps != 0):.4%} differ"


def test_reduce_prod_default_conversion_rounds_once_and_differs(models) -> None:
    """Why the kernel is needed: rounding the product once is a step off somewhere."""
    data = models["prod_height_width_positive"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConversionWarning)
        model = convert(data)
    steps = np.concatenate([p.steps() for p in compare(model, _interpreter(data, False))])
    assert np.any(steps != 0)


def test_uint8_softmax_equals_builtin(models) -> None:
    """uint8 SOFTMAX: the same float table as int8, its (int)(p + 0.5f) rounding."""
    data = as_uint8(models["softmax"])
    it = _interpreter(data, False)
    assert [d["dtype"] for d in it.get_input_details() + it.get_output_details()] == [np.uint8] * 2
    steps = _steps(data, "SOFTMAX", n_inputs=16)
    assert steps.size and np.all(steps == 0), f"{np.mean(steps != 0):.4%} differ"


def test_sum_on_one_grid_is_refused(models) -> None:
    """The one-grid SUM kernel adds raw integers in the storage type: no silent guess."""
    from hand_built import edit_operator

    from qonnx_ingest.errors import ConversionError

    data = models["sum_height_width"]
    sub = read_model(data).subgraphs[0]
    (op,) = (o for o in sub.operators if o.name == "SUM")
    q = sub.tensors[op.inputs[0]].quantization
    same = edit_operator(data, "SUM", output_quantization=(float(q.scale[0]), int(q.zero_point[0])))
    with pytest.raises(ConversionError, match="SUM on one grid"):
        convert(same, bit_exact=True)
