"""The pip command that installs an extra, as it works where this code runs.

From a clone (pyproject.toml and constraints.txt beside the packages) the command installs the
clone itself with the verified pins; from an installed wheel it names the distribution, for
when it is published. Standard library only: the hints are printed on a base install.
"""

from __future__ import annotations

import shlex
from pathlib import Path

DISTRIBUTION = "qonnx-ingest"
PROJECT_ROOT = Path(__file__).resolve().parents[1]


def extra_hint(extra: str) -> str:
    """``pip install ...`` for the optional dependencies ``extra`` (keras, verify, hls4ml)."""
    if (PROJECT_ROOT / "pyproject.toml").is_file() and (PROJECT_ROOT / "constraints.txt").is_file():
        where = shlex.quote(str(PROJECT_ROOT))
        return f"""pip install -c constraints.txt ".[{extra}]" (run in {where})"""
    return f"""pip install "{DISTRIBUTION}[{extra}]\""""
