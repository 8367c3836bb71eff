"""``python -m qkeras2qonnx.apart hgq2 [qkeras-v3]``: install hgq2 / qkeras-v3 where
``flavour`` looks for them, each in a directory of its own beside the venv.

Both wheels ship a top-level ``qkeras`` package that would overwrite QKeras 0.9 in
site-packages, so each goes into ``<venv>/hgq2`` / ``<venv>/qkeras-v3`` with ``--no-deps``
(their dependencies come with the ``hgq2`` / ``keras`` extras, pinned by constraints.txt) and
only its own package and dist-info are kept. The pins are ``flavour``'s, the same as
constraints.txt's (a test checks). Used by the docs' HGQ2 install command and
scripts/setup.sh. Imports neither TensorFlow nor Keras.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from qkeras2qonnx.environment import flavour

# name -> (pin, directory beside the venv, what is kept: its package and its dist-info prefix)
LIBRARIES = {
    "hgq2": (flavour.HGQ2_PIN, "hgq2", ("hgq", "hgq2-")),
    "qkeras-v3": (flavour.QKERAS3_PIN, "qkeras-v3", ("qkeras", "qkeras_v3-")),
}


def pip_command(name: str, target: Path) -> list[str]:
    """The pip command that installs library ``name`` (a LIBRARIES key) into ``target``."""
    pin = LIBRARIES[name][0]
    return [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
            "--no-deps", "--target", str(target), pin]  # fmt: skip


def install(name: str, prefix: Path | None = None) -> Path:
    """Install ``name`` into ``<prefix>/<dir>`` (prefix: this venv), replacing what was there,
    and keep only its own package; return the directory."""
    _, directory, keep = LIBRARIES[name]
    target = (prefix or Path(sys.prefix)) / directory
    shutil.rmtree(target, ignore_errors=True)
    subprocess.run(pip_command(name, target), check=True)
    package, dist_info = keep
    for entry in target.iterdir():
        if entry.name != package and not entry.name.startswith(dist_info):
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m qkeras2qonnx.apart",
        description="Install hgq2 and/or qkeras-v3 (Keras 3) into directories of their own "
        "beside this venv, where qkeras2qonnx finds them.",
    )
    parser.add_argument("library", nargs="+", choices=sorted(LIBRARIES))
    args = parser.parse_args(argv)
    for name in args.library:
        try:
            target = install(name)
        except subprocess.CalledProcessError as exc:
            print(f"qkeras2qonnx.apart: pip failed (exit {exc.returncode})", file=sys.stderr)
            return 2
        print(f"qkeras2qonnx.apart: installed {LIBRARIES[name][0]} into {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
