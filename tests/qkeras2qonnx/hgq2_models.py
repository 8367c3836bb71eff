"""Run under Keras 3 with hgq2 (``hgq2_support.run_hgq2``), never imported by pytest itself.

``python hgq2_models.py OUT`` builds the seeded HGQ2 models of the HGQ2 tests and writes, per
model NAME: ``NAME.npz`` with seeded inputs (``x1_J`` / ``x8_J`` for input J) and HGQ2's own
``predict`` at batch 1 and 8 (``y1 y8``), ``quantizers`` (how many quantizers HGQ2 applies,
counted from the layers) and model facts the tests pin; ``NAME.inmemory.onnx`` from
``qkeras2qonnx.convert(model)``, or ``NAME.error.txt`` with the ConversionError it raised;
``NAME.inexact.txt`` the InexactSum warnings of that conversion, one a line.
``inexact_sum.keras`` is that model saved for the command line; ``saved.keras`` the conv
model saved, reloaded here (its predict checked equal) and left for the command-line test;
``conv2d_pool.channels_last.onnx`` its ``channels_last=True`` form. ``multi_input.keras`` is
converted by path into ``multi_input.path.onnx`` and, after the other models, ``.again.onnx``.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import keras
import numpy as np
from hgq.config import LayerConfigScope, QuantizerConfig
from hgq.layers import (
    QAdd,
    QAffinedUnaryFunctionLUT,
    QAveragePooling1D,
    QAveragePooling2D,
    QAveragePooling3D,
    QAveragePow2,
    QBatchNormalization,
    QBatchNormDense,
    QConv1D,
    QConv2D,
    QConv3D,
    QDense,
    QDot,
    QEinsum,
    QEinsumDense,
    QEinsumDenseBatchnorm,
    QGlobalAveragePooling3D,
    QGlobalMaxPooling1D,
    QGlobalMaxPooling3D,
    QLinformerAttention,
    QMaxPooling2D,
    QMaxPooling3D,
    QMeanPow2,
    QMultiHeadAttention,
    QSoftmax,
    QSum,
    QUnaryFunctionLUT,
)
from hgq.quantizer import Quantizer
from hgq2_builder_io import convert_again

import qkeras2qonnx
from qkeras2qonnx.hgq2_layers.hgq2_sums import InexactSum
from qonnx_ingest.errors import ConversionError

ROUNDS = ("TRN", "RND", "RND_CONV", "TRN_ZERO", "RND_ZERO", "RND_MIN_INF", "RND_INF")


def dense() -> keras.Model:
    inp = keras.Input((6,), name="x")
    h = QDense(8, activation="relu", name="fc1")(inp)
    h = QDense(4, enable_oq=True, name="fc2")(h)
    return keras.Model(inp, h, name="dense")


def conv2d_pool() -> keras.Model:
    inp = keras.Input((8, 8, 2), name="image")
    h = QConv2D(4, 3, activation="relu", name="conv1")(inp)
    h = QMaxPooling2D(2, name="max")(h)
    h = QConv2D(3, 2, name="conv2")(h)
    h = QAveragePooling2D(2, name="avg")(h)
    h = keras.layers.Flatten(name="flat")(h)
    h = QDense(2, name="fc")(h)
    return keras.Model(inp, h, name="conv2d_pool")


def conv1d() -> keras.Model:
    inp = keras.Input((10, 3), name="signal")
    h = QConv1D(4, 3, padding="same", activation="relu", name="conv1")(inp)
    h = QConv1D(2, 3, strides=2, name="conv2")(h)
    h = QGlobalMaxPooling1D(name="gmax")(h)
    h = QDense(2, name="fc")(h)
    return keras.Model(inp, h, name="conv1d")


def batchnorm() -> keras.Model:
    inp = keras.Input((6,), name="x")
    h = QBatchNormDense(6, activation="relu", name="bn_dense")(inp)
    h = QDense(5, name="fc")(h)
    h = QBatchNormalization(name="bn")(h)
    h = QDense(2, name="out")(h)
    model = keras.Model(inp, h, name="batchnorm")
    _trained_statistics(model, seed=3)
    return model


def _trained_statistics(model: keras.Model, seed: int) -> None:
    """Batch-norm statistics and affine weights away from 0 / 1: folding must use them."""
    rng = np.random.default_rng(seed)
    for w in model.weights:
        if w.path.endswith(("moving_mean", "beta")):
            w.assign(rng.normal(0, 0.5, w.shape).astype("float32"))
        elif w.path.endswith(("moving_variance", "gamma")):
            w.assign(rng.uniform(0.3, 2.0, w.shape).astype("float32"))


def trained() -> keras.Model:
    """Per-weight widths after three epochs with a strong EBOPs penalty: they differ, and
    some weights reach 0 bits (those output 0)."""
    with LayerConfigScope(beta0=3e-3):
        inp = keras.Input((8,), name="x")
        h = QDense(8, activation="relu", kq_conf=QuantizerConfig("kbi", "weight", b0=3))(inp)
        h = QDense(2, kq_conf=QuantizerConfig("kbi", "weight", b0=3), name="out")(h)
    model = keras.Model(inp, h, name="trained")
    rng = np.random.default_rng(0)
    x = rng.normal(0, 1, (256, 8)).astype("float32")
    y = np.stack([x[:, :2].sum(1), x[:, 2] - x[:, 3]], 1)
    model.compile(keras.optimizers.Adam(0.05), "mse")
    model.fit(x, y, epochs=3, batch_size=8, verbose=0)
    return model


def modes() -> keras.Model:
    """Every rounding mode under WRAP, SAT and SAT_SYM, and WRAP_SM, each with its own random
    per-element (k, i, f), some of zero width; two uniform saturating ones (plain Quant)."""
    inp = keras.Input((12,), name="x")
    branches = []
    for overflow in ("WRAP", "SAT", "SAT_SYM"):
        for rnd in ROUNDS:
            branches.append(_quantizer(rnd, overflow)(inp))
    for rnd in ("RND", "RND_CONV"):
        branches.append(_quantizer(rnd, "WRAP_SM")(inp))
    branches.append(_quantizer("RND_CONV", "SAT", name="uniform_sat")(inp))
    branches.append(_quantizer("TRN", "SAT_SYM", name="uniform_sat_sym")(inp))
    kbi = Quantizer(q_type="kbi", place="datalane", b0=4, i0=1, round_mode="RND",
                    overflow_mode="SAT", name="kbi_sat")  # fmt: skip
    branches.append(kbi(inp))
    out = keras.layers.Concatenate(name="all")(branches)
    model = keras.Model(inp, out, name="modes")
    rng = np.random.default_rng(7)
    for layer in model.layers:
        inner = getattr(layer, "quantizer", None)
        if inner is None or layer.name.startswith("uniform"):
            continue
        shape = inner._k.shape
        inner._k.assign(rng.integers(0, 2, shape).astype("uint8"))
        inner._i.assign(rng.integers(-2, 3, shape).astype("float32"))
        if hasattr(inner, "_f"):
            inner._f.assign(rng.integers(-1, 4, shape).astype("float32"))
        else:
            inner._b.assign(rng.integers(0, 5, shape).astype("float32"))
    return model


def _quantizer(rnd: str, overflow: str, name: str | None = None) -> Quantizer:
    return Quantizer(q_type="kif", place="datalane", i0=1, f0=2, round_mode=rnd,
                     overflow_mode=overflow, name=name or f"{rnd}_{overflow}".lower())  # fmt: skip


def multi_input() -> keras.Model:
    a = keras.Input((6,), name="a")
    b = keras.Input((5,), name="b")
    da = QDense(4, name="fa")(a)
    db = QDense(4, name="fb")(b)
    h = QAdd(name="add")([da, db])
    h = QUnaryFunctionLUT("relu", name="lut")(h)
    h = keras.layers.Concatenate(name="cat")([h, QDense(2, name="fb2")(b)])
    h = QDense(3, name="out")(h)
    return keras.Model([a, b], h, name="multi_input")


def einsum() -> keras.Model:
    """QEinsumDense, then QEinsumDenseBatchnorm with trained-looking statistics (folded)."""
    inp = keras.Input((6,), name="x")
    h = QEinsumDense("ab,bc->ac", output_shape=4, bias_axes="c", activation="relu", name="ed")(inp)
    h = QEinsumDenseBatchnorm("ab,bc->ac", output_shape=3, bias_axes="c", name="ed_bn")(h)
    h = QDense(2, name="out")(h)
    model = keras.Model(inp, h, name="einsum")
    _trained_statistics(model, seed=4)
    return model


def tables() -> keras.Model:
    """Float functions of quantized inputs, as HGQ2 tabulates them: tanh with per-element
    input widths, sigmoid with uniform ones, an affine tanh (trained-looking scale and bias)."""
    inp = keras.Input((6,), name="x")
    h = QDense(6, name="fc")(inp)
    a = QUnaryFunctionLUT("tanh", name="lut_tanh")(h)
    b = QUnaryFunctionLUT("sigmoid", allow_heterogeneous_input=False, name="lut_sigmoid")(h)
    c = QAffinedUnaryFunctionLUT("tanh", name="lut_affine")(h)
    h = keras.layers.Concatenate(name="cat")([a, b, c])
    model = keras.Model(inp, QDense(3, name="out")(h), name="tables")
    lut = model.get_layer("lut_affine")
    lut.scale.assign(np.array([0.75], "float32"))
    lut.bias.assign(np.array([-0.25], "float32"))
    return model


def softmax() -> keras.Model:
    """QSoftmax (stable, HGQ2's defaults) on a vector and along the last axis of a matrix, and
    an unstable one after its own input quantizer."""
    inp = keras.Input((8,), name="x")
    h = QDense(6, name="fc")(inp)
    a = QSoftmax(name="soft")(h)
    m = keras.layers.Reshape((2, 3), name="rows")(h)
    b = keras.layers.Flatten(name="flat")(QSoftmax(axis=-1, name="soft_rows")(m))
    c = QSoftmax(stable=False, enable_iq=True, name="soft_unstable")(h)
    h = keras.layers.Concatenate(name="cat")([a, b, c])
    return keras.Model(inp, QDense(3, name="out")(h), name="softmax")


def reductions() -> keras.Model:
    """QSum, QMeanPow2, QAveragePow2, QEinsum and QDot on two (4, 6) inputs."""
    a = keras.Input((4, 6), name="a")
    b = keras.Input((4, 6), name="b")
    s = QSum(axes=-1, scale=0.5, name="sum")(a)
    m = QMeanPow2(axes=(1, 2), keepdims=True, name="mean")(b)
    avg = QAveragePow2(name="avg")([a, b])
    ein = QEinsum("bij,bkj->bik", name="einsum")([a, b])
    dot = QDot(axes=-1, name="dot")([a, b])
    flat = [keras.layers.Flatten(name=f"flat{j}")(t) for j, t in enumerate((s, m, avg, ein, dot))]
    h = keras.layers.Concatenate(name="cat")(flat)
    return keras.Model([a, b], QDense(3, name="out")(h), name="reductions")


def einsum_output() -> keras.Model:
    """A QEinsum as the model output: tf2onnx lowers it with run-time shape arithmetic that
    onnx's inference cannot follow, so the output shape comes from Keras (hls4ml's
    test_qeinsum.py equation)."""
    a = keras.Input((7, 8), name="a")
    b = keras.Input((8, 9), name="b")
    return keras.Model([a, b], QEinsum("xbi,xio->xbo", name="einsum")([a, b]), name="einsum_out")


def conv3d() -> keras.Model:
    inp = keras.Input((4, 4, 4, 2), name="volume")
    h = QConv3D(3, 2, padding="same", activation="relu", name="conv")(inp)
    h = QMaxPooling3D(2, name="max")(h)
    a = keras.layers.Flatten(name="flat")(QAveragePooling3D(2, name="avg")(h))
    b = QGlobalMaxPooling3D(name="gmax")(h)
    c = QGlobalAveragePooling3D(name="gavg")(h)
    h = keras.layers.Concatenate(name="cat")([a, b, c])
    return keras.Model(inp, QDense(2, name="fc")(h), name="conv3d")


def refuse_softmax_unstable() -> keras.Model:
    """exp of a float input: no grid, so no exact table."""
    inp = keras.Input((4,), name="x")
    h = QSoftmax(stable=False, name="soft")(QDense(3, name="fc")(inp))
    return keras.Model(inp, h, name="refuse_softmax_unstable")


def attention() -> keras.Model:
    """QMultiHeadAttention, self-attention (query = value = key): sequence 4, dimension 8, two
    heads; a QDense before it gives the projections a quantized, varied input."""
    inp = keras.Input((4, 8), name="x")
    h = QEinsumDense("bnc,cC->bnC", output_shape=(4, 8), bias_axes="C", name="embed")(inp)
    h = QMultiHeadAttention(num_heads=2, key_dim=4, name="mha")(h, h)
    return keras.Model(inp, h, name="attention")


def cross_attention() -> keras.Model:
    """QMultiHeadAttention with query (4, 8), value (3, 6) and key (3, 5) all different
    (hgq2 0.2.0 cannot build it with ``enable_oq=True``: its output quantizer is never
    built, ``Sublayer mha_oq is not built``)."""
    q = keras.Input((4, 8), name="q")
    v = keras.Input((3, 6), name="v")
    k = keras.Input((3, 5), name="k")
    mha = QMultiHeadAttention(num_heads=2, key_dim=4, value_dim=3, name="mha")
    return keras.Model([q, v, k], mha(q, v, key=k), name="cross_attention")


def linformer() -> keras.Model:
    """QLinformerAttention: key and value (sequence 6) projected to 3 along the sequence, then
    QMultiHeadAttention's parts; query (4, 8)."""
    q = keras.Input((4, 8), name="q")
    v = keras.Input((6, 8), name="v")
    h = QLinformerAttention(num_heads=2, lin_kv_proj_dim=3, key_dim=4, name="lin")(q, v)
    return keras.Model([q, v], h, name="linformer")


def refuse_attention_mask() -> keras.Model:
    inp = keras.Input((4, 8), name="x")
    h = QMultiHeadAttention(num_heads=2, key_dim=4, name="mha")(inp, inp, use_causal_mask=True)
    return keras.Model(inp, h, name="refuse_attention_mask")


def minifloat() -> keras.Model:
    """HGQ2's minifloat quantizer on a data path (qonnx's FloatQuant; more models in
    ``hgq2_float_models.py``). hgq2 0.2.0 cannot build it from a config
    (``QuantizerConfig("float", ...)`` passes ``is_weight``, which FloatPointQuantizer
    rejects), so the Quantizer gets the internal quantizer directly."""
    from hgq.quantizer.internal import FloatPointQuantizer

    inp = keras.Input((4,), name="x")
    q = Quantizer(q_type="kif", place="datalane", name="mf")
    q.quantizer = FloatPointQuantizer(2, 4, homogeneous_axis=(0,), name="mf_float")
    h = QDense(2, name="fc")(q(inp))
    return keras.Model(inp, h, name="minifloat")


def refuse_tanh() -> keras.Model:
    """tanh before the next layer's input quantizer (a last-bit difference can round away)."""
    inp = keras.Input((4,), name="x")
    h = QDense(2, activation="tanh", name="fc")(inp)
    return keras.Model(inp, QDense(2, name="out")(h), name="refuse_tanh")


def sigmoid_out() -> keras.Model:
    """A float sigmoid on the model's output, no quantizer after it: within 1e-6."""
    inp = keras.Input((6,), name="x")
    h = QDense(4, activation="relu", name="fc")(inp)
    return keras.Model(inp, QDense(1, activation="sigmoid", name="out")(h), name="sigmoid_out")


def inexact_sum() -> keras.Model:
    """A QDense whose partial sums can pass 2^24 steps: 64 inputs of (i, f) = (10, 10) times
    weights with 8 fractional bits (the converter warns, InexactSum)."""
    inp = keras.Input((64,), name="x")
    iq = QuantizerConfig(
        "kif", "datalane", i0=10, f0=10, round_mode="RND_CONV", overflow_mode="SAT",
        homogeneous_axis=None, heterogeneous_axis=(),
    )  # fmt: skip
    kq = QuantizerConfig("kif", "weight", i0=1, f0=8, round_mode="RND_CONV", overflow_mode="SAT")
    h = QDense(1, iq_conf=iq, kq_conf=kq, name="wide")(inp)
    return keras.Model(inp, h, name="inexact_sum")


def refuse_avg3() -> keras.Model:
    inp = keras.Input((6, 2), name="x")
    h = keras.layers.Flatten(name="flat")(QAveragePooling1D(3, name="avg3")(inp))
    return keras.Model(inp, QDense(2, name="fc")(h), name="refuse_avg3")


def einsum_axes() -> keras.Model:
    """QEinsumDense(+Batchnorm) contracting each axis position of a rank-3 input (b, n, c):
    the first (``bnc,nN->bNc``, the MLP-Mixer's token mixing), the last, both at once,
    a per-position kernel (``bnc,ncC->bnC``) and ``bnc,n->bc`` (a sum over tokens)."""
    inp = keras.Input((4, 6), name="x")
    branches = [
        QEinsumDense("bnc,nN->bNc", output_shape=(5, 6), bias_axes="N", name="first")(inp),
        QEinsumDenseBatchnorm("bnc,nN->bNc", (3, 6), bias_axes="N", name="first_bn")(inp),
        QEinsumDenseBatchnorm("bnc,cC->bnC", (4, 3), bias_axes="C", name="last_bn")(inp),
        QEinsumDense("bnc,ncC->bnC", output_shape=(4, 2), bias_axes="nC", name="per_n")(inp),
        QEinsumDenseBatchnorm("bnc,ncN->bN", output_shape=3, bias_axes="N", name="both_bn")(inp),
        QEinsumDense("bnc,n->bc", output_shape=6, name="tokens")(inp),
    ]
    flat = [keras.layers.Flatten(name=f"flat{j}")(t) for j, t in enumerate(branches)]
    h = keras.layers.Concatenate(name="cat")(flat)
    model = keras.Model(inp, QDense(3, name="out")(h), name="einsum_axes")
    _trained_statistics(model, seed=5)
    return model


def op_nodes() -> keras.Model:
    """Keras 3 operation nodes between HGQ2 layers: slicing (``x[:, 0]``, ``x[..., 1:3]``),
    ``keras.ops`` concatenate / sum / mean (over 8 rows: an exact division) and arithmetic
    ``x * 2 + y``; none is a layer."""
    a = keras.Input((8, 4), name="a")
    b = keras.Input((4,), name="b")
    h = QDense(4, name="fc")(a)
    first = h[:, 0]
    middle = h[..., 1:3]
    joined = keras.ops.concatenate([first, b], axis=-1)
    summed = keras.ops.sum(middle, axis=1)
    mean = keras.ops.mean(h, axis=1)
    mixed = first * 2 + b
    h = keras.ops.concatenate([joined, summed, mean, mixed], axis=-1)
    return keras.Model([a, b], QDense(3, name="out")(h), name="op_nodes")


def refuse_custom_op() -> keras.Model:
    """An operation node of a class from user code: it could compute anything."""

    class Twice(keras.Operation):
        def call(self, x):
            return x * 2

        def compute_output_spec(self, x):
            return keras.KerasTensor(x.shape, x.dtype)

    inp = keras.Input((4,), name="x")
    h = Twice(name="twice")(QDense(3, name="fc")(inp))
    return keras.Model(inp, QDense(2, name="out")(h), name="refuse_custom_op")


MODELS = {
    "dense": dense,
    "conv2d_pool": conv2d_pool,
    "conv1d": conv1d,
    "batchnorm": batchnorm,
    "trained": trained,
    "modes": modes,
    "multi_input": multi_input,
    "einsum": einsum,
    "sigmoid_out": sigmoid_out,
    "tables": tables,
    "softmax": softmax,
    "reductions": reductions,
    "conv3d": conv3d,
    "inexact_sum": inexact_sum,
    "einsum_output": einsum_output,
    "einsum_axes": einsum_axes,
    "op_nodes": op_nodes,
    "minifloat": minifloat,
    "refuse_softmax_unstable": refuse_softmax_unstable,
    "attention": attention,
    "cross_attention": cross_attention,
    "linformer": linformer,
    "refuse_attention_mask": refuse_attention_mask,
    "refuse_tanh": refuse_tanh,
    "refuse_avg3": refuse_avg3,
    "refuse_custom_op": refuse_custom_op,
}


def inputs(model: keras.Model, batch: int, seed: int) -> list[np.ndarray]:
    """Half on a fine grid (ties of every quantizer's rounding), half wide normal (overflow)."""
    rng = np.random.default_rng(seed)
    out = []
    for tensor in model.inputs:
        shape = (batch, *tensor.shape[1:])
        grid = rng.integers(-96, 97, shape) / 16.0
        wide = rng.normal(0, 3, shape)
        out.append(np.where(rng.random(shape) < 0.5, grid, wide).astype(np.float32))
    return out


def count_quantizers(model: keras.Model) -> int:
    """The quantizers HGQ2 applies, read from the layers."""
    return _count(model.layers)


def _count(layers: list) -> int:
    n = 0
    for layer in layers:
        if isinstance(layer, QMultiHeadAttention):  # its parts' quantizers, and its own oq
            parts = ("_query_dense", "_key_dense", "_value_dense", "_softmax", "_output_dense")
            parts += ("_lin_k_proj", "_lin_v_proj") if hasattr(layer, "_lin_k_proj") else ()
            n += _count([getattr(layer, p) for p in parts]) + bool(layer.enable_oq)
            continue
        if isinstance(layer, Quantizer):
            n += 1
            continue
        n += sum(getattr(layer, attr, None) is not None for attr in ("kq", "bq"))
        if getattr(layer, "enable_iq", False) and hasattr(layer, "iq"):
            n += len(layer.iq) if hasattr(layer.iq, "quantizers") else 1
        n += bool(getattr(layer, "enable_oq", False))
    return n


def facts(name: str, model: keras.Model) -> dict:
    if name == "inexact_sum":
        wide = model.get_layer("wide")
        return {"kernel": np.asarray(wide.qkernel), "bias": np.asarray(wide.qbias)}
    if name != "trained":
        return {}
    bits = np.concatenate(
        [np.asarray(layer.kq.quantizer.b).ravel() for layer in model.layers if hasattr(layer, "kq")]
    )
    return {"kernel_bits": bits}


def main(out: Path, only: list[str] | None = None) -> None:
    keras.utils.set_random_seed(0)
    for name, build in MODELS.items():
        if only and name not in only:
            continue
        model = build()
        record = {"quantizers": count_quantizers(model), **facts(name, model)}
        for batch, seed in ((1, 11), (8, 12)):
            xs = inputs(model, batch, seed)
            record[f"y{batch}"] = np.asarray(model.predict(xs, verbose=0))
            record.update({f"x{batch}_{j}": x for j, x in enumerate(xs)})
        np.savez(out / f"{name}.npz", **record)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                qkeras2qonnx.convert(model, out / f"{name}.inmemory.onnx")
            except ConversionError as exc:
                (out / f"{name}.error.txt").write_text(str(exc))
        inexact = [str(w.message) for w in caught if issubclass(w.category, InexactSum)]
        (out / f"{name}.inexact.txt").write_text("".join(f"{line}\n" for line in inexact))
        if name == "inexact_sum":
            model.save(out / "inexact_sum.keras")
        if name == "multi_input":  # by path now, and again after the other models
            model.save(out / "multi_input.keras")
            qkeras2qonnx.convert(out / "multi_input.keras", out / "multi_input.path.onnx")
        if name == "conv2d_pool":
            _save_reload(model, out / "saved.keras", record)
            qkeras2qonnx.convert(model, out / "conv2d_pool.channels_last.onnx", channels_last=True)
    if (out / "multi_input.keras").exists():
        convert_again(out, "multi_input", out / "multi_input.keras")


def _save_reload(model: keras.Model, path: Path, record: dict) -> None:
    model.save(path)
    again = keras.models.load_model(path)
    got = again.predict(record["x8_0"], verbose=0)
    assert np.array_equal(got, record["y8"]), "the reloaded model predicts differently"


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
