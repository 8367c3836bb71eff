"""compare.py's corpus sections: one table per TFLite model (ours, tf2onnx, tflite2onnx) and per
QKeras model (ours and the floor)."""

from __future__ import annotations

import sys
from pathlib import Path

import bench_qkeras
from bench_common import PEER_QUANT, UNAVAILABLE, count_ops, progress, run_worker
from bench_peers import Peers, measure_peer_cli
from bench_tables import print_table, status
from bench_tflite import Row, measure_cli, measure_in_process, one_line, run_command


def tflite_cli_runs(
    models: list[Path], peers: Peers, tmp: Path, tflite2onnx: bool = True
) -> dict[Path, list[Row]]:
    """Every TFLite CLI run (ours and the peers'), while this process is still small."""
    runs: dict[Path, list[Row]] = {}
    for model in models:
        progress(f"CLI runs: {model.name}")
        ours = measure_cli(model, tmp)
        ours.name = "tflite2qonnx"
        if not peers.enabled:
            runs[model] = [ours]
            continue
        if not tflite2onnx:
            out = tmp / f"{model.stem}.tf2onnx.onnx"
            argv = [sys.executable, "-m", "tf2onnx.convert", "--tflite", str(model)]
            argv += ["--output", str(out)]
            runs[model] = [ours, measure_peer_cli("tf2onnx --tflite", argv, out, peers.tf2onnx)]
            continue
        out = tmp / f"{model.stem}.tf2onnx.onnx"
        tf2onnx = measure_peer_cli(
            "tf2onnx --tflite",
            [sys.executable, "-m", "tf2onnx.convert", "--tflite", str(model), "--output", str(out)],
            out,
            peers.tf2onnx,
        )
        out = tmp / f"{model.stem}.tflite2onnx.onnx"
        python = peers.tflite2onnx_python
        tool = str(python.parent / "tflite2onnx") if python else ""
        tflite2onnx = measure_peer_cli(
            "tflite2onnx", [tool, str(model), str(out)], out, peers.tflite2onnx
        )
        runs[model] = [ours, tf2onnx, tflite2onnx]
    return runs


def qkeras_cli_runs(names: list[str], tmp: Path) -> dict[str, Row]:
    runs: dict[str, Row] = {}
    for name in names:
        progress(f"CLI run: {name}")
        source, weights = bench_qkeras.MODELS[name]
        argv = [sys.executable, "-m", "qkeras2qonnx", str(bench_qkeras.CORPUS / source)]
        argv += ["-o", str(tmp / f"{name}.onnx")]
        if weights:
            argv += ["--weights", str(bench_qkeras.CORPUS / weights)]
        row = Row("qkeras2qonnx")
        code, row.cli_seconds, row.peak_mb, err = run_command(argv)
        if code != 0:
            row.error = f"exit {code}: {one_line(err).removeprefix('qkeras2qonnx: error: ')}"
        runs[name] = row
    return runs


def tflite_section(runs: dict[Path, list[Row]], peers: Peers, repeat: int, tmp: Path) -> None:
    """Conversion times (ours here, the peers in children) and graph counts; then the tables."""
    import onnx

    models = list(runs)
    workers = [
        ("tf2onnx", 1, peers.tf2onnx, None),
        ("tflite2onnx", 2, peers.tflite2onnx, peers.tflite2onnx_python),
    ]
    for kind, column, reason, python in workers:
        if reason is not None or not peers.enabled:
            continue
        paths = [str(m) for m in models if runs[m][column].error is None]
        progress(f"{kind}: conversion times in process ({len(paths)} models)")
        times, failure = run_worker(kind, [str(repeat), *paths], python) if paths else ({}, None)
        for model in models:
            row = runs[model][column]
            if row.error is not None:
                continue
            value = times.get(model.name, failure)
            if isinstance(value, float):
                row.convert_seconds = value
            elif value:
                row.error = f"in-process: {value}"
            out = tmp / f"{model.stem}.{kind}.onnx"
            count_ops(row, onnx.load(str(out), load_external_data=False), PEER_QUANT)
    progress("tflite2qonnx: conversion times in process")
    import tflite2qonnx.api  # noqa: F401  (imports out of the in-process timing, as bench_tflite)

    for model in models:
        ours = runs[model][0]
        if ours.error is None:
            measure_in_process(ours, model, repeat)
    print("\n== TFLite corpus: ours (tflite2qonnx) and the peers on the same files")
    for model in models:
        print_table(model.name, runs[model])
    print()
    for k, rows in enumerate(zip(*runs.values(), strict=True)):
        done = [r for r in rows if r.error is None]
        cli = sorted(r.cli_seconds for r in done)
        median = f"median cli {cli[len(cli) // 2]:.2f} s" if cli else "no figures"
        note = (
            f" ({rows[0].error.removeprefix(UNAVAILABLE)})"
            if status(rows[0], k == 0) == "n/a"
            else ""
        )
        print(f"{rows[0].name}: {len(done)}/{len(rows)} converted, {median}{note}")


def qkeras_section(names: list[str], cli_runs: dict[str, Row], repeat: int) -> None:
    progress(f"QKeras: ours and the floor in process ({len(names)} models)")
    results, failure = run_worker("qkeras", [str(repeat), *names])
    print("\n== QKeras corpus: ours (qkeras2qonnx) against the floor, tf2onnx from_keras on the")
    print("   stripped model (what our pipeline converts; the rest is what it adds)")
    ratios = []
    for name in names:
        ours = cli_runs[name]
        floor = Row("floor: tf2onnx from_keras")
        if name not in results:
            floor.error = failure
            if ours.error is None:
                ours.error = failure
        else:
            measured, floor_measured = (Row(**r) for r in results[name])
            if ours.error is None and measured.error is None:
                ours.convert_seconds = measured.convert_seconds
                ours.nodes, ours.transposes = measured.nodes, measured.transposes
                ours.quants = measured.quants
            elif ours.error is None:
                ours.error = f"in-process: {measured.error}"
            floor_measured.name, floor = floor.name, floor_measured
        source, weights = bench_qkeras.MODELS[name]
        print_table(f"{name} ({source}{' + ' + weights if weights else ''})", [ours, floor])
        if ours.convert_seconds and floor.convert_seconds:
            extra = ours.convert_seconds - floor.convert_seconds
            ratios.append(ours.convert_seconds / floor.convert_seconds)
            print(f"ours = floor {extra:+.3f} s ({ratios[-1]:.2f}x the floor)")
    refused = sum(status(cli_runs[n], True) == "refused" for n in names)
    done = sum(cli_runs[n].error is None for n in names)
    median = f"; median {sorted(ratios)[len(ratios) // 2]:.2f}x the floor" if ratios else ""
    print(f"\nqkeras2qonnx: {done}/{len(names)} converted, {refused} refused{median}")
