"""Wall time of ``qkeras2qonnx ../shared/corpus/qkeras -o OUT --jobs N`` (folder mode) and of
its first result line: the figure reused workers (one TensorFlow import per worker) are for.

    .venv/bin/python scripts/bench/run.py qkeras-folder [--jobs 2]

Prints one line per model as it arrives (with the time since the start), then the totals. It
is a benchmark, not a test: the figure depends on the machine and on its load.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT.parent / "shared" / "corpus" / "qkeras"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--folder", type=Path, default=FOLDER)
    args = parser.parse_args()
    if not args.folder.is_dir():
        print(f"no QKeras folder at {args.folder}", file=sys.stderr)
        return 2
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    with tempfile.TemporaryDirectory(prefix="bench-qkeras-folder-") as out:
        command = [sys.executable, "-m", "qkeras2qonnx", str(args.folder), "-o", f"{out}/"]
        command += ["--jobs", str(args.jobs)]
        start = time.perf_counter()
        first = None
        with subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env) as child:
            for line in child.stdout:
                now = time.perf_counter() - start
                if first is None and line.startswith("qkeras2qonnx: "):
                    first = now
                print(f"{now:7.1f} s  {line.rstrip()}", flush=True)
        wall = time.perf_counter() - start
        models = len(list(Path(out).glob("*.onnx")))
    print(
        f"folder {args.folder} --jobs {args.jobs}: {models} models written, exit "
        f"{child.returncode}, first line after {first or 0:.1f} s, wall time {wall:.1f} s "
        f"(load average {os.getloadavg()[0]:.1f})"
    )
    return child.returncode


if __name__ == "__main__":
    raise SystemExit(main())
