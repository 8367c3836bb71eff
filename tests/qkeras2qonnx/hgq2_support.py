"""Running HGQ2 from the test process, which has imported QKeras 0.9 (see ``qkeras3_support``).

HGQ2 is Keras 3: its models are built, run (HGQ2's own predict) and converted in memory by
``hgq2_models.py`` in a subprocess with the Keras 3 environment (``flavour`` puts hgq2's
directory on its path); this process compares the files, in qonnx's executor and in
onnxruntime on the Quant nodes lowered to standard ops.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from qkeras3_support import run_qkeras3

from qkeras2qonnx.environment import flavour
from qonnx_ingest.execute import execute_qonnx
from support import built_once


def built_by(builder: str, tmp_path_factory, *args) -> Path:
    """A fresh directory that the HGQ2 builder script ``builder`` filled in a Keras 3
    subprocess. The test command installs hgq2 (scripts/setup.sh): its absence fails."""
    root = tmp_path_factory.mktemp(Path(builder).stem)
    _build(builder, root, *args)
    return root


def _build(builder: str, root: Path, *args) -> None:
    if flavour.hgq2_dir() is None:
        pytest.fail("hgq2 is not installed beside the venv: run `bash scripts/setup.sh`")
    run_qkeras3(builder, root, *args)


def made_hgq2_models(tmp_path_factory) -> Path:
    """The directory ``hgq2_models.py`` filled, once per test run (~1 minute; two test files
    read it, and xdist workers share it: ``support.built_once``)."""
    return built_once(tmp_path_factory, "hgq2_models", lambda root: _build("hgq2_models.py", root))


def feeds(model: onnx.ModelProto, reference: dict, batch: int) -> dict[str, np.ndarray]:
    return {vi.name: reference[f"x{batch}_{j}"] for j, vi in enumerate(model.graph.input)}


def onnxruntime_forms(model: onnx.ModelProto) -> dict[str, object]:
    """onnxruntime sessions (graph optimizations off: the files as written) on the model with
    its Quant nodes lowered to standard ops (``--verify``'s runner) and on ``--format qcdq``."""
    import onnxruntime as ort

    from qonnx_ingest.qcdq import to_qcdq
    from qonnx_ingest.quant_lowering import lower_quants

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return {
        form: ort.InferenceSession(
            lowered.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        for form, lowered in (("standard ops", lower_quants(model)), ("qcdq", to_qcdq(model)))
    }


def assert_exact_in_both_runtimes(
    model: onnx.ModelProto, reference: dict, *, bit_equal: bool = False
) -> None:
    """qonnx's executor, and onnxruntime on the standard-op and the QCDQ form, equal HGQ2's
    predict at batch 1 and 8 (1e-6 relative, the figures measured are 0; ``bit_equal``: 0)."""
    sessions = onnxruntime_forms(model)
    for batch in (1, 8):
        inputs, want = feeds(model, reference, batch), reference[f"y{batch}"]
        tolerance = 0.0 if bit_equal else 1e-6 * max(1.0, float(np.abs(want).max()))
        got = execute_qonnx(model, inputs)[model.graph.output[0].name]
        rtol = 0.0 if bit_equal else 1e-6
        np.testing.assert_allclose(got, want, rtol=rtol, atol=tolerance)
        for form, session in sessions.items():
            got = session.run(None, inputs)[0]
            np.testing.assert_allclose(got, want, rtol=rtol, atol=tolerance, err_msg=form)
