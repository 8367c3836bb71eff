"""What qkeras2qonnx adds to tf2onnx per layer on deep QKeras chains, in one conversion each.

``compare.py``'s QKeras scaling converts each chain twice (ours, then the floor: tf2onnx's
``from_keras`` on the stripped model); at 5,000 layers tf2onnx alone takes many minutes, so this
script converts once and times tf2onnx's ``from_keras`` inside our run instead: what remains
(stripping, our passes, finishing) is what our pipeline adds. The chains are ``compare.py``'s
(``bench_chains.qdense_chain``). Target: added ms per layer at the deepest within 1.5x of that
at 100.

Prints figures; it is not a test. Run: ``.venv/bin/python scripts/bench/run.py qkeras-depth 100
1000 5000``.
"""

from __future__ import annotations

import sys
import time

from bench_chains import qdense_chain
from bench_common import qkeras_imports, quiet_tensorflow  # sets the TensorFlow env defaults
from bench_scaling import FLAT_RATIO


def main(argv: list[str]) -> int:
    depths = [int(a) for a in argv] or [100, 1000, 5000]
    quiet_tensorflow()
    import tf2onnx.convert

    convert = qkeras_imports()[1]
    inner, spent = tf2onnx.convert.from_keras, []

    def timed(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - start)

    tf2onnx.convert.from_keras = timed  # qkeras2qonnx looks it up at call time
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20 * max(depths) + 1000))
    added = {}
    print(f"{'depth':>6} {'build s':>8} {'ours s':>8} {'tf2onnx s':>9} {'added s':>8} "
          f"{'added ms/layer':>14} {'nodes':>6}")  # fmt: skip
    for depth in depths:
        start = time.perf_counter()
        model = qdense_chain(depth)
        build = time.perf_counter() - start
        spent.clear()
        start = time.perf_counter()
        proto = convert(model)
        total = time.perf_counter() - start
        added[depth] = 1000 * (total - sum(spent)) / depth
        print(f"{depth:6d} {build:8.1f} {total:8.2f} {sum(spent):9.2f} {total - sum(spent):8.2f} "
              f"{added[depth]:14.2f} {len(proto.graph.node):6d}", flush=True)  # fmt: skip
    deepest = max(depths)
    if 100 in added and deepest != 100:
        ratio = added[deepest] / added[100]
        verdict = "PASS" if ratio <= FLAT_RATIO else "FAIL"
        print(f"added ms/layer {deepest}/100: {ratio:.2f}x ({verdict}, target <= 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
