"""HGQ2's fixed-point arithmetic as ``hgq2_quantizer`` writes it, on hand-derived values, and
the covering / plain Quant it chooses (no TensorFlow: numpy and qonnx only).

The same arithmetic is checked against HGQ2 itself, element by element with random widths,
in ``test_hgq2_convert`` (the ``modes`` model)."""

import numpy as np
import pytest

from qkeras2qonnx.hgq2_layers.hgq2_quantizer import Fixed, covering_spec, plain_spec, reference
from qonnx_ingest.errors import ConversionError


def fixed(k, i, f, rnd="RND", overflow="SAT", bounded=True):
    shape = np.broadcast_shapes(np.shape(k), np.shape(i), np.shape(f))
    arrays = (np.broadcast_to(np.asarray(v, dtype=float), shape).copy() for v in (k, i, f))
    return Fixed("q", *arrays, rnd, overflow, bounded)


TIES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5], dtype=np.float32)


@pytest.mark.parametrize(
    "rnd, expected",
    [
        ("RND", [-2, -1, 0, 1, 2, 3]),  # ties toward +infinity
        ("RND_CONV", [-2, -2, 0, 0, 2, 2]),  # ties to even
        ("RND_ZERO", [-2, -1, 0, 0, 1, 2]),
        ("RND_INF", [-3, -2, -1, 1, 2, 3]),  # ties away from zero
        ("RND_MIN_INF", [-3, -2, -1, 0, 1, 2]),
        ("TRN", [-3, -2, -1, 0, 1, 2]),
        ("TRN_ZERO", [-2, -1, 0, 0, 1, 2]),
    ],
)
def test_rounding_modes_break_ties_as_hgq2_does(rnd, expected):
    q = fixed(1, 4, 0, rnd, "SAT")  # 5 bits, range [-16, 15]: no overflow here
    assert reference(q, TIES).tolist() == expected


def test_overflow_modes_on_a_signed_two_bit_integer():
    x = np.array([-5, -3, -2, 1, 2, 3, 5], dtype=np.float32)
    assert reference(fixed(1, 1, 0, overflow="SAT"), x).tolist() == [-2, -2, -2, 1, 1, 1, 1]
    assert reference(fixed(1, 1, 0, overflow="SAT_SYM"), x).tolist() == [-1, -1, -1, 1, 1, 1, 1]
    # WRAP: two's complement in k + i = 2 bits
    assert reference(fixed(1, 1, 0, overflow="WRAP"), x).tolist() == [-1, 1, -2, 1, -2, -1, 1]


def test_unsigned_wrap_and_fractional_grid():
    q = fixed(0, 2, 1, "TRN", "WRAP")  # [0, 4) on a grid of 1/2, mod 4
    x = np.array([-0.25, 0.75, 4.5, 5.25], dtype=np.float32)
    assert reference(q, x).tolist() == [3.5, 0.5, 0.5, 1.0]


def test_zero_width_elements_output_zero():
    q = fixed([1, 1, 0], [2, -2, 1], [1, 2, -1], overflow="WRAP")  # widths 4, 1, 0
    x = np.array([[1.25, 0.1, 3.0]], dtype=np.float32)
    out = reference(q, x)
    assert out[0, 2] == 0 and out[0, 0] == 1.5


def test_covering_quant_is_as_wide_as_the_widest_element():
    q = fixed([[1, 0, 1]], [[3, 1, -1]], [[0, 4, 2]], overflow="WRAP")
    spec = covering_spec(q, "q")
    # F = 4; widest element: i + F = 3 + 4, plus the sign bit
    assert float(spec.scale) == 2.0**-4 and spec.bit_width == 8 and spec.signed
    rng = np.random.default_rng(0)
    x = rng.normal(0, 8, (64, 3)).astype(np.float32)
    out = reference(q, x)
    assert np.array_equal(spec.apply(out), out)  # the identity on every output


def test_plain_quant_only_for_uniform_saturating_quant_roundings():
    assert plain_spec(fixed(1, 1, 2, "RND", "SAT")) is None  # ties to +inf: no Quant mode
    assert plain_spec(fixed(1, 1, 2, "RND_CONV", "WRAP")) is None  # Quant saturates
    assert plain_spec(fixed([1, 1], [1, 2], 2, "RND_CONV", "SAT")) is None  # not uniform
    spec = plain_spec(fixed(1, 1, 2, "RND_CONV", "SAT_SYM"))
    assert (spec.bit_width, spec.signed, spec.narrow) == (4, True, True)
    assert spec.rounding_mode == "ROUND"
    x = np.linspace(-3, 3, 97, dtype=np.float32)
    assert np.array_equal(spec.apply(x), reference(fixed(1, 1, 2, "RND_CONV", "SAT_SYM"), x))


def test_covering_quant_refuses_a_weight_it_would_change():
    q = fixed(1, 1, 2, overflow="SAT")
    with pytest.raises(ConversionError, match="changes the weight"):
        covering_spec(q, "fc kernel", np.array([0.1], dtype=np.float32))  # not on the grid


def test_table_grid_is_the_union_of_the_per_element_grids():
    """A table's rows: every value any element of the quantizer can output, step 2^-F."""
    from qkeras2qonnx.hgq2_layers.hgq2_tables import grid

    assert grid(fixed(1, 1, 2), "t") == (-2.0, 2, 16)  # -2 .. 1.75 by 1/4
    # unsigned 0 .. 3.5 by 1/2 and signed -1 .. 0.875 by 1/8: -1 .. 3.5 by 1/8
    assert grid(fixed([0, 1], [2, 0], [1, 3]), "t") == (-1.0, 3, 37)
    values = -1.0 + np.arange(37) / 8
    q = fixed([0, 1], [2, 0], [1, 3], rnd="TRN")
    outputs = reference(q, np.tile(np.linspace(-5, 5, 401, dtype=np.float32)[:, None], (1, 2)))
    assert np.all(np.isin(outputs, values))  # every output has a row


def test_table_over_a_too_wide_grid_is_refused_naming_it():
    from qkeras2qonnx.hgq2_layers.hgq2_tables import grid

    with pytest.raises(ConversionError, match="lut table.*524288 values"):
        grid(fixed(1, 10, 8), "lut table")


def test_a_one_bit_grid_gets_a_two_bit_covering_quant_and_no_plain_one():
    """QONNX's Quant takes 2 bits at least (qonnx_ingest.quant refuses 1): an unsigned 1-bit
    grid {0, 1} (hgq-ae's tgc model: k, i, f = 0, 1, 0) is computed by standard ops and
    covered by an unsigned 2-bit Quant, the identity on {0, 1}."""
    q = fixed(0, 1, 0, "RND_CONV", "SAT")
    assert plain_spec(q) is None
    spec = covering_spec(q, "q")
    assert (spec.bit_width, spec.signed, float(spec.scale)) == (2, False, 1.0)
    x = np.linspace(-2, 3, 41, dtype=np.float32)
    out = reference(q, x)
    assert set(out.tolist()) == {0.0, 1.0}
    assert np.array_equal(spec.apply(out), out)
