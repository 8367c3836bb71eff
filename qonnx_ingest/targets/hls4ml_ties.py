"""Whether a rounding can meet a tie: the arithmetic behind the hls4ml form's exact ROUND.

hls4ml 1.3.0 rounds a Quant only half to even (ROUND) or down (FLOOR); TFLite rounds half away
from zero (our ``HALF_UP``). The two agree wherever the value rounded is not exactly halfway
between two integers, so a HALF_UP Quant may be written ROUND if no reachable input is a tie.

The inputs here are the values of an integer accumulator: ``v = sum_i k_i * a_i + b`` with
integers ``k_i`` in a known range and exact rational coefficients ``a_i`` and offset ``b``
(every float32 is a dyadic rational, and the graph divides by float32 constants, so all are
fractions). Every such sum lies on the lattice ``b + g * t`` (``g`` the gcd of the ``a_i``,
``t`` an integer bounded by the ranges), and ``b + g * t`` is a tie exactly when ``t`` solves
one linear congruence: no solution in the bounds, no tie. The bound is conservative (not every
``t`` in it need be reachable), so "no tie" is a proof and "tie" only a possibility.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction


def lattice(coefficients: Iterable[Fraction]) -> tuple[Fraction, list[int]]:
    """``g`` and the integers ``a_i / g`` with ``g`` the greatest rational dividing every
    coefficient (``g`` 0 and all 0 when every coefficient is 0)."""
    coefficients = [Fraction(c) for c in coefficients]
    if not any(coefficients):
        return Fraction(0), [0] * len(coefficients)
    common = math.lcm(*(c.denominator for c in coefficients))
    ints = [c.numerator * (common // c.denominator) for c in coefficients]
    g = math.gcd(*ints)
    return Fraction(g, common), [i // g for i in ints]


def tie_reachable(
    coefficients: Iterable[Fraction], offset: Fraction, k_low: int, k_high: int
) -> bool:
    """Whether ``sum_i k_i * coefficients[i] + offset`` can be an integer plus one half for
    integers ``k_low <= k_i <= k_high``. False is a proof that it cannot."""
    g, steps = lattice(coefficients)
    offset = Fraction(offset)
    if g == 0:
        return (offset - Fraction(1, 2)).denominator == 1
    t_low = sum(min(k_low * s, k_high * s) for s in steps)
    t_high = sum(max(k_low * s, k_high * s) for s in steps)
    # g * t + offset - 1/2 integer  <=>  a * t = rhs (mod m), all over the common denominator m
    m = math.lcm(g.denominator, offset.denominator, 2)
    a = g.numerator * (m // g.denominator)
    rhs = (m // 2 - offset.numerator * (m // offset.denominator)) % m
    d = math.gcd(a, m)
    if rhs % d:
        return False  # no integer t at all
    period = m // d
    t0 = (rhs // d) * pow(a // d, -1, period) % period if period > 1 else 0
    first = t_low + (t0 - t_low) % period
    return first <= t_high
