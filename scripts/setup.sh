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
    -c constraints.txt -e ".[keras,test,hls4ml]"
  # qkeras-v3 (QKeras for Keras 3) installs the same top-level package `qkeras` as QKeras 0.9,
  # so it lives in its own directory, outside site-packages; qkeras2qonnx puts it first on
  # sys.path only in processes that convert Keras 3 models (qkeras2qonnx/flavour.py). Pure
  # Python, and its dependencies are the pinned stack above (hence --no-deps). Only its
  # `qkeras` package is kept: the wheel also installs top-level docs/examples/tests packages.
  rm -rf .venv/qkeras-v3
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
    --target .venv/qkeras-v3 "$(grep '^qkeras-v3==' constraints.txt)"
  find .venv/qkeras-v3 -mindepth 1 -maxdepth 1 ! -name 'qkeras' ! -name 'qkeras_v3-*' \
    -exec rm -rf {} +
  # hgq2 (HGQ2, Keras 3) also ships a top-level `qkeras` package that would replace QKeras 0.9,
  # so it too gets a directory of its own, put on sys.path only in Keras 3 processes
  # (qkeras2qonnx/flavour.py). Its dependencies (keras, quantizers, tqdm) are pinned above;
  # only its `hgq` package is kept.
  rm -rf .venv/hgq2
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
    --target .venv/hgq2 "$(grep '^hgq2==' constraints.txt)"
  find .venv/hgq2 -mindepth 1 -maxdepth 1 ! -name 'hgq' ! -name 'hgq2-*' -exec rm -rf {} +
  # FINN (finn-plus) for the consumer tests (tests/finn_run.py): its QONNX frontend,
  # streamlining, convert_to_hw and executor are plain Python over qonnx, but its wheel pins
  # numpy/onnx/onnxruntime versions other than ours and its default install pulls torch with
  # CUDA (6 GB). So it lives in .venv/finn, --no-deps, with the few pure dependencies those
  # modules import (24 MB); only FINN's LayerNorm execution needs torch (see tests/finn_run.py).
  rm -rf .venv/finn
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
    --target .venv/finn $(grep -E '^# finn: ' constraints.txt | cut -d' ' -f3-)
  echo "$want" > "$stamp"
fi
