"""int16 (16x8) RSQRT, PRELU and DIV against the interpreter's builtin reference kernels, by
default and under --bit-exact: every output integer equal, over the whole int16 input range
(RSQRT: every input the kernel accepts, 0 to 32767), on a few grids each.

Rounding the real function once was up to 9755 (RSQRT: an interpolated table), 3422 (PRELU:
the kernel reads alpha as int8) and 32768 steps (DIV: shifts of 32 and more near 0) off.
"""

from __future__ import annotations

import numpy as np
import pytest
from int16_op_models import Case, differences
from litert_compare import reference_interpreter

from qonnx_ingest.errors import ConversionError, ConversionWarning
from tflite2qonnx.api import convert

MODES = pytest.mark.parametrize("bit_exact", [False, True], ids=["default", "bit_exact"])
ALL_INT16 = np.arange(-(1 << 15), 1 << 15, dtype=np.int16)
X = (16, 1024, 4)  # every int16 value once, 4 channels


def _steps(case: Case, feeds: list[np.ndarray], bit_exact: bool) -> np.ndarray:
    return differences(case.model(False), feeds, bit_exact)


@MODES
@pytest.mark.parametrize(
    "s_in, s_out", [(1 / 3000, 1 / 1234.5), (2.0**-15, 0.01), (0.02, 2.0**-12)],
    ids=["fine", "power_of_two_input", "coarse"],
)  # fmt: skip
def test_int16_rsqrt_equals_builtin_on_every_input(s_in, s_out, bit_exact: bool) -> None:
    case = Case("RSQRT", [((32768,), s_in)], [((32768,), s_out, "int16")], version=2)
    steps = _steps(case, [ALL_INT16[32768:]], bit_exact)
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"


def _prelu(alpha: np.ndarray, dtype: str, s_in: float, s_alpha: float, s_out: float, zp: int = 0):
    tensor = {"name": "alpha", "shape": alpha.shape, "dtype": dtype, "data": alpha.astype(dtype)}
    tensor["quant"] = ([s_alpha], [zp])
    return Case("PRELU", [(X, s_in)], [(X, s_out, "int16")], consts=[tensor])


_RNG = np.random.default_rng(20261125)
PRELU_CASES = {
    # the 16x8 form: int8 alpha per channel, broadcast against (16, 1024, 4)
    "int8_per_channel": (np.array([3, -5, 7, 127]), "int8", 1 / 3000, 1 / 200, 1 / 1234.5, 0),
    "int8_zero_point": (np.array([-128, 0, 9, 100]), "int8", 0.001, 0.0003, 0.0007, 4),
    "int8_same_shape": (_RNG.integers(-128, 128, X), "int8", 1 / 3000, 1 / 64, 1 / 3000, 0),
    # the kernel reads an int16 alpha's bytes as int8 (3422 steps off its int16 values)
    "int16_per_channel": (np.array([3, -5, 7, 20]), "int16", 1 / 3000, 1 / 200, 1 / 1234.5, 0),
    "int16_same_shape": (_RNG.integers(-32768, 32768, X), "int16", 0.001, 3e-5, 0.0007, 0),
}


@MODES
@pytest.mark.parametrize("name", sorted(PRELU_CASES))
def test_int16_prelu_equals_builtin_on_every_input(name: str, bit_exact: bool) -> None:
    """Multipliers in float32 as the kernel's Prepare computes them (in double, 12 to 22 of
    the 65,536 outputs were a step off)."""
    case = _prelu(*PRELU_CASES[name])
    steps = _steps(case, [ALL_INT16.reshape(X)], bit_exact)
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"


def test_int16_prelu_with_int16_alpha_reads_its_bytes() -> None:
    """What the conversion reproduces: alpha [3, -5, 7, 20] acts as [3, 0, -5, -1], the int8
    view of its first bytes (so channel 1's negative inputs give 0)."""
    case = _prelu(*PRELU_CASES["int16_per_channel"])
    it = reference_interpreter(case.model(False))
    it.set_tensor(it.get_input_details()[0]["index"], ALL_INT16.reshape(X))
    it.invoke()
    out = it.get_tensor(it.get_output_details()[0]["index"])
    negative = ALL_INT16.reshape(X) < -1000
    assert np.all(out[..., 1][negative[..., 1]] == 0)
    assert np.all(out[..., 2][negative[..., 2]] > 0)  # -5 * (negative x)


def test_int16_prelu_with_int16_alpha_warns_that_it_is_not_prelu() -> None:
    """The conversion matches the interpreter, which is not PReLU with the file's alphas: the
    user is told, naming the alpha."""
    case = _prelu(*PRELU_CASES["int16_per_channel"])
    with pytest.warns(ConversionWarning, match="alpha 'alpha' is int16; TFLite's kernel reads"):
        convert(case.model(False))


def test_int16_prelu_with_int16_alpha_at_run_time_refused() -> None:
    case = Case("PRELU", [(X, 1 / 3000), ((4,), 1 / 200)], [(X, 1 / 1234.5, "int16")])
    for bit_exact in (False, True):
        with pytest.raises(ConversionError, match="alpha .* is int16 and not constant"):
            convert(case.model(False), bit_exact=bit_exact)


DIV_GRIDS = {
    "fine": (1 / 3000, 0.000123, 1 / 1234.5),
    "tiny_multiplier": (1e-6, 1.0, 10.0),  # shifts of 64 and more: the 64-bit mask's too
    "coarse_output": (0.01, 0.02, 0.001),
    "powers_of_two": (2.0**-12, 2.0**-12, 2.0**-10),
}
# divisors: the extremes, the smallest magnitudes, and random ones
_DIVISORS = np.concatenate(
    [[-32768, 32767, -1, 1, 2, -2, 3, 127, -128, 255], _RNG.integers(-32768, 32768, 54)]
)
_DIVISORS[_DIVISORS == 0] = 7


@MODES
@pytest.mark.parametrize("grid", sorted(DIV_GRIDS))
def test_int16_div_equals_builtin_on_every_dividend(grid: str, bit_exact: bool) -> None:
    """Every int16 dividend against 64 divisors, broadcast (64, 1) against (64, 1024), and
    every nonzero int16 divisor against random dividends, element by element."""
    s1, s2, s_out = DIV_GRIDS[grid]
    shape = (64, 1024)
    broadcast = Case("DIV", [(shape, s1), ((64, 1), s2)], [(shape, s_out, "int16")])
    divisors = _DIVISORS.astype(np.int16).reshape(64, 1)
    steps = [_steps(broadcast, [ALL_INT16.reshape(shape), divisors], bit_exact)]
    elementwise = Case("DIV", [(shape, s1), (shape, s2)], [(shape, s_out, "int16")])
    every = np.where(ALL_INT16 == 0, 1, ALL_INT16).reshape(shape)
    dividends = _RNG.integers(-32768, 32768, shape).astype(np.int16)
    dividends[0, :64] = [0, 1, -1, 2, -2, 3] * 10 + [0, 0, 0, 0]  # small quotients
    steps.append(_steps(elementwise, [dividends, every], bit_exact))
    steps = np.concatenate(steps)
    assert steps.max() == 0, f"{100 * np.mean(steps == 0):.2f}% equal, {steps.max()} steps"


def test_int16_div_of_zero_is_one_step_on_x86() -> None:
    """The x86-64 behaviour the conversion reproduces: 0 / y shifts right by 32 or more, which
    C leaves undefined; the interpreter gives 1 step there (the rounding's mask reads all
    ones), not 0."""
    s1, s2, s_out = DIV_GRIDS["coarse_output"]
    case = Case("DIV", [((64,), s1), ((64,), s2)], [((64,), s_out, "int16")])
    it = reference_interpreter(case.model(False))
    q1, q2 = np.zeros(64, np.int16), _DIVISORS.astype(np.int16)
    for detail, q in zip(it.get_input_details(), [q1, q2], strict=True):
        it.set_tensor(detail["index"], q)
    it.invoke()
    out = it.get_tensor(it.get_output_details()[0]["index"])
    assert np.any(out == 1) and set(np.unique(out)) <= {0, 1}
    assert differences(case.model(False), [q1, q2], False).max() == 0


def test_int16_div_multiplier_of_2_15_refused() -> None:
    """Where the kernel would shift left (undefined in RoundingDivideByPOT)."""
    case = Case("DIV", [((4,), 1.0), ((4,), 1e-6)], [((4,), 1e-3, "int16")])
    with pytest.raises(ConversionError, match="DIV: the output multiplier is too large"):
        convert(case.model(False))
