"""--verify's cross-check of TFLite's runtimes (tflite2qonnx/reference_trust.py) on hand-made
outputs: which runtime is distrusted, and when no reference can be trusted. The blockwise
int4 models whose builtin reference kernels return the bias alone are in
test_ai_edge_quantizer.py."""

from __future__ import annotations

import numpy as np
import pytest

from qonnx_ingest.errors import ReferenceUnavailable
from tflite2qonnx.reference_paths import BUILTIN, BUILTIN_REF, XNNPACK
from tflite2qonnx.reference_trust import cross_checked, gap

RNG = np.random.default_rng(0)
TRUE = [RNG.normal(size=(4, 10)) for _ in range(8)]
# a deep quantized network's chaos: a tenth of the values moved far, the rest equal
CHAOS = [np.where(RNG.random(t.shape) < 0.1, t + RNG.normal(size=t.shape), t) for t in TRUE]
BIAS_ALONE = [np.full((4, 10), 0.25) for _ in TRUE]


def _runs(**by_kind):
    outputs = {k: [{"y": v} for v in values] for k, values in by_kind.items()}
    ran = []

    def run(kind):
        ran.append(kind)
        return outputs.get(kind)

    return outputs, run, ran


def _check(outputs, run):
    return cross_checked(
        BUILTIN_REF, outputs[BUILTIN_REF], [XNNPACK, BUILTIN], run, lambda name, x: x
    )


def test_chaos_is_within_rounding_and_unrelated_values_are_not():
    assert gap(TRUE, CHAOS) == 0.0  # the median value is equal
    assert gap(TRUE, BIAS_ALONE) > 0.5
    assert gap(TRUE, [t + 1e-7 for t in TRUE]) < 1e-6


def test_close_runtimes_need_no_third():
    outputs, run, ran = _runs(**{BUILTIN_REF: TRUE, XNNPACK: CHAOS, BUILTIN: TRUE})
    runs = _check(outputs, run)
    assert (runs.reference, runs.spread, runs.note, ran) == (BUILTIN_REF, XNNPACK, "", [XNNPACK])


def test_a_broken_reference_passes_to_the_next_runtime():
    outputs, run, _ = _runs(**{BUILTIN_REF: BIAS_ALONE, XNNPACK: TRUE, BUILTIN: TRUE})
    runs = _check(outputs, run)
    assert (runs.reference, runs.spread) == (BUILTIN, XNNPACK)
    assert runs.note.startswith(" (builtin kernels distrusted: on y they are a median ")


def test_a_broken_spread_runtime_gives_no_allowance():
    """XNNPACK far off while both builtin resolvers agree: the spread comes from the third."""
    outputs, run, _ = _runs(**{BUILTIN_REF: TRUE, XNNPACK: BIAS_ALONE, BUILTIN: TRUE})
    runs = _check(outputs, run)
    assert (runs.reference, runs.spread) == (BUILTIN_REF, BUILTIN)
    assert runs.note.startswith(" (XNNPACK distrusted: ")


@pytest.mark.parametrize("third", [None, "unrelated"])
def test_disagreement_without_a_majority_is_no_verdict(third):
    unrelated = [RNG.normal(size=(4, 10)) for _ in TRUE]
    kinds = {BUILTIN_REF: BIAS_ALONE, XNNPACK: TRUE}
    if third:
        kinds[BUILTIN] = unrelated
    outputs, run, _ = _runs(**kinds)
    with pytest.raises(ReferenceUnavailable, match="disagree beyond rounding on y: builtin"):
        _check(outputs, run)
