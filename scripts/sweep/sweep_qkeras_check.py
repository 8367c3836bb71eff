"""How the sweep checks a conversion: seeded trained-looking weights, QONNX (qonnx executor)
against QKeras ``predict`` at batch 1 and 8 within 1e-6 relative, one result cell per attempt,
and whether the model itself is deterministic."""

from __future__ import annotations

import traceback
from pathlib import Path

STEP = 1 / 16  # inputs on a grid: exact first-layer products whatever the summation order
SAMPLES = 16


def seed_weights(model, seed: int) -> None:
    """Trained-looking weights: per-output-channel spread so alpha='auto' scales differ."""
    import numpy as np

    rng = np.random.default_rng(seed)
    for layer in model.layers:
        values = []
        for w in layer.weights:
            dtype = np.dtype(getattr(w.dtype, "as_numpy_dtype", w.dtype))
            name = w.name.split("/")[-1].split(":")[0]
            shape = tuple(w.shape)
            current = np.asarray(w.numpy() if hasattr(w, "numpy") else w)
            if not np.issubdtype(dtype, np.floating):
                values.append(current)
            elif name.startswith(("moving_variance", "gamma")):
                values.append(rng.uniform(0.5, 1.5, shape).astype(dtype))
            elif len(shape) >= 2:
                spread = rng.uniform(0.2, 1.5, shape[-1])
                values.append((rng.normal(0.0, 0.5, shape) * spread).astype(dtype))
            else:
                values.append(rng.normal(0.0, 0.3, shape).astype(dtype))
        if values:
            layer.set_weights(values)


def compare(model, onnx_model, seed: int = 0) -> tuple[bool, float]:
    """QONNX vs QKeras predict at batch 1 and 8: (within 1e-6 relative, max abs error)."""
    import numpy as np

    from qonnx_ingest.execute import execute_qonnx

    rng = np.random.default_rng(seed)
    ok, worst = True, 0.0
    names = [i.name for i in onnx_model.graph.input]
    for batch in (1, 8):
        xs = [
            np.round(rng.uniform(-2, 2, (SAMPLES, *t.shape[1:])) / STEP).astype(np.float32) * STEP
            for t in model.inputs
        ]
        ref = model.predict(xs if len(xs) > 1 else xs[0], batch_size=batch, verbose=0)
        ref = ref if isinstance(ref, list) else [ref]
        for start in range(0, SAMPLES, batch):
            feed = {n: x[start : start + batch] for n, x in zip(names, xs, strict=True)}
            got = execute_qonnx(onnx_model, feed)
            for o, r in zip(onnx_model.graph.output, ref, strict=True):
                r = np.asarray(r[start : start + batch])
                g = got[o.name]
                if g.shape != r.shape:
                    return False, float("inf")
                err = float(np.max(np.abs(g - r)))
                worst = max(worst, err)
                scale = float(np.max(np.abs(r))) if r.size else 0.0
                ok &= bool(np.all(np.abs(g - r) <= 1e-6 * np.abs(r) + 1e-6 * max(scale, 1e-30)))
    return ok, worst


def attempt(run, model) -> str:
    """One conversion + checker + comparison, summarised as a table cell."""
    import onnx

    from qonnx_ingest.errors import ConversionError

    try:
        onnx_model = run()
    except ConversionError as e:
        return "refused: " + str(e).splitlines()[0][:400]
    except Exception as e:  # noqa: BLE001 - the sweep reports crashes
        tb = traceback.extract_tb(e.__traceback__)[-1]
        where = f"{Path(tb.filename).name}:{tb.lineno}"
        return (
            f"CRASH {type(e).__name__} @{where}: " + str(e).splitlines()[0][:140]
            if str(e)
            else f"CRASH {type(e).__name__} @{where}"
        )
    try:
        onnx.checker.check_model(onnx_model)
    except Exception as e:  # noqa: BLE001
        return "checker: " + str(e).splitlines()[0][:140]
    try:
        ok, err = compare(model, onnx_model)
    except Exception as e:  # noqa: BLE001
        return f"CRASH running: {type(e).__name__}: " + str(e).splitlines()[0][:140]
    return "exact" if ok else f"WRONG max err {err:.3g}"


def deterministic(model) -> bool:
    import numpy as np

    xs = [
        np.linspace(-2, 2, 8 * int(np.prod(t.shape[1:])), dtype=np.float32).reshape(
            (8, *t.shape[1:])
        )
        for t in model.inputs
    ]
    a = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
    b = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
    a, b = (r if isinstance(r, list) else [r] for r in (a, b))
    return all(np.array_equal(u, v) for u, v in zip(a, b, strict=True))
