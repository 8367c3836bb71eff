"""Running FINN (finn-plus, in ``.venv/finn``, apart from the main environment) on a QONNX
model: its dataflow steps and its executor after each one, in a subprocess
(``finn_worker.py``)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

FINN_DIR = Path(sys.prefix) / "finn"
WORKER = Path(__file__).with_name("finn_worker.py")
STEPS = (
    "qonnx_to_finn",
    "tidy_up",
    "streamline",
    "convert_to_hw",
    "create_dataflow_partition",
    "specialize_layers",
)


@dataclass
class FinnRun:
    reached: str | None  # the last step that completed
    outputs: dict[str, list[np.ndarray]]  # step -> graph outputs from FINN's executor
    ops: dict[str, list[str]]  # step -> op types in the model after it
    stopped: tuple[str, str] | None  # (step, FINN's message)


def require_finn() -> None:
    if not (FINN_DIR / "finn").is_dir():
        raise AssertionError(
            f"FINN is not installed in {FINN_DIR}: run `bash scripts/setup.sh` (the test "
            "command does)"
        )


def run_finn(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> FinnRun:
    """FINN's steps on ``model``, executing it on ``feeds`` (in graph-input order)."""
    require_finn()
    with tempfile.TemporaryDirectory() as tmp:
        path, inputs, result = (Path(tmp) / n for n in ("m.onnx", "in.npz", "out.npz"))
        onnx.save(model, path)
        np.savez(inputs, **{f"{k:03d}": feeds[i.name] for k, i in enumerate(model.graph.input)})
        done = subprocess.run(
            [sys.executable, str(WORKER), str(path), str(inputs), str(result)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0 or not result.exists():
            raise AssertionError(f"FINN's worker failed: {done.stderr[-2000:]}")
        data = dict(np.load(result))
    outputs: dict[str, list[np.ndarray]] = {}
    ops: dict[str, list[str]] = {}
    for key, value in data.items():
        if key == "__stopped__":
            continue
        step, what = key.split("/")
        if what == "ops":
            ops[step] = value.tolist()
        else:
            outputs.setdefault(step, []).append(value)
    stopped = tuple(data["__stopped__"].tolist()) if "__stopped__" in data else None
    reached = [s for s in STEPS if s in ops]
    return FinnRun(reached[-1] if reached else None, outputs, ops, stopped)
