#!/usr/bin/env python
"""Generalisation sweep of qkeras2qonnx over seeded QKeras models of the kinds people ship.

Builds small models (jet-tagging MLPs, CNNs, folded batchnorm, autoencoders, residual graphs,
plain Keras layers mixed with Q-layers, every quantizer family) in BOTH generations: QKeras 0.9
on tf_keras and qkeras-v3 on Keras 3, each generation in its own process (one process can import
only one ``qkeras``). Per model: ``qkeras2qonnx.convert`` in memory and after a save/load round
trip (.h5 + SavedModel on Keras 2, .keras + .h5 on Keras 3; ``--cli`` adds the CLI on the
file), ``onnx.checker``, then QONNX (qonnx executor) vs QKeras ``predict`` at batch 1 and 8
within 1e-6 relative. Prints a table: model x generation x source -> exact / max error /
refusal / crash.

    python scripts/sweep/run.py qkeras [--only NAME,...] [--gen keras2|keras3] [--cli] [--no-files]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from sweep_qkeras_check import attempt, deterministic, seed_weights
from sweep_qkeras_layer_models import layer_builders
from sweep_qkeras_quantizer_models import quantizer_builders

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def builders(K, Q):
    """name -> zero-argument builder of a model, in the order of the table (the seeds follow it);
    ``K`` is the Keras module, ``Q`` qkeras."""
    return {**quantizer_builders(K, Q), **layer_builders(K, Q)}


def worker(gen: str, only: list[str] | None, files: bool, cli: bool, out: Path) -> None:
    """Sweep one generation; ``out`` gets the rows so far after each model (a crash of the
    process keeps the finished rows)."""
    from qkeras2qonnx.environment import flavour

    flavour.enter(gen)
    import onnx

    if gen == flavour.KERAS2:
        import tf_keras as K
    else:
        import keras as K
    import numpy as np
    import qkeras as Q

    import qkeras2qonnx

    rows = []
    table = builders(K, Q)
    tmp = Path(tempfile.mkdtemp(prefix=f"sweep-{gen}-"))
    for index, (name, build) in enumerate(table.items()):
        if only and name not in only:
            continue
        row = {"model": name, "gen": gen}
        try:
            model = build()
            seed_weights(model, index)
            model.predict(  # the model runs at all in this generation
                [np.zeros((1, *t.shape[1:]), np.float32) for t in model.inputs], verbose=0
            )
        except Exception as e:  # noqa: BLE001
            row["memory"] = f"build fails: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
            rows.append(row)
            out.write_text(json.dumps(rows))
            continue
        try:
            if not deterministic(model):
                row["note"] = "non-deterministic at inference"
        except Exception as e:  # noqa: BLE001
            row["note"] = f"determinism check fails: {type(e).__name__}"
        row["memory"] = attempt(lambda m=model: qkeras2qonnx.convert(m), model)
        if files:
            kinds = ("h5", "savedmodel") if gen == flavour.KERAS2 else ("keras", "h5")
            for kind in kinds:
                path = tmp / f"{name}.{kind}" if kind != "savedmodel" else tmp / f"{name}_sm"
                try:
                    if kind == "savedmodel":
                        model.save(path, save_format="tf")
                    else:
                        model.save(path)
                except Exception as e:  # noqa: BLE001
                    row[kind] = f"save fails: {type(e).__name__}: {str(e).splitlines()[0][:100]}"
                    continue
                row[kind] = attempt(lambda p=path: qkeras2qonnx.convert(p), model)
                if cli and kind == kinds[0]:
                    cli_out = tmp / f"{name}.cli.onnx"
                    env = dict(os.environ, PYTHONPATH=str(ROOT))
                    done = subprocess.run(
                        [sys.executable, "-m", "qkeras2qonnx", str(path), "-o", str(cli_out)],
                        capture_output=True,
                        text=True,
                        env=env,
                        check=False,
                    )
                    if done.returncode:
                        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
                        row["cli"] = f"exit {done.returncode}: {tail[:150]}"
                    else:
                        row["cli"] = attempt(lambda o=cli_out: onnx.load(o), model)
        rows.append(row)
        out.write_text(json.dumps(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--gen", choices=("keras2", "keras3"), action="append")
    parser.add_argument("--no-files", action="store_true", help="skip save/load round trips")
    parser.add_argument("--cli", action="store_true", help="also run the CLI on the first file")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args()
    only = args.only.split(",") if args.only else None
    if args.worker:
        worker(args.worker, only, not args.no_files, args.cli, Path(args.json))
        return
    from qkeras2qonnx.environment import flavour

    rows: list[dict] = []
    for gen in args.gen or ("keras2", "keras3"):
        env = flavour.qkeras3_environment() if gen == "keras3" else flavour.keras2_environment()
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            cmd = [sys.executable, __file__, "--worker", gen, "--json", out.name]
            cmd += ["--only", args.only] if args.only else []
            cmd += ["--no-files"] if args.no_files else []
            cmd += ["--cli"] if args.cli else []
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
            text = Path(out.name).read_text()
            rows += json.loads(text) if text else []
            if done.returncode:
                rows.append(
                    {"model": "*", "gen": gen, "memory": "worker died: " + done.stderr[-300:]}
                )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    print_table(rows)


def print_table(rows: list[dict]) -> None:
    columns = ("memory", "h5", "savedmodel", "keras", "cli")
    print(f"{'model':<18} {'gen':<7} {'source':<10} result")
    for row in rows:
        first = True
        for col in columns:
            if col not in row:
                continue
            model = row["model"] if first else ""
            gen = row["gen"] if first else ""
            print(f"{model:<18} {gen:<7} {col:<10} {row[col]}")
            first = False
        if "note" in row:
            print(f"{'':<18} {'':<7} {'note':<10} {row['note']}")
    cells = [row[c] for row in rows for c in columns if c in row]
    counts = {
        k: sum(c.startswith(p) for c in cells)
        for k, p in (("exact", "exact"), ("wrong", "WRONG"), ("refused", "refused"))
    }
    crashes = sum(c.startswith(("CRASH", "checker", "exit", "build", "save")) for c in cells)
    print(f"\n{len(cells)} conversions: {counts} other/crash={crashes}")


if __name__ == "__main__":
    main()
