"""compare.py's large-models section: whole CLI runs on dp_net and the large generated chain,
against the issue's dp_net targets."""

from __future__ import annotations

from pathlib import Path

from bench_common import UNAVAILABLE
from bench_corpus import tflite_cli_runs
from bench_peers import Peers
from bench_tables import TOOL_WIDTH, shorten, status, verdict
from bench_tflite import Row, fmt

DP_NET = "tflm__dp_net.tflite"
# the targets for dp_net
DP_NET_MAX_CLI_SECONDS = 3.0
MAX_TIME_VS_PEER = 0.1  # our whole CLI run over tf2onnx's
MAX_SIZE_VS_WEIGHTS = 1.1  # output bytes over the TFLite file's constant-tensor bytes
MAX_MEMORY_VS_PEER = 2.0  # our peak RSS over tf2onnx's


def large_cli_runs(
    models: list[Path], peers: Peers, tmp: Path, corpus_runs: dict[Path, list[Row]]
) -> dict[Path, list[Row]]:
    """[ours, tf2onnx] CLI runs of the large models (those of the corpus run already reused;
    the same output files)."""
    runs = {m: corpus_runs[m][:2] for m in models if m in corpus_runs}
    missing = [m for m in models if m not in runs and m.exists()]
    runs.update(tflite_cli_runs(missing, peers, tmp, tflite2onnx=False))
    return {m: runs[m] for m in models if m in runs}


def large_section(runs: dict[Path, list[Row]], missing: list[str], tmp: Path) -> None:
    """Whole CLI runs, ours against tf2onnx, on models large in operators, with the issue's
    targets for dp_net (and the same ratios, for reference, on the generated model)."""
    import onnx

    from tflite2qonnx.reader import read_model

    print("\n== Large models: whole CLI runs, ours (tflite2qonnx) and tf2onnx --tflite")
    print(
        "   x weights: output bytes over the TFLite file's constant-tensor bytes (sum of "
        "data.nbytes);\n   targets (the issue's, for dp_net): ours <= "
        f"{MAX_TIME_VS_PEER:g}x tf2onnx's time and < {DP_NET_MAX_CLI_SECONDS:g} s, output <= "
        f"{MAX_SIZE_VS_WEIGHTS:g}x the weights, peak memory < {MAX_MEMORY_VS_PEER:g}x tf2onnx's"
    )
    for name in missing:
        print(f"\n{name}: n/a (not found or not generated)")
    header = (
        f"{'tool':{TOOL_WIDTH}} {'status':7} {'cli s':>6} {'peak MB':>7} {'out bytes':>11} "
        f"{'x weights':>9} {'nodes':>6} {'initializers':>12}"
    )
    for model, rows in runs.items():
        subgraphs = read_model(model).subgraphs
        constants = [t for g in subgraphs for t in g.tensors if t.data is not None]
        weights = sum(t.data.nbytes for t in constants)
        operators = sum(len(g.operators) for g in subgraphs)
        print(
            f"\n{model.name}: {operators:,} operators, {len(constants):,} constant tensors, "
            f"{weights:,} weight bytes, file {model.stat().st_size:,} bytes"
        )
        print(header)
        print("-" * len(header))
        sizes: list[float | None] = []
        for k, (row, suffix) in enumerate(zip(rows, (".onnx", ".tf2onnx.onnx"), strict=False)):
            cells = (
                f"{row.name:{TOOL_WIDTH}} {status(row, k == 0):7} {fmt(row.cli_seconds, '.2f', 6)}"
                f" {fmt(row.peak_mb, '.0f', 7)} "
            )
            out = tmp / f"{model.stem}{suffix}"
            if row.error or not out.exists():
                sizes.append(None)
                print(cells + shorten(row.error.removeprefix(UNAVAILABLE) if row.error else "?"))
                continue
            graph = onnx.load(str(out), load_external_data=False).graph
            size = out.stat().st_size
            sizes.append(size / weights if weights else None)
            print(
                cells + f"{size:11,d} {fmt(sizes[-1], '.2f', 9)} {len(graph.node):6d} "
                f"{len(graph.initializer):12d}"
            )
        ours, peer = rows[0], rows[1] if len(rows) > 1 else None
        if ours.error:
            continue
        compared = peer is not None and peer.error is None
        if model.name != DP_NET:  # the targets are dp_net's: figures only
            line = f"ours: output {fmt(sizes[0], '.2f', 0)}x the weight bytes"
            if compared:
                line += (
                    f" (tf2onnx {fmt(sizes[1], '.2f', 0)}x); ours / tf2onnx: time "
                    f"{ours.cli_seconds / peer.cli_seconds:.3f}x, peak memory "
                    f"{ours.peak_mb / peer.peak_mb:.2f}x"
                )
            print(line)
            continue
        if compared:
            ratio = ours.cli_seconds / peer.cli_seconds
            verdict(
                ratio <= MAX_TIME_VS_PEER,
                f"whole CLI run <= {MAX_TIME_VS_PEER:g}x tf2onnx's",
                f"{ours.cli_seconds:.2f} s vs {peer.cli_seconds:.2f} s ({ratio:.3f}x)",
            )
        verdict(
            ours.cli_seconds < DP_NET_MAX_CLI_SECONDS,
            f"whole CLI run < {DP_NET_MAX_CLI_SECONDS:g} s",
            f"{ours.cli_seconds:.2f} s",
        )
        if sizes[0] is not None:
            verdict(
                sizes[0] <= MAX_SIZE_VS_WEIGHTS,
                f"output <= {MAX_SIZE_VS_WEIGHTS:g}x the weight bytes",
                f"{sizes[0]:.3f}x",
            )
        if compared:
            ratio = ours.peak_mb / peer.peak_mb
            verdict(
                ratio < MAX_MEMORY_VS_PEER,
                f"peak memory < {MAX_MEMORY_VS_PEER:g}x tf2onnx's",
                f"{ours.peak_mb:.0f} MB vs {peer.peak_mb:.0f} MB ({ratio:.2f}x)",
            )
