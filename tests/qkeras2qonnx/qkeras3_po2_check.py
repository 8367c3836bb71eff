"""Run under qkeras-v3 (``qkeras3_support.run_qkeras3``): po2 / relu_po2 / ulaw activations
converted in memory give qkeras-v3's predict bits on powers of two, log2 midpoints, their
float32 neighbours, zero, values beyond max_value and seeded random inputs; exits non-zero
(naming the quantizer) otherwise."""

import sys
import warnings

import keras
import numpy as np
from qkeras import QActivation, quantized_po2, quantized_relu_po2, quantized_ulaw

import qkeras2qonnx
from qonnx_ingest.execute import execute_qonnx

F32 = np.float32


def _inputs() -> np.ndarray:
    k = np.arange(-24, 12.0)
    points = np.concatenate([2**k, 2 ** (k + 0.5), -(2**k), -(2 ** (k + 0.5)), [0, 1e-7, 6, 7]])
    points = points.astype(F32)
    out, up, down = [points], points, points
    for _ in range(3):
        up, down = np.nextafter(up, F32(np.inf)), np.nextafter(down, F32(-np.inf))
        out += [up, down]
    x = np.concatenate(out)
    x = x[(x == 0) | (np.abs(x) >= np.finfo(F32).tiny)]
    x = np.concatenate([x, np.random.default_rng(0).uniform(-10, 10, 2048).astype(F32)])
    return np.concatenate([x, np.zeros((-x.size) % 4096, F32)]).reshape(8, -1)


def main() -> None:
    warnings.simplefilter("ignore")
    x = _inputs()
    quantizers = [
        quantized_po2(4),
        quantized_po2(4, log2_rounding="floor"),
        quantized_relu_po2(5, max_value=6, negative_slope=0.25),
        quantized_ulaw(8, 0),
    ]
    for q in quantizers:
        inp = keras.Input((x.shape[1],), name="x")
        model = keras.Model(inp, QActivation(q, name="qact")(inp))
        onnx_model = qkeras2qonnx.convert(model)
        ref = model.predict(x, verbose=0)
        got = execute_qonnx(onnx_model, {"x": x})[onnx_model.graph.output[0].name]
        bad = got.view(np.uint32) != ref.view(np.uint32)
        if bad.any():
            sys.exit(f"{type(q).__name__}: {bad.sum()} of {x.size} differ, e.g. x={x[bad][:4]}")


if __name__ == "__main__":
    main()
