#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh), then converts the bundled example models into out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p out
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-3}
.venv/bin/qkeras2qonnx examples/qkeras_jet_dnn.h5 -o out/qkeras_jet_dnn.onnx
.venv/bin/tflite2qonnx examples/int8_dense.tflite -o out/int8_dense.onnx
.venv/bin/python scripts/describe_onnx.py out/qkeras_jet_dnn.onnx out/int8_dense.onnx
