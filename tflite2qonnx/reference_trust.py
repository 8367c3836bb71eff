"""Whether --verify's reference can be trusted: TFLite's runtimes checked against each other.

A TFLite kernel can be plainly wrong: LiteRT 2.3's builtin reference FULLY_CONNECTED returns the
bias alone for blockwise int4 weights (ai-edge-quantizer's ``dynamic_wi4b32``). Held to such a
reference with XNNPACK's distance from it as the allowance, any answer about as far off
passed: a conversion 0.5 wrong read "verify: ok". So the reference is always run beside a
second runtime (the one that measures TFLite's spread), and when they differ by more than
rounding explains, a third decides:

- the gap between two runtimes on one output is the median of |a - b| over all its values
  and inputs, divided by the output's standard deviation (the larger of the two). The median
  ignores the few values a deep quantized network moves far (chaos, reordered detections)
  and sees a kernel computing something else. Measured on the corpus (16 seeded inputs):
  0 on most models, 0.08-0.12 on MoveNet and the SSD-FPN, at most 0.36 (RetinaFace, XNNPACK
  against the builtin kernels: its LEAKY_RELUs rounded once). The broken blockwise
  reference: 0.69-0.70 from both other runtimes, which are 3e-8 apart.
- past ``SUSPECT`` (0.05) the third runtime runs. A runtime ``SUSPECT`` away from both
  others while those two agree ``AGREEING`` (100) times closer is distrusted: the reference
  passes to the next runtime, or the spread is measured by the third instead (a broken
  spread runtime would widen the allowance just as well). The runner line names it.
- no such majority and a gap past ``GROSS`` (0.5, above every measured legitimate gap: half
  the values more than half the output's spread apart): the runtimes disagree and nothing
  is trusted, so verification is unavailable (ReferenceUnavailable names the runtimes and the
  gap) rather than "ok" on a wrong answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from qonnx_ingest.errors import ReferenceUnavailable
from tflite2qonnx.reference_paths import REFERENCE_ORDER

Feeds = dict[str, np.ndarray]
SUSPECT = 0.05
AGREEING = 100.0
GROSS = 0.5


@dataclass
class Runs:
    """The reference and spread runtimes after the cross-check, their outputs and a note."""

    reference: str
    outputs: list[Feeds]
    spread: str | None = None
    spread_outputs: list[Feeds] | None = None
    note: str = ""


def gap(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    """Median |a - b| over every value and input, in units of the output's standard deviation
    (module docstring); a value finite in one and not the other counts as infinitely far."""
    x = np.stack([np.asarray(v, np.float64) for v in a]).ravel()
    y = np.stack([np.asarray(v, np.float64) for v in b]).ravel()
    if x.size == 0:
        return 0.0
    finite = np.isfinite(x) & np.isfinite(y)
    same = (x == y) | (np.isnan(x) & np.isnan(y))
    diff = np.where(finite, np.abs(x - y), np.where(same, 0.0, np.inf))
    spread = max(
        (float(np.std(v[finite])) for v in (x, y) if finite.any()),
        default=0.0,
    )
    median = float(np.median(diff))
    if median == 0.0:
        return 0.0
    return median / spread if spread > 0 else float("inf")


def cross_checked(
    reference: str,
    outputs: list[Feeds],
    others: Sequence[str],
    run: Callable[[str], list[Feeds] | None],
    real: Callable[[str, np.ndarray], np.ndarray],
) -> Runs:
    """The trusted reference and spread among ``reference`` (already run: ``outputs``) and
    ``others`` in order of choice; ``run(kind)`` runs one (None: it does not run the model),
    ``real(name, x)`` reads output ``name`` as real values."""
    results = {reference: outputs}

    def next_run(after: list[str]) -> str | None:
        for kind in others:
            if kind not in after:
                after.append(kind)
                outs = run(kind)
                if outs is not None:
                    results[kind] = outs
                    return kind
        return None

    tried: list[str] = []
    second = next_run(tried)
    if second is None:
        return Runs(reference, outputs)
    names = list(outputs[0]) if outputs else []

    def gaps(p: str, q: str) -> dict[str, float]:
        return {
            n: gap([real(n, o[n]) for o in results[p]], [real(n, o[n]) for o in results[q]])
            for n in names
        }

    first_gaps = gaps(reference, second)
    if max(first_gaps.values(), default=0.0) <= SUSPECT:
        return Runs(reference, outputs, second, results[second])
    third = next_run(tried)
    if third is not None:
        pairs = {
            (reference, second): first_gaps,
            (reference, third): gaps(reference, third),
            (second, third): gaps(second, third),
        }
        odd = _odd_one(pairs)
        if odd is not None:
            kind, name, apart, agree = odd
            # the next reference in choose_reference's order, the other one the spread
            rest = sorted(
                (k for k in (reference, second, third) if k != kind),
                key=lambda k: REFERENCE_ORDER.index(k) if k in REFERENCE_ORDER else 0,
            )
            note = (
                f" ({kind} distrusted: on {name} they are a median {apart:.2g} of the output's "
                f"spread from {rest[0]} and {rest[1]}, which agree within {agree:.2g})"
            )
            if kind == reference:
                return Runs(rest[0], results[rest[0]], rest[1], results[rest[1]], note)
            return Runs(reference, outputs, third, results[third], note)
    name, worst = max(first_gaps.items(), key=lambda item: item[1])
    if worst > GROSS:
        arbiter = f" ({third} sides with neither)" if third is not None else ""
        raise ReferenceUnavailable(
            f"TFLite's runtimes disagree beyond rounding on {name}: {reference} and "
            f"{second} are a median {worst:.2g} of the output's spread apart{arbiter}, so no "
            "reference can be trusted"
        )
    return Runs(reference, outputs, second, results[second])


def _odd_one(
    pairs: dict[tuple[str, str], dict[str, float]],
) -> tuple[str, str, float, float] | None:
    """The runtime far from both others on some output while those two agree
    ``AGREEING`` times closer: (runtime, output, its smaller gap, the others' gap)."""
    kinds = list(dict.fromkeys(k for pair in pairs for k in pair))
    for kind in kinds:
        mine = [g for pair, g in pairs.items() if kind in pair]
        (theirs,) = [g for pair, g in pairs.items() if kind not in pair]
        for name in theirs:
            apart = min(g[name] for g in mine)
            if apart > SUSPECT and theirs[name] * AGREEING <= apart:
                return kind, name, apart, theirs[name]
    return None
