#!/usr/bin/env bash
# Creates .venv (Python 3.11) and installs the project with every extra, pinned by
# constraints.txt. Re-running is cheap: it reinstalls only when the pins or setup.cfg change.
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
want=$(cat constraints.txt setup.cfg pyproject.toml | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing pinned dependencies (first run: a few minutes, TensorFlow is ~2.5 GB)"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=23"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check \
    -c constraints.txt -e ".[keras,test,hls4ml]"
  echo "$want" > "$stamp"
fi
