"""Run under Keras 3 with hgq2 (``qkeras3_support.run_qkeras3``), never imported by pytest.

``python hgq2_hls4ml.py OUT`` builds seeded HGQ2 models and, per accepted model NAME, writes
``NAME.npz``: on 32 inputs on a 1/16 grid, HGQ2's ``predict`` (``hgq2``), the
``predict`` of hls4ml's own HGQ2 frontend (``hls4ml_hgq2``) and of hls4ml's QONNX frontend on
our QONNX (``hls4ml_qonnx``; the recipe in docs/hls4ml.md). For a model hls4ml's QONNX
frontend refuses, ``NAME.refused.txt`` holds the exception's message and the file:line that
raised it.

Accepted: activation quantizers with uniform widths, SAT overflow and RND_CONV rounding (each
one plain Quant) and HGQ2's default per-weight kernel and bias widths (stored values and a
covering Quant), on QDense, QConv2D, QMaxPooling2D and the merges QAveragePow2, QMaximum,
QMinimum; and (``hgq2_hls4ml_layers.layers_sat``) QEinsumDense, QEinsumDenseBatchnorm,
QBatchNormalization, QSubtract, QMultiply, QAdd. Refused: HGQ2's default per-element WRAP
activations, whose standard-op form hls4ml's ONNX frontend has no handler for, the tables
(QUnaryFunctionLUT, QSoftmax: Gathers) and the other layer kinds, one model each
(``hgq2_hls4ml_layers.REFUSED``). ``python hgq2_hls4ml.py OUT NAME...`` runs only those models.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import hls4ml
import keras
import numpy as np
from hgq.layers import (
    QAveragePow2,
    QConv2D,
    QDense,
    QMaximum,
    QMaxPooling2D,
    QMinimum,
    QSoftmax,
    QUnaryFunctionLUT,
)
from hgq2_hls4ml_graphs import GRAPH_REFUSED
from hgq2_hls4ml_layers import REFUSED, layers_sat, uniform_sat
from qonnx.core.modelwrapper import ModelWrapper
from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
from qonnx.transformation.gemm_to_matmul import GemmToMatMul
from qonnx.util.cleanup import cleanup_model

import qkeras2qonnx

PRECISION = "fixed<32,16>"


def dense_sat() -> keras.Model:
    inp = keras.Input((6,), name="x")
    h = QDense(8, activation="relu", iq_conf=uniform_sat(), name="fc1")(inp)
    h = QDense(3, iq_conf=uniform_sat(), name="fc2")(h)
    return keras.Model(inp, h, name="dense_sat")


def conv_sat() -> keras.Model:
    inp = keras.Input((6, 6, 2), name="image")
    h = QConv2D(3, 3, activation="relu", iq_conf=uniform_sat(), name="conv")(inp)
    h = QMaxPooling2D(2, iq_conf=uniform_sat(), name="pool")(h)
    h = keras.layers.Flatten(name="flat")(h)
    h = QDense(2, iq_conf=uniform_sat(), name="fc")(h)
    return keras.Model(inp, h, name="conv_sat")


def merge_sat() -> keras.Model:
    """QAveragePow2, QMaximum and QMinimum of two dense branches (uniform SAT inputs)."""
    a = keras.Input((6,), name="a")
    b = keras.Input((6,), name="b")
    da = QDense(4, iq_conf=uniform_sat(), name="fa")(a)
    db = QDense(4, iq_conf=uniform_sat(), name="fb")(b)
    avg = QAveragePow2(iq_confs=uniform_sat(), name="avg")([da, db])
    high = QMaximum(iq_confs=uniform_sat(), name="max")([da, db])
    h = QMinimum(iq_confs=uniform_sat(), name="min")([avg, high])
    return keras.Model([a, b], QDense(2, iq_conf=uniform_sat(), name="out")(h), name="merge_sat")


def tables_sat() -> keras.Model:
    """A tanh table and a QSoftmax on uniform SAT inputs: exact Gathers in our QONNX."""
    inp = keras.Input((6,), name="x")
    h = QDense(4, iq_conf=uniform_sat(), name="fc")(inp)
    h = QUnaryFunctionLUT("tanh", iq_conf=uniform_sat(), name="lut")(h)
    h = QSoftmax(enable_iq=True, iq_conf=uniform_sat(), name="soft")(h)
    return keras.Model(inp, QDense(2, iq_conf=uniform_sat(), name="out")(h), name="tables_sat")


def dense_wrap() -> keras.Model:
    inp = keras.Input((6,), name="x")
    h = QDense(8, activation="relu", name="fc1")(inp)
    return keras.Model(inp, QDense(3, name="fc2")(h), name="dense_wrap")


def hls4ml_qonnx(model: keras.Model, out: Path) -> object:
    """hls4ml's QONNX frontend on our QONNX of ``model`` (the recipe in docs/hls4ml.md)."""
    wrapper = cleanup_model(ModelWrapper(qkeras2qonnx.convert(model, channels_last=True)))
    wrapper = wrapper.transform(ConvertToChannelsLastAndClean()).transform(GemmToMatMul())
    wrapper = cleanup_model(wrapper)
    config = hls4ml.utils.config_from_onnx_model(
        wrapper, granularity="name", backend="Vivado", default_precision=PRECISION
    )
    hls = hls4ml.converters.convert_from_onnx_model(
        wrapper, output_dir=str(out), io_type="io_parallel", backend="Vivado", hls_config=config
    )
    hls.compile()
    return hls


def hls4ml_hgq2(model: keras.Model, out: Path) -> object:
    hls = hls4ml.converters.convert_from_keras_model(
        model,
        output_dir=str(out),
        backend="Vivado",
        io_type="io_parallel",
        hls_config={"Model": {"Precision": PRECISION, "ReuseFactor": 1}},
    )
    hls.compile()
    return hls


def main(out: Path, only: list[str] | None = None) -> None:
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(5)
    for build in (dense_sat, conv_sat, merge_sat, layers_sat, dense_wrap, tables_sat,
                  *REFUSED.values(), *GRAPH_REFUSED.values()):  # fmt: skip
        model = build()
        if only and model.name not in only:
            continue
        try:
            hls = hls4ml_qonnx(model, out / f"{model.name}_qonnx")
        except Exception as exc:
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{Path(frame.filename).name}:{frame.lineno}"
            (out / f"{model.name}.refused.txt").write_text(f"{exc}\n{where}")
            continue
        x = [
            (rng.integers(-96, 97, (32, *t.shape[1:])) / 16).astype(np.float32)
            for t in model.inputs
        ]
        x = x[0] if len(x) == 1 else x
        theirs = hls4ml_hgq2(model, out / f"{model.name}_hgq2").predict(x)
        np.savez(
            out / f"{model.name}.npz",
            hgq2=np.asarray(model.predict(x, verbose=0)).reshape(32, -1),
            hls4ml_hgq2=np.asarray(theirs).reshape(32, -1),
            hls4ml_qonnx=np.asarray(hls.predict(x)).reshape(32, -1),
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
