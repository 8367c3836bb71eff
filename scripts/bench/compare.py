"""``run.py all``: our converters against their peers, side by side, on this machine.

Everything runs in one process tree, one measurement at a time (the machine is shared):

1. TFLite corpus (../shared/corpus/tflite), one table per model, one row per tool:
   ``tflite2qonnx`` (ours), ``python -m tf2onnx.convert --tflite`` and ``tflite2onnx`` (PyPI;
   installed on first run into ``.venv-bench/`` from the exact pins in
   ``scripts/bench/bench-peers.txt``, since it needs its own numpy/onnx/tflite; a peer that
   cannot be installed is shown as ``n/a`` with the reason).
2. QKeras corpus (``bench_qkeras.MODELS``), one table per model: ``qkeras2qonnx`` (ours) and the
   floor our pipeline adds to: tf2onnx's plain ``convert.from_keras`` on the stripped model
   (``qkeras2qonnx.strip.strip_model``: plain Keras layers plus the output markers, which plain
   tf2onnx turns into Identity), at our opset and timed the same way as our conversion.
3. Large models (``--no-large`` skips): whole CLI runs of ours and ``tf2onnx --tflite`` on
   ``tflm__dp_net.tflite`` (2,338 operators, 776 FULLY_CONNECTED on a few shared weights) and on
   a generated float32 model whose one 128x128 weight tensor is read by 1,000
   FULLY_CONNECTED (``Chain``: 500 cells, 2,500 operators, 4 outputs, a bias constant per
   FULLY_CONNECTED): time, peak RSS, output bytes against the TFLite file's constant bytes,
   initializers; PASS/FAIL against the issue's dp_net targets (ours at most 1/10 of tf2onnx's
   time and under 3 s, output at most 1.1x the weight bytes, peak memory under 2x tf2onnx's).
4. Options overhead (``--no-options`` skips): whole CLI runs on Coral MobileNet v2, plain and
   with ``--report``, ``--format qcdq``, ``--encodings FILE``; what each adds, against the
   conversion's own time (in process), the issue's bound.
5. Scaling: conversion time per operator of generated models of growing size (default 10, 100,
   1000, 5000 operators), which should stay flat (target: at most 1.5x from 100 to the
   largest): int8 ``Chain`` models of 8 features shaped like real graphs (every FULLY_CONNECTED on
   one shared weight tensor, a constant per FULLY_CONNECTED, 4 outputs; TensorFlow's
   TFLiteConverter with full-integer post-training quantization and a seeded representative
   set, cached in ``--cache-dir``), ours beside tf2onnx's ``from_tflite``; and chains of
   ``QDense(8, quantized_bits(4, 0, alpha=1), activation=quantized_relu(4))`` layers with 4
   outputs (shared layers are refused by design), ours beside the floor, capped at
   ``--qkeras-max-depth`` layers (2000; the chains are built without tracing each layer's call,
   ``qdense_chain``, ~10 ms per layer, but tf2onnx's own time per layer grows with depth).

Columns:

- status:    ok; failed (the tool gave up, its one-line reason follows); refused (ours: exit 1,
             a model we refuse by design with a one-line error); n/a (tool unavailable);
- cli s:     wall time of the whole command in a fresh process (start-up, imports, reading,
             converting, writing);
- convert s: the conversion alone, in a warm process, best of ``--repeat``: ours
             ``tflite2qonnx.convert(path)`` / ``qkeras2qonnx.convert(model)``; tf2onnx
             ``convert.from_tflite(path)`` (what its ``--tflite`` CLI runs) or
             ``convert.from_keras``; tflite2onnx ``Model(...).convert()`` (its CLI minus save);
- peak MB:   peak RSS of that CLI process (``ru_maxrss`` from ``os.wait4``). Every CLI run
             happens before this process imports anything heavy: Linux starts a child's
             ru_maxrss at the parent's RSS at fork time. The in-process parts run later, in
             child processes of their own (TensorFlow) or here (tflite2qonnx);
- nodes, Transpose: counts in the output graph;
- quant:     quantization nodes: Quant/IntQuant/BipolarQuant in ours (QONNX),
             QuantizeLinear+DequantizeLinear in the peers' (QDQ).

Scaling: ``ms/op`` is conversion time / operators of the source model (TFLite operators or
Keras layers; one run when a conversion takes over 1 s, else best of ``--repeat``); the ratio
lines compare ms/op at the largest size with 100 operators (else the next size), about 1x when
flat. The QKeras rows also give what our pipeline adds to the floor per layer, which separates
our own passes from tf2onnx's (whose time per layer grows with depth by itself): the target is
on that.

One module per part, next to this one: bench_corpus, bench_large, bench_options and
bench_scaling (the sections), bench_chains (the generated models: ``Chain``, ``qdense_chain``),
bench_workers (the in-process measurements, run as ``compare.py --worker KIND ...``), bench_peers,
bench_tables and bench_common (what they share).

Prints figures; it is not a test. On the 2-core VM, shared: the large-models, options and
TFLite scaling sections take about 5 min, the QKeras scaling chains up to 2000 layers about
15 (``--depths 10 100 1000`` about 5); the corpus tables about 5. The first run also creates
``.venv-bench`` and generates the TFLite models (about 2 min). Run: ``.venv/bin/python
scripts/bench/run.py all [--no-peers] [--models NAME ...] [--no-corpus] [--no-large] [--no-options]
[--depths 10 100 1000 5000 | --no-scaling]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import bench_qkeras
from bench_chains import LARGE_CELLS, LARGE_WIDTH, Chain
from bench_common import TFLITE_CORPUS, progress, run_worker
from bench_corpus import qkeras_cli_runs, qkeras_section, tflite_cli_runs, tflite_section
from bench_large import DP_NET, large_cli_runs, large_section
from bench_options import CORAL, options_cli_runs, options_section
from bench_peers import find_peers, machine_line, versions_line
from bench_scaling import scaling_chains, scaling_section
from bench_workers import worker_main

CACHE_DIR = Path(tempfile.gettempdir()) / "qonnx-ingest-bench"
DEFAULT_DEPTHS = (10, 100, 1000, 5000)
QKERAS_MAX_DEPTH = 2000  # tf2onnx's from_keras (in ours and the floor) slows per layer with depth


def select_models(names: list[str] | None) -> tuple[list[Path], list[str]]:
    """TFLite files and QKeras corpus names: all by default, else by path or name substring."""
    tflite = sorted(TFLITE_CORPUS.glob("*.tflite"))
    qkeras = [n for n in bench_qkeras.MODELS if bench_qkeras.CORPUS.is_dir()]
    if names is None:
        return tflite, qkeras
    chosen_tflite: list[Path] = []
    chosen_qkeras: list[str] = []
    for name in names:
        path = Path(name)
        found = [path] if path.suffix == ".tflite" and path.is_file() else []
        found += [m for m in tflite if name in m.name and m not in found]
        chosen_tflite += [m for m in found if m not in chosen_tflite]
        matched = [n for n in qkeras if name in n]
        chosen_qkeras += [n for n in matched if n not in chosen_qkeras]
        if not found and not matched:
            raise SystemExit(f"bench: no corpus model matches {name!r}")
    return chosen_tflite, chosen_qkeras


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return worker_main(argv[1:])
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Tables go to stdout, progress to stderr.",
    )
    parser.add_argument(
        "--models",
        nargs="+",
        metavar="NAME",
        help="corpus models to run: .tflite paths or substrings of TFLite file names / QKeras "
        f"names ({', '.join(bench_qkeras.MODELS)}); default: the whole corpus",
    )
    parser.add_argument("--no-peers", action="store_true", help="run ours only")
    parser.add_argument("--no-corpus", action="store_true", help="skip the per-model tables")
    parser.add_argument(
        "--no-large", action="store_true", help="skip the large-models section (dp_net, shared)"
    )
    parser.add_argument(
        "--no-options", action="store_true", help=f"skip the options-overhead section ({CORAL})"
    )
    parser.add_argument(
        "--depths",
        nargs="+",
        type=int,
        default=list(DEFAULT_DEPTHS),
        metavar="N",
        help="scaling sizes, in operators of the source model (TFLite operators, Keras layers; "
        f"default: {' '.join(map(str, DEFAULT_DEPTHS))})",
    )
    parser.add_argument(
        "--qkeras-max-depth",
        type=int,
        default=QKERAS_MAX_DEPTH,
        metavar="N",
        help="QKeras scaling chains stop at N layers: a deeper size is measured at N "
        f"(default: {QKERAS_MAX_DEPTH}; tf2onnx alone takes minutes on 5000 QDense layers)",
    )
    parser.add_argument("--no-scaling", action="store_true", help="skip the scaling section")
    parser.add_argument(
        "--no-tflite-scaling",
        action="store_true",
        help="scaling: the QKeras chains only (the TFLite chains and tf2onnx on them skipped)",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, metavar="N", help="in-process conversions, best of N"
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=CACHE_DIR,
        metavar="DIR",
        help=f"where the generated TFLite models are kept (default: {CACHE_DIR})",
    )
    args = parser.parse_args(argv)
    if any(d < 1 for d in args.depths) or args.qkeras_max_depth < 1:
        parser.error("depths must be positive")
    start = time.perf_counter()
    depths = sorted(set(args.depths))
    tflite, qkeras = ([], []) if args.no_corpus else select_models(args.models)
    large = [] if args.no_large else [TFLITE_CORPUS / DP_NET]
    large_chain = Chain(LARGE_CELLS, LARGE_WIDTH, int8=False)
    chains = [] if args.no_large else [large_chain]
    if not (args.no_scaling or args.no_tflite_scaling):
        chains += list(scaling_chains(depths).values())
    coral = None if args.no_options else TFLITE_CORPUS / CORAL
    peers = find_peers(
        not args.no_peers and bool(tflite or large or not args.no_scaling), bool(tflite)
    )
    print(machine_line())
    print(versions_line(peers))
    if chains:
        progress(f"generating the missing TFLite models in {args.cache_dir}")
        _, failure = run_worker("make-tflite", [str(args.cache_dir), *map(str, chains)])
        if failure:
            print(f"\ngenerating the TFLite models failed: {failure}")
    if not args.no_large:
        large.append(large_chain.path(args.cache_dir))
    missing = [m.name for m in large if not m.exists()]
    with tempfile.TemporaryDirectory(prefix="bench_") as name:
        tmp = Path(name)
        # every CLI run first: a child's ru_maxrss starts at this process's RSS at fork time
        tflite_runs = tflite_cli_runs(tflite, peers, tmp)
        qkeras_runs = qkeras_cli_runs(qkeras, tmp)
        large_runs = large_cli_runs(large, peers, tmp, tflite_runs)
        option_runs = []
        if coral is not None and coral.exists():
            option_runs = options_cli_runs(coral, tmp, args.repeat)
        if tflite_runs:
            tflite_section(tflite_runs, peers, args.repeat, tmp)
        if qkeras_runs:
            qkeras_section(qkeras, qkeras_runs, args.repeat)
        if large:
            large_section(large_runs, missing, tmp)
        if option_runs:
            options_section(coral, option_runs, args.repeat)
        elif coral is not None:
            print(f"\n== Options overhead: n/a ({coral} not found)")
    if not args.no_scaling:
        scaling_section(
            depths,
            args.qkeras_max_depth,
            peers,
            args.repeat,
            args.cache_dir,
            tflite=not args.no_tflite_scaling,
        )
    print(f"\ntotal bench time {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
