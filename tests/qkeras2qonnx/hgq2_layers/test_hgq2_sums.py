"""HGQ2 sums beyond float32's significand are not converted silently (``hgq2_sums``).

``inexact_sum`` (``hgq2_models.py``): a QDense of 64 inputs with (i, f) = (10, 10), SAT,
against weights with 8 fractional bits; its partial sums can reach ~2^31 steps of 2^-18. The
converter warns one line naming the layer and the bound, and records it in the metadata; the
other HGQ2 models (the widths HGQ2 uses by default, ~2^16 steps at most) do not warn.
"""

import json
import math
from fractions import Fraction

import numpy as np
import onnx
import pytest
from hgq2_support import made_hgq2_models
from qkeras3_support import run_cli_on_keras3_file

pytestmark = pytest.mark.keras

INEXACT = "qkeras2qonnx.hgq2_inexact_sums"
WITHIN = ("dense", "conv2d_pool", "conv1d", "batchnorm", "trained", "modes", "multi_input",
          "einsum", "sigmoid_out", "tables", "softmax", "reductions", "conv3d")  # fmt: skip


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return made_hgq2_models(tmp_path_factory)


def finest_exponent(values: np.ndarray) -> int:
    """The smallest F with every value times 2^F an integer (by trial, from the source)."""
    f = 0
    while not np.all(np.asarray(values, np.float64) * 2.0**f == np.round(values * 2.0**f)):
        f += 1
    return f


def expected_line(ref: dict) -> str:
    """Hand-derived: sum_j |w_j| 2^10 + |b| (|x| <= 2^10 for i = 10), in steps of
    2^-(10 + F_w) (or the bias's step, if finer)."""
    kernel, bias = ref["kernel"].astype(np.float64), ref["bias"].astype(np.float64)
    top = max(10 + finest_exponent(kernel), finest_exponent(bias))
    steps = (np.abs(kernel).sum() * 2.0**10 + np.abs(bias).max()) * 2.0**top
    return (
        f"wide: partial sums can reach {steps:.4g} steps of 2^-{top} "
        f"(2^{math.log2(steps):.1f}), beyond float32's 24-bit significand: its float32 sums "
        "(ONNX and HGQ2's own predict) may round where hls4ml's fixed-point sums do not"
    )


def test_a_sum_beyond_float32s_significand_warns_naming_the_layer_and_bound(made):
    ref = dict(np.load(made / "inexact_sum.npz"))
    lines = (made / "inexact_sum.inexact.txt").read_text().splitlines()
    assert lines == [expected_line(ref)]
    model = onnx.load(made / "inexact_sum.inmemory.onnx")
    metadata = {p.key: p.value for p in model.metadata_props}
    assert json.loads(metadata[INEXACT]) == {"wide": lines[0].removeprefix("wide: ")}


def test_command_line_prints_the_warning_as_one_line_and_converts(made, tmp_path):
    out = tmp_path / "wide.onnx"
    done = run_cli_on_keras3_file(made / "inexact_sum.keras", "-o", out)
    assert done.returncode == 0, done.stderr[-2000:]
    warned = [line for line in done.stderr.splitlines() if "warning:" in line]
    expected = expected_line(dict(np.load(made / "inexact_sum.npz")))
    assert warned == [f"qkeras2qonnx: warning: {expected}"]
    assert out.exists()


def test_the_warned_bound_is_reachable_float32_sums_do_round_there(made):
    """Not a vacuous warning: inputs on the input quantizer's grid (-2^10 or 2^9 by the sign
    of the weight, alternating with its step 2^-10), summed in float32 in order, differ from
    the exact sum."""
    ref = dict(np.load(made / "inexact_sum.npz"))
    w = ref["kernel"][:, 0].astype(np.float32)
    x = np.where(w < 0, -(2.0**10), 2.0**9).astype(np.float32)
    x[1::2] = np.float32(2.0**-10)
    total = np.float32(0)
    for product in w * x:  # each product exact: w times a power of two
        total = np.float32(total + product)
    exact = sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(w, x, strict=True))
    assert Fraction(float(total)) != exact


@pytest.mark.parametrize("name", WITHIN)
def test_models_within_the_bound_convert_without_the_warning(made, name):
    assert (made / f"{name}.inexact.txt").read_text() == ""
    metadata = {p.key for p in onnx.load(made / f"{name}.inmemory.onnx").metadata_props}
    assert INEXACT not in metadata


@pytest.mark.parametrize(
    "values, exponent",
    [([0.75, 2.0, -0.125], 3), ([3 * 2.0**-20, 1.0], 20), ([4.0, 12.0], -2), ([1.5], 1)],
)
def test_value_step_is_the_finest_power_of_two_the_values_are_multiples_of(values, exponent):
    from qkeras2qonnx.hgq2_layers.hgq2_sums import value_exponent

    assert value_exponent(np.array(values, np.float32)) == exponent
