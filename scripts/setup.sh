#!/usr/bin/env bash
# Creates .venv (Python 3.11) and installs the project with every extra, pinned by
# constraints.txt, qkeras-v3 (QKeras for Keras 3) into .venv/qkeras-v3 and hgq2 (HGQ2) into
# .venv/hgq2. Re-running is cheap: it reinstalls only when the pins, setup.cfg or this script change.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-}
if [ -z "$PYTHON" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1; then PYTHON=$candidate; break; fi
  done
fi
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), "qonnx-ingest is verified on Python 3.11, found %d.%d" % sys.version_info[:2]'

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$PYTHON" --version)"
  "$PYTHON" -m venv .venv
fi

stamp=.venv/.qonnx-ingest-installed
want=$(cat constraints.txt setup.cfg pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing pinned dependencies (first run: a few minutes, TensorFlow is ~2.5 GB)"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=23"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check \
    -c constraints.txt -e ".[keras,hgq2,test,hls4ml]"
  # qkeras-v3 (QKeras for Keras 3) and hgq2 (HGQ2) both ship a top-level package `qkeras` that
  # would replace QKeras 0.9, so each lives in a directory of its own (.venv/qkeras-v3,
  # .venv/hgq2), outside site-packages; qkeras2qonnx puts them on sys.path only in processes
  # that convert Keras 3 models (qkeras2qonnx/environment/flavour.py). qkeras2qonnx.apart installs the pins
  # of constraints.txt with --no-deps (their dependencies are the pinned stack above) and keeps
  # only their own package (`qkeras`, `hgq`).
  .venv/bin/python -m qkeras2qonnx.apart qkeras-v3 hgq2
  # ai-edge-quantizer (tests/tflite2qonnx/test_ai_edge_quantizer.py) declares litert-lm-builder,
  # which its .tflite recipes never import; its other dependencies are pinned above, so it
  # goes into site-packages with --no-deps, beside immutabledict (its one missing dependency).
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
    "$(grep '^ai-edge-quantizer==' constraints.txt)" "$(grep '^immutabledict==' constraints.txt)"
  # FINN (finn-plus) for the consumer tests (tests/finn_worker.py): its QONNX frontend,
  # streamlining, convert_to_hw and executor are plain Python over qonnx, but its wheel pins
  # numpy/onnx/onnxruntime versions other than ours and its default install pulls torch with
  # CUDA (6 GB). So it lives in .venv/finn, --no-deps, with the few pure dependencies those
  # modules import (24 MB); only FINN's LayerNorm execution needs torch (see tests/finn_worker.py).
  rm -rf .venv/finn
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
    --target .venv/finn $(grep -E '^# finn: ' constraints.txt | cut -d' ' -f3-)
  echo "$want" > "$stamp"
fi
