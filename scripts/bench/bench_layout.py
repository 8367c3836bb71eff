"""Time ``layout.to_channels_first`` on synthetic graphs of 1k, 10k and 100k ops.

The pass must be linear: the time per op at 100k should stay within 2-3x of the time per op
at 1k. Two shapes of graph, both with value_info on every tensor as converters emit it:

- chain: repeated Conv -> Relu -> Add(skip) blocks;
- dag:   two Conv branches per block, a [C] constant Mul, a per-channel Quant, an Add skip,
         and every 50 blocks a Reshape -> Reshape detour (terminate ops: real Transposes).

Prints figures; it is not a test. Run: ``.venv/bin/python scripts/bench/run.py layout``.
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from layout import to_channels_first  # noqa: E402

C, H, W = 4, 8, 8
QONNX = "qonnx.custom_op.general"


class Builder:
    def __init__(self):
        self.nodes: list[onnx.NodeProto] = []
        self.value_info: list[onnx.ValueInfoProto] = []
        self.k = 0

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        self.k += 1
        out = f"t{self.k}"
        domain = QONNX if op_type == "Quant" else ""
        self.nodes.append(
            helper.make_node(op_type, inputs, [out], name=f"n{self.k}", domain=domain, **attrs)
        )
        self.value_info.append(helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, H, W, C]))
        return out


def build(kind: str, n_ops: int) -> onnx.ModelProto:
    b = Builder()
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.normal(size=(C, C, 1, 1)).astype(np.float32), "w"),
        numpy_helper.from_array(rng.normal(size=(C,)).astype(np.float32), "k"),
        numpy_helper.from_array(np.full((1, 1, 1, C), 0.1, np.float32), "scale"),
        numpy_helper.from_array(np.float32(0), "zp"),
        numpy_helper.from_array(np.float32(8), "bits"),
        numpy_helper.from_array(np.array([1, H * W, C], np.int64), "flat"),
        numpy_helper.from_array(np.array([1, H, W, C], np.int64), "unflat"),
    ]
    x = "x"
    block = 0
    while len(b.nodes) < n_ops:
        block += 1
        if kind == "chain":
            y = b.op("Relu", [b.op("Conv", [x, "w"])])
            x = b.op("Add", [y, x])
            continue
        a = b.op("Relu", [b.op("Conv", [x, "w"])])
        c = b.op("Mul", [b.op("Conv", [x, "w"]), "k"])
        q = b.op("Quant", [b.op("Add", [a, c]), "scale", "zp", "bits"], signed=1, narrow=0)
        x = b.op("Add", [q, x])
        if block % 50 == 0:
            x = b.op("Reshape", [b.op("Reshape", [x, "flat"]), "unflat"])
    out = b.value_info.pop()
    graph = helper.make_graph(
        b.nodes,
        kind,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, H, W, C])],
        [out],
        inits,
        value_info=b.value_info,
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid(QONNX, 1)]
    return helper.make_model(graph, opset_imports=opsets)


def bench(kind: str, n_ops: int, repeat: int) -> tuple[int, float, int]:
    model = build(kind, n_ops)
    n = len(model.graph.node)
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        out = to_channels_first(model)
        best = min(best, time.perf_counter() - start)
        transposes = sum(node.op_type == "Transpose" for node in out.graph.node)
        del out
    return n, best, transposes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3, help="best of N (N=1 for 100k+)")
    args = parser.parse_args()
    print(f"{'graph':6} {'ops':>7} {'seconds':>9} {'us/op':>7} {'Transposes':>10}")
    for kind in ("chain", "dag"):
        per_op = {}
        for size in args.sizes:
            n, seconds, transposes = bench(kind, size, 1 if size >= 100_000 else args.repeat)
            per_op[size] = seconds / n
            print(f"{kind:6} {n:7d} {seconds:9.3f} {1e6 * seconds / n:7.1f} {transposes:10d}")
        lo, hi = min(args.sizes), max(args.sizes)
        print(f"{kind:6} per-op time {hi} / {lo}: {per_op[hi] / per_op[lo]:.2f}x")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MB")


if __name__ == "__main__":
    main()
