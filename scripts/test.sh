#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh), then runs the linter and the whole test suite on every core
# (pytest-xdist, one test file per worker at a time so module fixtures are built once, the
# slowest files first: tests/conftest.py orders them, and --no-loadscope-reorder keeps that
# order instead of xdist's, most tests first), and prints the fifteen slowest tests.
# PYTEST_WORKERS=0 runs in one process (for debugging).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
workers=${PYTEST_WORKERS:-auto}
parallel=()
if [ "$workers" != 0 ]; then parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder); fi
.venv/bin/python -m pytest "${parallel[@]}" --durations=15 "$@"
