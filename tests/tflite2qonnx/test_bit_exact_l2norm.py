"""--bit-exact L2_NORMALIZATION (int8 and uint8) against the interpreter's reference kernel
(BUILTIN_REF): the fixed-point inverse square root per row, evaluated in the graph
(tflite2qonnx.ops.exact.l2norm).

The graph is run in onnxruntime as --verify runs it (qonnx's executor, node by node, would take
long on these ~640 nodes), on seeded inputs: uniform rows, rows squeezed toward the zero point
(small sums), and edge rows (all at the zero point: S = 0; one step off it: S = 1; the storage
extremes). uint8 models are the int8 ones moved to uint8 (``test_bit_exact_reduce.as_uint8``).
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest
from litert_compare import integer_differences, reference_interpreter

from qonnx_ingest.errors import ConversionError, ConversionWarning
from qonnx_ingest.verification import _onnxruntime_session
from tflite2qonnx.api import convert
from tflite2qonnx.reader import read_model

pytestmark = pytest.mark.keras

SHAPES = {"rows_of_6": ((64, 6),), "rank4_rows_of_40": ((1, 3, 4, 40),)}


@pytest.fixture(scope="module")
def models() -> dict[str, bytes]:
    from tf_models import OpCase, _fn, build_tflite

    l2 = _fn(lambda tf, x: tf.math.l2_normalize(x, axis=-1))
    return {
        name: build_tflite(
            OpCase("L2_NORMALIZATION", l2, shapes), True, seed=zlib.crc32(name.encode()) % 1000
        )
        for name, shapes in SHAPES.items()
    }


def _inputs(shape, zero_point: int, low: int, rng) -> list[np.ndarray]:
    batches = []
    for k in range(12):
        q = rng.integers(low, low + 256, shape)
        if k % 2:
            q = (q - zero_point) // int(rng.integers(2, 80)) + zero_point
        batches.append(q)
    edge = np.full(shape, zero_point).reshape(-1, shape[-1])
    edge[1, 2] = zero_point + 1  # S = 1
    edge[2, 0] = low  # one extreme
    edge[3] = low + 255
    edge[4, :] = low
    edge[5, ::2] = zero_point - 1  # S = depth / 2
    batches.append(np.clip(edge, low, low + 255).reshape(shape))
    return batches


@pytest.mark.parametrize("uint8", [False, True], ids=["int8", "uint8"])
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_l2_normalization_equals_builtin(models, name: str, uint8: bool) -> None:
    from test_bit_exact_reduce import as_uint8

    data = as_uint8(models[name]) if uint8 else models[name]
    assert "L2_NORMALIZATION" in {op.name for op in read_model(data).subgraphs[0].operators}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        model = convert(data, bit_exact=True, keep_io_layout=True)
    session, runner = _onnxruntime_session(model)
    assert session is not None, runner
    it = reference_interpreter(data)
    (inp,) = it.get_input_details()
    _, zero_point = inp["quantization"]
    differ = total = 0
    for q in _inputs(inp["shape"], zero_point, 0 if uint8 else -128, np.random.default_rng(3)):
        d, n = integer_differences(it, session, q)
        differ, total = differ + d, total + n
    assert total and differ == 0, f"{name}: {differ} of {total} differ"


def test_l2_normalization_off_its_output_grid_is_refused(models) -> None:
    """The kernel writes on scale 1/128 whatever the file says: another grid is refused."""
    from hand_built import edit_operator

    data = edit_operator(models["rows_of_6"], "L2_NORMALIZATION", output_quantization=(0.01, 0))
    with pytest.raises(ConversionError, match="L2_NORMALIZATION's output must be"):
        convert(data, bit_exact=True)
