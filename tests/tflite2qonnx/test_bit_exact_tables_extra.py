"""--bit-exact EXP, LOG, ELU, ABS, GELU and RSQRT (int8) against the interpreter on every one of
the 256 stored inputs (RSQRT: every one at or above the zero point, as the kernel refuses negative
values): each becomes a Gather on its kernel's table (tflite2qonnx.ops.exact.int8_math_tables).

TF's converter keeps ELU in float, so the int8 ELU model is the int8 TANH one with its operator
changed to ELU and an output grid for ELU's range (``hand_built.edit_operator``).
The reference resolver has no ELU: ELU runs on the optimized builtin kernel
(BUILTIN_WITHOUT_DEFAULT_DELEGATES, no XNNPACK), EXP and ABS on BUILTIN_REF.
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest
from litert_compare import real_value, run_ours

from qonnx_ingest.errors import ConversionWarning
from tflite2qonnx.api import convert

pytestmark = pytest.mark.keras


EDITS = {"elu": ("tanh", {"new_op": "ELU", "version": 1, "output_quantization": (0.0123, -47)})}


@pytest.mark.parametrize("name", ["exp", "log", "elu", "abs", "gelu", "gelu_tanh", "rsqrt"])
def test_table_kernel_equals_builtin_on_every_stored_input(name: str) -> None:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from hand_built import edit_operator
    from tf_models import CASES, build_tflite

    source, edit = EDITS.get(name, (name, {}))
    case = CASES[source]
    data = build_tflite(case, True, seed=zlib.crc32(name.encode()) % 1000)
    if edit:
        data = edit_operator(data, case.op, **edit)
    kind = "BUILTIN_WITHOUT_DEFAULT_DELEGATES" if name == "elu" else "BUILTIN_REF"
    it = Interpreter(
        model_content=data, experimental_op_resolver_type=getattr(OpResolverType, kind)
    )
    it.allocate_tensors()
    (inp,), (out,) = it.get_input_details(), it.get_output_details()
    assert (inp["dtype"], out["dtype"]) == (np.int8, np.int8)
    first = inp["quantization"][1] if name == "rsqrt" else -128
    q = np.resize(np.arange(first, 128), int(np.prod(inp["shape"]))).reshape(inp["shape"])
    it.set_tensor(inp["index"], q.astype(np.int8))
    it.invoke()
    theirs = it.get_tensor(out["index"]).astype(np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        model = convert(data, bit_exact=True)
    assert "Gather" in {n.op_type for n in model.graph.node}
    feeds = {inp["name"]: real_value(q.astype(np.int8), inp["quantization"])}
    ours = run_ours(model, feeds)[out["name"]].astype(np.float64)
    scale, zero_point = out["quantization"]
    ours_q = np.round(ours / scale) + zero_point
    assert np.array_equal(ours_q, theirs), f"{name}: {np.mean(ours_q != theirs):.4%} differ"


@pytest.mark.parametrize("name", ["arg_max_channels", "arg_min_height"])
def test_arg_max_min_of_integers_convert_exactly_without_warning(name: str) -> None:
    """ARG_MAX / ARG_MIN compare the stored integers; the real values s * (q - zp) order the
    same way (first index on ties), so --bit-exact has nothing to emulate and warns nothing."""
    from litert_compare import compare, reference_interpreter
    from tf_models import CASES, build_tflite

    data = build_tflite(CASES[name], True, seed=zlib.crc32(name.encode()) % 1000)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConversionWarning)
        model = convert(data, bit_exact=True)
    pairs = compare(model, reference_interpreter(data), n_inputs=8)
    assert pairs and all(np.array_equal(p.ours, p.reference) for p in pairs)
