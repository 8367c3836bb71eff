"""Run under Keras 3 with hgq2 (``qkeras3_support.run_qkeras3``), never imported by pytest itself.

``python hgq2_float_models.py OUT`` builds the seeded HGQ2 minifloat models of
``test_hgq2_float.py`` and writes, per model NAME, what ``hgq2_models.py`` writes
(``NAME.npz`` with inputs ``x1_0`` / ``x8_0``, HGQ2's predict ``y1`` / ``y8`` and
``quantizers``; ``NAME.inmemory.onnx`` or ``NAME.error.txt``).

hgq2 0.2.0 cannot build a minifloat quantizer from a config (``QuantizerConfig("float", ...)``
passes ``is_weight``, which FloatPointQuantizer rejects): standalone ``Quantizer`` layers get
the internal ``FloatPointQuantizer`` directly, layers' configs build through a patched
``get_quantizer`` that drops that one key.
"""

from __future__ import annotations

import sys
from pathlib import Path

import keras
import numpy as np
from hgq.config import QuantizerConfig
from hgq.layers import QDense
from hgq.quantizer import Quantizer
from hgq.quantizer.internal import FloatPointQuantizer
from hgq2_builder_io import save_and_convert

# (m, e, e0) formats of the grid model: E4M3-like, a wide offset, m = 0, e = 0 (one exponent,
# fixed point with a sign), e = 1, e = 3 with a negative offset, and the smallest exponent
# (-19) the converter accepts for 3 mantissa bits (HGQ2's 1e-7 is just absorbed there).
FORMATS = ((3, 4, 0), (2, 3, 2), (0, 2, 0), (1, 0, 2), (4, 1, -1), (2, 3, -2), (3, 4, -12))
# The grid: in every binade [2^k, 2^(k+1)) from 2^-26 to 2^7 (past every format's largest
# value: overflow), 64 steps of 2^(k-6), a quarter of the step of m <= 4 mantissa bits (ties
# included), and finer than a quarter of every subnormal step.
BINADES = range(-26, 8)


def _float(m, e, e0, name: str, **axes) -> Quantizer:
    q = Quantizer(q_type="kif", place="datalane", name=name)
    q.quantizer = FloatPointQuantizer(m, e, e0, name=f"{name}_float", **axes)
    return q


def grid() -> keras.Model:
    """Each format applied to one input row holding the whole grid (batch 1)."""
    n = _grid_values().size
    inp = keras.Input((n,), name="x")
    outs = [
        _float(m, e, e0, f"f{j}", homogeneous_axis=(0, 1))(inp)
        for j, (m, e, e0) in enumerate(FORMATS)
    ]
    return keras.Model(inp, keras.layers.Concatenate(name="cat")(outs), name="grid")


def grid_per_element() -> keras.Model:
    """One quantizer with per-element (m, e, e0), element j in FORMATS[j % 6]: a composite
    (standard ops, then a covering FloatQuant). Each grid value meets every format."""
    n = _grid_values().size * len(FORMATS)
    inp = keras.Input((n,), name="x")
    q = _float(2, 2, 0, "mixed", heterogeneous_axis=(1,), homogeneous_axis=None)
    out = q(inp)
    for j, variable in enumerate((q.quantizer._m, q.quantizer._e, q.quantizer._e0)):
        column = np.array([f[j] for f in FORMATS], np.float32)
        variable.assign(np.tile(column, n // len(FORMATS))[None, :])
    return keras.Model(inp, out, name="grid_per_element")


def _grid_values() -> np.ndarray:
    """The BINADES' grid, each power of two's float32 neighbours (3 ulps each side), and tiny, huge
    and zero values, with both signs."""
    steps = np.concatenate([2.0**k + np.arange(64) * 2.0 ** (k - 6) for k in BINADES])
    powers = 2.0 ** np.arange(-20, 8)
    near = []
    for p in np.float32(powers):
        up = down = p
        for _ in range(3):
            up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(0))
            near += [up, down]
    extra = [1e-30, 1e-9, 1e-7, 3e-7, 1e30, 0.0]
    values = np.concatenate([steps, near, extra]).astype(np.float32)
    return np.concatenate([values, -values[values != 0]])


def _float_config(place: str, m: int, e: int, e0: int, **axes) -> QuantizerConfig:
    """``QuantizerConfig("float", ...)``, buildable (``_buildable_float_configs``)."""
    return QuantizerConfig("float", place, m0=m, e0=e, e00=e0, **axes)


def _buildable_float_configs() -> None:
    """hgq2 0.2.0's ``get_quantizer`` passes the config's ``is_weight`` to
    FloatPointQuantizer, which rejects it: drop that one key for minifloat configs."""
    original = QuantizerConfig.get_quantizer

    def get_quantizer(self):
        if self.q_type != "float":
            return original(self)
        return FloatPointQuantizer(**{k: v for k, v in self.config.items() if k != "is_weight"})

    QuantizerConfig.get_quantizer = get_quantizer


def dense() -> keras.Model:
    """QDense with minifloat input (per element: a composite), kernel and bias quantizers
    (per weight: HGQ2's values behind a covering FloatQuant) and a uniform output one."""
    inp = keras.Input((6,), name="x")
    layer = QDense(
        4,
        enable_oq=True,
        iq_conf=_float_config("datalane", 2, 3, 1, heterogeneous_axis=(1,)),
        kq_conf=_float_config("weight", 3, 2, -1),
        bq_conf=_float_config("bias", 2, 2, 0, homogeneous_axis=(), heterogeneous_axis=None),
        oq_conf=_float_config("datalane", 2, 4, 2, homogeneous_axis=(0, 1)),
        name="fc",
    )
    out = layer(inp)
    iq = layer.iq.quantizer  # per element: m, e, e0 differ along the 6 inputs
    iq._m.assign(np.array([[1, 2, 3, 2, 0, 4]], np.float32))
    iq._e.assign(np.array([[3, 2, 4, 1, 3, 0]], np.float32))
    iq._e0.assign(np.array([[1, 0, 2, -1, 1, 3]], np.float32))
    layer.bq.quantizer._m.assign(np.full(layer.bq.quantizer._m.shape, 2.0, np.float32))
    layer.bias.assign(np.linspace(-0.6, 0.45, 4).astype(np.float32))
    return keras.Model(inp, out, name="dense")


def refuse_tiny_exponent() -> keras.Model:
    """e = 4, e0 = -14: smallest exponent -21, where HGQ2's log2(|x| + 1e-7) moves the
    exponent of values up to 1e-7 below 2^-20 by one; no exact form."""
    inp = keras.Input((4,), name="x")
    h = _float(*TINY, "tiny", homogeneous_axis=(0, 1))(inp)
    return keras.Model(inp, QDense(2, name="fc")(h), name="refuse_tiny_exponent")


TINY = (3, 4, -14)


def tiny_differences() -> int:
    """How many values near 2^-20 HGQ2's TINY quantizer puts elsewhere than the minifloat
    with the same (m, e, e0) does (``hgq2_float.reference``): why it is refused."""
    from qkeras2qonnx.hgq2_layers.hgq2_float import Minifloat, reference

    x = (np.arange(1, 4097) * 2.0**-30).astype(np.float32)[None, :]  # (0, 2^-18]
    q = FloatPointQuantizer(*TINY, homogeneous_axis=(0, 1))
    hgq = np.asarray(q(x))
    m, e, e0 = (np.full((1, 1), v, np.float64) for v in TINY)
    return int(np.sum(hgq != reference(Minifloat("tiny", m, e, e0), x)))


MODELS = {
    "grid": grid,
    "grid_per_element": grid_per_element,
    "dense": dense,
    "refuse_tiny_exponent": refuse_tiny_exponent,
}
QUANTIZERS = {"grid": len(FORMATS), "grid_per_element": 1, "dense": 4, "refuse_tiny_exponent": 4}


def inputs(name: str, model: keras.Model, batch: int, seed: int) -> np.ndarray:
    """The grid model: the grid, then scaled and shifted copies; others: half on a 1/16 grid,
    half wide normal (overflow)."""
    rng = np.random.default_rng(seed)
    shape = (batch, *model.inputs[0].shape[1:])
    if name.startswith("grid"):
        values = _grid_values()
        values = values if name == "grid" else np.repeat(values, len(FORMATS))
        rows = [values] + [rng.permutation(values) * rng.uniform(0.5, 2) for _ in range(batch - 1)]
        return np.stack(rows).astype(np.float32)
    on_grid = rng.integers(-96, 97, shape) / 16.0
    wide = rng.normal(0, 3, shape)
    return np.where(rng.random(shape) < 0.5, on_grid, wide).astype(np.float32)


def main(out: Path) -> None:
    keras.utils.set_random_seed(0)
    _buildable_float_configs()
    for name, build in MODELS.items():
        model = build()
        record = {"quantizers": QUANTIZERS[name]}
        if name == "refuse_tiny_exponent":
            record["differences"] = tiny_differences()
        for batch, seed in ((1, 11), (8, 12)):
            x = inputs(name, model, batch, seed)
            record[f"y{batch}"] = np.asarray(model.predict(x, verbose=0, batch_size=8))
            record[f"x{batch}_0"] = x
        save_and_convert(out, name, model, record, f"{name}.inmemory.onnx")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
