"""The one dispatcher behind ``scripts/bench/run.py`` and ``scripts/sweep/run.py``: a group's
scripts stay runnable on their own; the group's entry point names them and runs one."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dispatch(here: Path, table: dict[str, tuple[str, str]], argv: list[str], usage: str) -> int:
    """Run ``table[argv[0]]``'s script (a module in ``here``) as ``__main__`` with the rest of
    ``argv``; no name, ``list`` or an unknown one prints the table (exit 0, 0, 2)."""
    name, rest = (argv[0], argv[1:]) if argv else ("list", [])
    if name not in table:
        out = sys.stdout if name in ("list", "-h", "--help") else sys.stderr
        print(usage, file=out)
        width = max(map(len, table))
        for key, (_, what) in table.items():
            print(f"  {key:<{width}}  {what}", file=out)
        return 0 if out is sys.stdout else 2
    script = here / f"{table[name][0]}.py"
    for path in (str(ROOT), str(here)):  # the packages; the group's sibling modules
        if path not in sys.path:
            sys.path.insert(0, path)
    sys.argv = [str(script), *rest]
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0
