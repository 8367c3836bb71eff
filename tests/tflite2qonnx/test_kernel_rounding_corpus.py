"""Issue 36 on the corpus models it came from, op by op: each operator whose default form
now rounds as the builtin kernels do (or reads its bias in the kernel's unit), converted on
its own and fed the builtin kernels' own input tensors (``experimental_preserve_all_tensors``).

Rounding once, the gesture model's PRELUs were 70-99% equal (its convolutions rounded once,
as XNNPACK does, until they too rounded twice); MediaPipe Model Maker's QAT export's
requantizing QUANTIZEs 53-84% and MULs 98.4-99.5%, and four of its RetinaNet-head
convolutions (a bias shared among five input grids) 0-56% equal, up to 33 steps apart;
OSNet's 35 int8 MEANs 94-100%.
"""

from __future__ import annotations

import numpy as np
import pytest
from litert_compare import _quantization, random_input, real_value, reference_interpreter, run_ours

from support import CORPUS, requires_corpus
from tflite2qonnx.api import convert_subgraph, slice_subgraph
from tflite2qonnx.reader import read_model

pytestmark = requires_corpus

GESTURE = "usefulsensors__gesture_model_full_integer_quant.tflite"
OSNET = "tomvdsch__osnet_ain_x0_25_integer_quant.tflite"
MPMAKER = "mpmaker__model_int8_qat.tflite"
# the head convolutions whose shared bias records another layer's scale
SHARED_BIAS_CONVS = (109, 127, 136, 180, 182, 184, 186)


def _op_steps(name: str, keep) -> dict[tuple[int, str], np.ndarray]:
    """{(index, op): |ours - builtin| in output steps} for the operators ``keep`` selects,
    over one seeded input."""
    path = CORPUS / "tflite" / name
    subgraph = read_model(path).subgraphs[0]
    it = reference_interpreter(path, preserve_all=True)
    details = it.get_tensor_details()
    rng = np.random.default_rng(36)
    for detail in it.get_input_details():
        it.set_tensor(detail["index"], random_input(detail, rng))
    it.invoke()
    steps = {}
    for op in subgraph.operators:
        if not keep(op):
            continue
        piece = slice_subgraph(subgraph, [op.index])
        model = convert_subgraph(piece, keep_io_layout=True)
        feeds = {
            model.graph.input[k].name: real_value(it.get_tensor(i), _quantization(details[i]))
            for k, i in enumerate(piece.inputs)
        }
        (ours,) = run_ours(model, feeds).values()
        scale, zero_point = _quantization(details[op.outputs[0]])
        theirs = it.get_tensor(op.outputs[0]).astype(np.float64)
        steps[op.index, op.name] = np.abs(
            np.round(ours.astype(np.float64) / scale) + zero_point - theirs
        ).ravel()
    return steps


def test_gesture_prelus_and_convolutions_equal_the_builtin_kernel():
    """Its 53 convolutions rounded once left the regressors 0.7 pt below XNNPACK end to end;
    rounded twice, four of them differ on one value in ~65,000 (float32
    accumulation at a tie) and the model passes --verify (75.8% equal, XNNPACK 69.3%)."""
    kinds = ("PRELU", "CONV_2D", "DEPTHWISE_CONV_2D")
    steps = _op_steps(GESTURE, lambda op: op.name in kinds)
    assert [name for _, name in steps].count("PRELU") == 26 and len(steps) == 26 + 53
    for key, s in steps.items():
        if key[1] == "PRELU":
            assert s.max() == 0, f"{key}: {np.mean(s > 0):.2%} differ"
        else:
            assert s.max() <= 1 and np.mean(s == 0) >= 0.9999, f"{key}: {np.mean(s > 0):.4%}"


@pytest.fixture(scope="module")
def mpmaker_steps():
    return _op_steps(
        MPMAKER,
        lambda op: op.name in ("QUANTIZE", "MUL") and op.index > 0 or op.index in SHARED_BIAS_CONVS,
    )


def test_mpmaker_requantizations_and_products_equal_the_builtin_kernels(mpmaker_steps):
    for (index, name), s in mpmaker_steps.items():
        if name != "CONV_2D":
            assert s.max() == 0, f"{index} {name}: {np.mean(s > 0):.2%} differ"


def test_mpmaker_shared_bias_convolutions_round_once_off_at_most(mpmaker_steps):
    for index in SHARED_BIAS_CONVS:
        s = mpmaker_steps[index, "CONV_2D"]
        assert s.max() <= 1 and np.mean(s == 0) >= 0.98, (index, s.max(), np.mean(s == 0))


def test_osnet_means_round_as_the_builtin_kernel():
    steps = _op_steps(OSNET, lambda op: op.name == "MEAN")
    assert len(steps) == 35
    assert sum(s.max() == 0 for s in steps.values()) >= 33
    for key, s in steps.items():
        assert s.max() <= 1 and np.mean(s == 0) >= 0.995, (key, np.mean(s == 0))
