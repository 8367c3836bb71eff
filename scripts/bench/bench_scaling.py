"""compare.py's scaling section: conversion time per operator of generated TFLite and QKeras
chains of growing size, which should stay flat."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench_chains import CHAIN_OUTPUTS, SCALING_WIDTH, Chain
from bench_common import OURS_QUANT, SINGLE_RUN_SECONDS, best_of, count_ops, progress, run_worker
from bench_peers import Peers
from bench_tables import shorten, status
from bench_tflite import Row, one_line

FLAT_RATIO = 1.5  # scaling: ms/operator at the deepest over ms/operator at REFERENCE_DEPTH
REFERENCE_DEPTH = 100  # scaling: what the deepest is compared with (else the next depth)


def ratio_line(label: str, figures: dict[int, float], target: bool) -> None:
    """ms/operator at the deepest over ms/operator at ``REFERENCE_DEPTH`` (else the next
    depth): a verdict against ``FLAT_RATIO`` when ``target``, else flat / NOT flat."""
    if len(figures) < 2:
        return
    high, high_ms = max(figures.items())
    lows = [d for d in figures if d < high]
    low = REFERENCE_DEPTH if REFERENCE_DEPTH in lows else max(lows)
    ratio = high_ms / figures[low]
    if target:
        verdict = "PASS" if ratio <= FLAT_RATIO else "FAIL"
        verdict += f" (target <= {FLAT_RATIO:g}x)"
    else:
        verdict = "flat" if ratio <= FLAT_RATIO else f"NOT flat (> {FLAT_RATIO:g}x)"
    print(f"{label} {high}/{low}: {figures[low]:.2f} -> {high_ms:.2f} ms, {ratio:.2f}x, {verdict}")


def scaling_table(
    title: str, rows: list[tuple[int, Row, Row | None]], peer: str, added_target: bool
) -> None:
    """Per size (operators of the source model): seconds, ms/operator, counts, and the peer's
    (tf2onnx); then the deepest-over-reference ms-per-operator ratios. ``added_target``: the
    target is on ours minus the peer (QKeras), else on ours."""
    has_peer = any(p is not None for _, _, p in rows)
    header = f"{'ops':>6} {'convert s':>9} {'ms/op':>7} {'nodes':>6} {'quant':>5}"
    header += f" {peer + ' s':>12} {peer + ' ms/op':>14}" if has_peer else ""
    print(f"\n{title}")
    print(header)
    print("-" * len(header))
    per_op: dict[int, float] = {}
    peer_per_op: dict[int, float] = {}
    for ops, row, peer_row in rows:
        if row.error:
            print(f"{ops:6d} {status(row, True)}: {shorten(row.error)}")
            continue
        per_op[ops] = row.convert_seconds / ops * 1000
        cells = (
            f"{ops:6d} {row.convert_seconds:9.3f} {per_op[ops]:7.2f} {row.nodes:6d} {row.quants:5d}"
        )
        if peer_row is not None and peer_row.error is None:
            peer_per_op[ops] = peer_row.convert_seconds / ops * 1000
            cells += f" {peer_row.convert_seconds:12.3f} {peer_per_op[ops]:14.2f}"
        elif peer_row is not None:
            cells += f" {peer} {status(peer_row, False)}: {shorten(peer_row.error, 60)}"
        print(cells)
    added = {d: per_op[d] - peer_per_op[d] for d in peer_per_op if d in per_op}
    ratio_line("ours, ms/op", per_op, not added_target)
    ratio_line(f"{peer}, ms/op", peer_per_op, False)
    if added_target:
        ratio_line(f"ours minus {peer}, ms/op", added, True)


def scaling_chains(depths: list[int]) -> dict[int, Chain]:
    return {depth: Chain.scaling(depth) for depth in depths}


def scaling_section(
    depths: list[int],
    qkeras_max: int,
    peers: Peers,
    repeat: int,
    cache: Path,
    tflite: bool = True,
) -> None:
    if tflite:
        tflite_scaling(depths, peers, repeat, cache)
    qkeras_scaling(depths, qkeras_max, repeat)


def tflite_scaling(depths: list[int], peers: Peers, repeat: int, cache: Path) -> None:
    import tflite2qonnx
    from tflite2qonnx.reader import read_model

    chains = scaling_chains(depths)
    smallest = chains[depths[0]].path(cache)
    if smallest.exists():
        tflite2qonnx.convert(smallest)  # lazy imports out of the timing (with --no-corpus)
    peer_times: dict[str, Any] = {}
    peer_failure = peers.tf2onnx if peers.enabled else None
    paths = [str(c.path(cache)) for c in chains.values() if c.path(cache).exists()]
    if peers.enabled and peers.tf2onnx is None and paths:
        progress(f"scaling: tf2onnx from_tflite, {len(paths)} chains")
        peer_times, peer_failure = run_worker("tf2onnx-scaling", [str(repeat), *paths])
    rows = []
    for depth, chain in chains.items():
        row, path = Row(str(depth)), chain.path(cache)
        ops = depth
        if not path.exists():
            row.error = "not generated (see the make-tflite worker's error above)"
        else:
            ops = sum(len(g.operators) for g in read_model(path).subgraphs)
            progress(f"scaling: tflite2qonnx, {ops} operators")
            try:
                row.convert_seconds, proto = best_of(
                    lambda p=path: tflite2qonnx.convert(p), repeat, SINGLE_RUN_SECONDS
                )
                count_ops(row, proto, OURS_QUANT)
            except Exception as exc:
                row.error = f"{type(exc).__name__}: {one_line(str(exc))}"
        peer_row = None
        if peers.enabled:
            peer_row = Row(str(depth))
            value = peer_times.get(path.name, peer_failure or "no result")
            if isinstance(value, float):
                peer_row.convert_seconds = value
            else:
                peer_row.error = value
        rows.append((ops, row, peer_row))
    print("\n== Scaling: conversion time per operator (should stay flat)")
    scaling_table(
        f"TFLite: int8 cells of 2 FULLY_CONNECTED({SCALING_WIDTH}) on ONE shared weight tensor "
        f"+ TANH + LOGISTIC + MUL,\na distinct bias constant per FULLY_CONNECTED, "
        f"{CHAIN_OUTPUTS} graph outputs; tflite2qonnx.convert and tf2onnx from_tflite",
        rows,
        "tf2onnx",
        added_target=False,
    )


def qkeras_scaling(depths: list[int], qkeras_max: int, repeat: int) -> None:
    qkeras_depths = sorted({min(d, qkeras_max) for d in depths})
    progress(f"scaling: qkeras2qonnx and the floor, {qkeras_depths} layers")
    results, failure = run_worker("qkeras-scaling", [str(repeat), *map(str, qkeras_depths)])
    rows = []
    builds = []
    for depth in qkeras_depths:
        if str(depth) in results:
            ours, floor, build = results[str(depth)]
            ours, floor = Row(**ours), Row(**floor)
            builds.append(f"{depth}: {build:.0f} s")
        else:
            ours, floor = Row(str(depth), error=failure), None
        rows.append((depth, ours, floor))
    scaling_table(
        "QKeras: N x QDense(8, quantized_bits(4,0,alpha=1), activation=quantized_relu(4)), each "
        f"its own weights,\n{CHAIN_OUTPUTS} graph outputs (a shared layer is refused by "
        "design); qkeras2qonnx.convert; floor: tf2onnx from_keras\non the stripped model",
        rows,
        "floor",
        added_target=True,
    )
    if builds:
        print(f"(Keras build of the chain, not timed above: {', '.join(builds)})")
    if qkeras_depths != depths:
        print(
            f"(QKeras chains are capped at {qkeras_max} layers, --qkeras-max-depth:"
            " tf2onnx's from_keras, run by ours and by the floor, takes longer per layer the deeper"
            " the chain)"
        )
