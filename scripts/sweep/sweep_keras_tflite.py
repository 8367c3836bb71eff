"""Generalisation sweep: small seeded Keras models x TFLiteConverter modes through tflite2qonnx.

The models (tests/tflite2qonnx/sweep_models.py: CNNs with BatchNorm / depthwise / separable /
residual adds, MobileNet-like blocks, Conv1D audio nets, GRU / LSTM / BiLSTM / SimpleRNN,
attention, decoders, recommenders, multi-input/output) are converted by TF in the modes
float32, float16 (weights), dynamic (int8 weights), int8 (int8 I/O), int8_fio (float I/O) and
16x8, once: the .tflite files are cached under ``--cache`` (built in one subprocess with
TF_USE_LEGACY_KERAS=1; this process never imports TensorFlow).

Each (model, mode) is converted in process with ``tflite2qonnx.convert`` and compared with
ai-edge-litert's builtin reference kernels on seeded inputs (tests/litert_compare.py):

- float outputs: max error within 1e-4 relative, or within XNNPACK's own distance from the
  reference kernels (plus that bound);
- quantized outputs (integer, or float outputs dequantized from an int grid): within 1 step
  of the grid, or no more steps than XNNPACK;
- quantized models also with ``bit_exact=True``: the number of steps off (0 = bit exact).

Cells: ``ok`` / ``ok(Ns)`` (N steps, allowed), ``WRONG ...`` (a silent wrong answer), ``refused``
(ConversionError, message listed below), ``CRASH`` (any other exception), ``tf-fail`` (TF's
converter refused the mode). Exit 1 if anything is WRONG or CRASH.

Run: ``.venv/bin/python scripts/sweep/run.py keras-tflite [--models a,b] [--modes int8,16x8]``.
Building all 90 .tflite files takes about an hour on two busy cores (TF's converter segfaults
on the quantized GRU / SimpleRNN and each death restarts the build process).

Last full run (90 cells): 67 ok (every quantized one bit exact under bit_exact), 12 tf-fail
(16x8 of HARD_SWISH, ELU / PRELU, LSTMs, a rank-2 CONV_2D; GRU / SimpleRNN int8 segfaults),
11 refused: GRU and SimpleRNN (float, float16, dynamic: a WHILE on rank-3 values), stacked /
bidirectional int8 LSTMs (a 2^-16 cell scale, beyond the integer kernel's tanh), attention
16x8 (a 0.0 scale; the interpreter aborts on that file). None WRONG or CRASH. Since then the
6 GRU / SimpleRNN cells convert (WHILE as ONNX Loop; the layout pass permutes nothing there):
ok, max error 3e-8 (GRU) and 2e-7 (SimpleRNN), so 73 ok and 5 refused.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests" / "tflite2qonnx"
for _p in (ROOT, ROOT / "tests", TESTS):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from sweep_models import MODELS, MODES  # noqa: E402

_BUILD = """
import json, pathlib, sys, traceback
import sweep_models as m
folder = pathlib.Path(sys.argv[2])
for name, mode in json.loads(sys.argv[1]):
    stem = folder / f"{name}__{mode}"
    (folder / "current").write_text(stem.name)
    try:
        stem.with_suffix(".tflite").write_bytes(m.build(name, mode))
    except Exception as e:
        stem.with_suffix(".err").write_text(f"{type(e).__name__}: {e}"[-600:])
"""


def build_missing(cache: Path, pairs: list[tuple[str, str]]) -> None:
    """Build every (model, mode) with neither a .tflite nor an .err in ``cache``."""
    todo = [
        (n, m)
        for n, m in pairs
        if not (cache / f"{n}__{m}.tflite").exists() and not (cache / f"{n}__{m}.err").exists()
    ]
    if not todo:
        return
    print(f"building {len(todo)} .tflite files into {cache} ...", flush=True)
    env = {**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3"}
    current = cache / "current"
    current.unlink(missing_ok=True)
    result = subprocess.run(
        [sys.executable, "-c", _BUILD, json.dumps(todo), str(cache)],
        cwd=TESTS,
        env=env,
        capture_output=True,
        check=False,
    )
    if result.returncode:  # TF's converter died (it segfaults on some models): note, go on
        if not current.exists():
            sys.exit(result.stderr.decode(errors="replace")[-3000:])
        died = cache / (current.read_text() + ".err")
        died.write_text(f"TF's converter process died (exit {result.returncode})")
        print(f"  {died.stem}: TF's converter process died", flush=True)
        build_missing(cache, pairs)


def _output_grids(it) -> dict[str, tuple[float, int]]:
    """Per output, the int grid it is on: its own, or that of the DEQUANTIZE feeding it."""
    details = {d["index"]: d for d in it.get_tensor_details()}
    producer = {}
    for op in it._get_ops_details():
        for o in op["outputs"]:
            producer[o] = op
    grids = {}
    for d in it.get_output_details():
        if np.issubdtype(d["dtype"], np.integer):
            grids[d["name"]] = d["quantization"]
            continue
        op = producer.get(d["index"])
        if op is not None and op["op_name"] == "DEQUANTIZE":
            src = details[op["inputs"][0]]
            scale, zp = src["quantization"]
            if scale and np.issubdtype(src["dtype"], np.integer):
                grids[d["name"]] = (scale, zp)
    return grids


def _run(it, feeds_list):
    outs = []
    for feeds in feeds_list:
        for d in it.get_input_details():
            it.set_tensor(d["index"], feeds[d["name"]])
        it.reset_all_variables()
        it.invoke()
        outs.append({d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()})
    return outs


def _feeds(it, n: int, seed: int = 0):
    """Seeded raw inputs: floats in [-1, 1], int8 / int16 over their range, ids in [0, 20)."""
    from litert_compare import random_input

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        feeds = {}
        for d in it.get_input_details():
            if d["dtype"] in (np.int32, np.int64):
                feeds[d["name"]] = rng.integers(0, 20, d["shape"]).astype(d["dtype"])
            else:
                feeds[d["name"]] = random_input(d, rng)
        out.append(feeds)
    return out


def check(data: bytes, quantized: bool, n_inputs: int = 4) -> str:
    """One cell of the table (see the module docstring)."""
    from litert_compare import real_value, reference_interpreter, run_ours

    import tflite2qonnx

    try:
        model = tflite2qonnx.convert(data, keep_io_layout=True)
    except tflite2qonnx.ConversionError as e:
        return "refused: " + str(e).splitlines()[0][:300]
    except Exception as e:  # noqa: BLE001 - a crash is what the sweep reports
        return "CRASH: " + "".join(traceback.format_exception_only(e)).strip()[:300]
    exact, exact_note = None, ""
    if quantized:
        try:
            exact = tflite2qonnx.convert(data, keep_io_layout=True, bit_exact=True)
        except tflite2qonnx.ConversionError as e:
            exact_note = " be-refused: " + str(e).splitlines()[0][:300]
        except Exception as e:  # noqa: BLE001
            return "CRASH(bit_exact): " + "".join(traceback.format_exception_only(e)).strip()[:300]
    try:
        ref = reference_interpreter(data)
    except ValueError:  # an op the reference resolver lacks (ELU): the optimized builtins
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        ref = Interpreter(
            model_content=data,
            experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        )
        ref.allocate_tensors()
    xnn = reference_interpreter(data, xnnpack=True)
    grids = _output_grids(ref)
    in_grid = {d["name"]: d["quantization"] for d in ref.get_input_details()}
    raw = _feeds(ref, n_inputs)
    theirs, fast = _run(ref, raw), _run(xnn, raw)
    real = [  # ids (integer inputs without a grid) are fed as they are
        {k: real_value(v, in_grid[k]) if in_grid[k][0] else v for k, v in f.items()} for f in raw
    ]
    out_grid = {d["name"]: d["quantization"] for d in ref.get_output_details()}

    def real_out(name, v):
        return real_value(v, out_grid[name] if out_grid[name][0] else None).astype(np.float64)

    worst, worst_exact, worst_float, notes = 0.0, 0.0, 0.0, []
    try:
        ours = [run_ours(model, f) for f in real]
        ours_exact = [run_ours(exact, f) for f in real] if exact is not None else None
    except Exception as e:  # noqa: BLE001
        return "CRASH(run): " + "".join(traceback.format_exception_only(e)).strip()[:300]
    for k, (t, x, o) in enumerate(zip(theirs, fast, ours, strict=True)):
        for name, tv in t.items():
            tv, xv, ov = real_out(name, tv), real_out(name, x[name]), o[name].astype(np.float64)
            if ov.shape != tv.shape:
                return f"WRONG shape {name}: {ov.shape} vs {tv.shape}"
            if not np.all(np.isfinite(ov) == np.isfinite(tv)):
                return f"WRONG non-finite {name}"
            if name in grids:
                scale = grids[name][0]
                steps = np.max(np.abs(np.round(ov / scale) - np.round(tv / scale)), initial=0)
                xsteps = np.max(np.abs(np.round(xv / scale) - np.round(tv / scale)), initial=0)
                if steps > max(1, xsteps):
                    notes.append(f"{name}: {steps:.0f} steps (xnnpack {xsteps:.0f})")
                worst = max(worst, steps)
                if ours_exact is not None:
                    ev = ours_exact[k][name].astype(np.float64)
                    es = np.max(np.abs(np.round(ev / scale) - np.round(tv / scale)), initial=0)
                    worst_exact = max(worst_exact, es)
            else:
                bound = 1e-4 * max(1.0, float(np.max(np.abs(tv), initial=0)))
                err = float(np.max(np.abs(ov - tv), initial=0))
                xerr = float(np.max(np.abs(xv - tv), initial=0))
                if err > bound + xerr:
                    notes.append(f"{name}: err {err:.3g} (xnnpack {xerr:.3g}, bound {bound:.2g})")
                worst_float = max(worst_float, err)
    if notes:
        return "WRONG " + "; ".join(notes)[:300]
    cell = f"ok({worst:.0f}s)" if grids else f"ok(e={worst_float:.1g})"
    if exact is not None and grids:
        cell += " exact" if worst_exact == 0 else f" be={worst_exact:.0f}s"
    return cell + exact_note


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", default="/tmp/tfsweep_cache")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--inputs", type=int, default=4, help="seeded inputs per model")
    parser.add_argument("--json", help="also write the cells to this file")
    args = parser.parse_args(argv)
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    models, modes = args.models.split(","), args.modes.split(",")
    build_missing(cache, [(n, m) for n in models for m in modes])
    import warnings

    warnings.simplefilter("ignore")
    cells: dict[str, dict[str, str]] = {}
    for name in models:
        cells[name] = {}
        for mode in modes:
            stem = cache / f"{name}__{mode}"
            if stem.with_suffix(".err").exists():
                cells[name][mode] = "tf-fail: " + stem.with_suffix(".err").read_text()[:200]
            else:
                data = stem.with_suffix(".tflite").read_bytes()
                cells[name][mode] = check(data, mode in ("int8", "int8_fio", "16x8"), args.inputs)
            print(f"{name:16} {mode:9} {cells[name][mode]}", flush=True)
    _table(cells, modes)
    if args.json:
        Path(args.json).write_text(json.dumps(cells, indent=1))
    bad = [c for row in cells.values() for c in row.values() if c.startswith(("WRONG", "CRASH"))]
    return 1 if bad else 0


def _short(cell: str) -> str:
    return cell.split(":")[0][:24]


def _table(cells: dict[str, dict[str, str]], modes: list[str]) -> None:
    print("\n| model | " + " | ".join(modes) + " |")
    print("|---" * (len(modes) + 1) + "|")
    for name, row in cells.items():
        print(f"| {name} | " + " | ".join(_short(row[m]) for m in modes) + " |")
    details = sorted({c for row in cells.values() for c in row.values() if ":" in c})
    if details:
        print("\nmessages:")
        for c in details:
            print("  " + c)


if __name__ == "__main__":
    sys.exit(main())
