"""Shared helpers of the qkeras2qonnx tests: seeded weights, an independent quantizer count,
and the one comparison every test uses (QONNX executed by qonnx vs QKeras itself)."""

from __future__ import annotations

import inspect

import numpy as np

import qkeras2qonnx  # noqa: F401  (sets TF_USE_LEGACY_KERAS before TensorFlow is imported)
import support
from qonnx_ingest.execute import executor_for
from qonnx_ingest.finish import QUANT_OP_TYPES
from qonnx_ingest.verification import run_converted

CORPUS = support.CORPUS / "qkeras"
SAMPLES = 32


def keras():
    import tf_keras

    return tf_keras


def set_seeded_weights(model, seed: int) -> None:
    """Random trained-looking weights; kernels get a different spread per output channel so
    that alpha='auto' scales differ per channel."""
    rng = np.random.default_rng(seed)
    for layer in _all_layers(model):
        values = []
        for w in layer.weights:
            shape = tuple(w.shape)
            name = w.name.split("/")[-1]
            if not w.dtype.is_floating:  # e.g. QConv2DBatchnorm's iteration counter
                values.append(w.numpy())
            elif name.startswith(("moving_variance", "gamma")):
                values.append(rng.uniform(0.5, 1.5, shape))
            elif len(shape) >= 2:
                spread = rng.uniform(0.2, 1.5, shape[-1])
                values.append(rng.normal(0.0, 0.5, shape) * spread)
            else:
                values.append(rng.normal(0.0, 0.3, shape))
        if values:
            layer.set_weights(
                [
                    np.asarray(v).astype(w.dtype.as_numpy_dtype)
                    for v, w in zip(values, layer.weights, strict=True)
                ]
            )


def count_quantizers(model) -> int:
    """Quantizers QKeras applies at inference, counted from the QKeras model alone."""
    count = 0
    for layer in _all_layers(model):
        if type(layer).__name__ in _RECURRENT_PER_STEP:
            count += _recurrent_quantizers(layer)
            continue
        # A batchnorm-folded conv always adds (and quantizes) its folded bias.
        folded = type(layer).__name__.endswith("Batchnorm")
        for attr in (
            "kernel_quantizer",
            "depthwise_quantizer",
            "pointwise_quantizer",
            "bias_quantizer",
        ):
            if attr == "bias_quantizer" and not (folded or getattr(layer, "use_bias", False)):
                continue
            if getattr(layer, attr, None):
                count += 1
        if type(layer).__name__ == "QBatchNormalization":
            for attr, present in (
                ("gamma_quantizer", layer.scale),
                ("beta_quantizer", layer.center),
                ("mean_quantizer", True),
                ("variance_quantizer", True),
            ):
                count += bool(present and getattr(layer, attr))
            continue
        activation = getattr(layer, "quantizer", None) or getattr(layer, "activation", None)
        if _is_quantizer_object(activation):
            count += 1
    return count


# Quantizer applications per step of QKeras 0.9's cells (qrecurrent.py): state, activation,
# recurrent activation. LSTM quantizes c and h, and applies tanh to the candidate and to c.
_RECURRENT_PER_STEP = {"QSimpleRNN": (1, 1, 0), "QLSTM": (2, 2, 3), "QGRU": (1, 1, 2)}


def _recurrent_quantizers(layer) -> int:
    """Unrolled: kernel, recurrent kernel and bias once; the rest once per application."""
    cell = layer.cell
    count = sum(bool(getattr(cell, a)) for a in ("kernel_quantizer", "recurrent_quantizer"))
    count += bool(cell.use_bias and cell.bias_quantizer)
    state, act, ract = _RECURRENT_PER_STEP[type(layer).__name__]
    per_step = state * bool(cell.state_quantizer) + act * _is_quantizer_object(cell.activation)
    per_step += ract * _is_quantizer_object(getattr(cell, "recurrent_activation", None))
    return count + per_step * int(layer.input_shape[1])


NON_UNIFORM = ("quantized_po2", "quantized_relu_po2", "quantized_ulaw")


def count_non_uniform(model) -> int:
    """Weight quantizers of a non-uniform class: QONNX has no node for them (annotation lost)."""
    count = 0
    for layer in _all_layers(model):
        for name, value in vars(layer).items():
            if not name.endswith("_quantizer_internal") or type(value).__name__ not in NON_UNIFORM:
                continue
            unused = {
                "gamma": not getattr(layer, "scale", True),
                "beta": not getattr(layer, "center", True),
            }
            count += not unused.get(name.split("_")[0], False)
    return count


def quant_nodes(onnx_model) -> list:
    return [n for n in onnx_model.graph.node if n.op_type in QUANT_OP_TYPES]


def assert_matches_qkeras(
    model,
    onnx_model,
    *,
    batch: int,
    samples: int = SAMPLES,
    low: float = -2.0,
    high: float = 2.0,
    seed: int = 0,
    step: float | None = None,
) -> None:
    """QONNX == QKeras ``model(x)`` on ``samples`` seeded uniform inputs, fed ``batch`` at a
    time, within 1e-6 relative.

    The first batch runs in qonnx's executor (the reference semantics of the QONNX file);
    every batch, the first included, runs in onnxruntime on the form ``--verify`` runs
    (``run_converted``: Quant nodes as QCDQ or standard ops computing qonnx's quantizers,
    which test_quant_lowering pins bit for bit; one session, so a float MatMul on constant
    weights may round its last bit differently from the executor's one session per node).
    qonnx's executor costs seconds per call on an unrolled recurrent model, so it no longer
    runs all 32 samples; a model with no onnxruntime form runs every batch in it.

    ``step`` puts the inputs on that grid (e.g. 8-bit pixels), so that a first conv with
    quantized weights sums exact products: with arbitrary floats its accumulation order (TF vs
    onnxruntime) changes the last bits, which a following quantizer can turn into one step.
    """
    rng = np.random.default_rng(seed)
    names = [i.name for i in onnx_model.graph.input]
    inputs = model.inputs or _called_inputs(model)
    assert len(names) == len(inputs)
    feeds, refs = [], []
    for _ in range(0, samples, batch):
        xs = [rng.uniform(low, high, (batch, *t.shape[1:])).astype(np.float32) for t in inputs]
        if step is not None:
            xs = [(np.round(x / step) * step).astype(np.float32) for x in xs]
        ref = model(xs if len(xs) > 1 else xs[0], training=False)
        refs.append([np.asarray(r) for r in (ref if isinstance(ref, list | tuple) else [ref])])
        feeds.append(dict(zip(names, xs, strict=True)))
    outputs = [o.name for o in onnx_model.graph.output]
    run = executor_for(onnx_model, feeds[0])  # qonnx's executor, static for this batch size
    executed = [run(feeds[0])[o] for o in outputs]
    _assert_close(executed, refs[0])
    (lowered,), runner = run_converted(onnx_model, feeds[:1])
    if runner == "qonnx's executor":  # no onnxruntime form: every batch in qonnx's executor
        for feed, ref in zip(feeds[1:], refs[1:], strict=True):
            _assert_close([run(feed)[o] for o in outputs], ref)
        return
    _assert_close([lowered[o] for o in outputs], refs[0])
    if len(feeds) > 1:
        rest, _ = run_converted(onnx_model, feeds[1:])
        for got, ref in zip(rest, refs[1:], strict=True):
            _assert_close([got[o] for o in outputs], ref)


def _assert_close(outputs: list, ref: list) -> None:
    assert len(outputs) == len(ref)
    for r, g in zip(ref, outputs, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-6 * float(np.max(np.abs(r))))


def _called_inputs(model) -> list:
    """A subclassed model has no ``inputs``: the specs of the batch it was first called on."""
    spec = model._saved_model_inputs_spec
    return list(spec) if isinstance(spec, list | tuple) else [spec]


def _all_layers(model):
    for layer in model.layers:
        if hasattr(layer, "layers"):
            yield from _all_layers(layer)
        elif type(layer).__name__ == "PruneLowMagnitude":  # tensorflow-model-optimization
            yield layer.layer
        else:
            yield layer


def _is_quantizer_object(obj) -> bool:
    return (
        obj is not None
        and not inspect.isfunction(obj)
        and type(obj).__module__.split(".")[0] == "qkeras"
    )


def float32_neighbours(points, ulps: int = 3) -> np.ndarray:
    """``points`` (as float32) and their ``ulps`` float32 neighbours on each side, without
    subnormals: TensorFlow's CPU kernels flush them to zero, onnxruntime and numpy do not."""
    points = np.asarray(points, dtype=np.float32)
    out, up, down = [points], points, points
    for _ in range(ulps):
        up, down = np.nextafter(up, np.float32(np.inf)), np.nextafter(down, np.float32(-np.inf))
        out += [up, down]
    x = np.concatenate(out)
    return x[(x == 0) | (np.abs(x) >= np.finfo(np.float32).tiny)]
