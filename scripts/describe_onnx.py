"""Print what a converted model contains (used by the demo): interface, ops, quantizers."""

import sys

import onnx

from qonnx_ingest.describe import describe

for path in sys.argv[1:]:
    print(f"\n{path}")
    print(describe(onnx.load(path)))
