"""Running code under qkeras-v3 from the test process, which has imported QKeras 0.9.

One process can hold only one ``qkeras``, so the Keras 3 side (building models, qkeras-v3's
own predict, in-memory conversion) runs as a subprocess with the environment
``qkeras2qonnx.environment.flavour.qkeras3_environment`` gives, and hands back files (.keras,
.npz, .onnx).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx

from qkeras2qonnx.environment import flavour
from qonnx_ingest.execute import execute_qonnx
from support import built_once

HERE = Path(__file__).resolve().parent


def run_cli_on_keras3_file(*args: str | Path) -> subprocess.CompletedProcess:
    """``python -m qkeras2qonnx args`` in a fresh process without TF_USE_LEGACY_KERAS, as a
    user runs it on a Keras 3 file (the converter picks the flavour from the file)."""
    env = dict(os.environ, PYTHONPATH=os.getcwd(), TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TF_USE_LEGACY_KERAS", None)
    return subprocess.run(
        [sys.executable, "-m", "qkeras2qonnx", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def run_qkeras3(script: str, *args: str | Path, timeout: float = 900) -> None:
    """Run ``tests/qkeras2qonnx/<script>`` under qkeras-v3; fail with its stderr tail."""
    flavour.require_qkeras3()  # raises, naming the install command, if qkeras-v3 is missing
    env = flavour.qkeras3_environment()
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    done = subprocess.run(
        [sys.executable, str(HERE / script), *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def made_models(tmp_path_factory) -> Path:
    """The directory ``qkeras3_models.py`` filled, once per test run (slow: Keras 3 start-up,
    six models, their predictions and in-memory conversions; three test files read it, and
    xdist workers share it: ``support.built_once``)."""
    return built_once(
        tmp_path_factory, "qkeras3", lambda root: run_qkeras3("qkeras3_models.py", root)
    )


def assert_matches_reference(onnx_model: onnx.ModelProto, reference: dict) -> None:
    """The QONNX model (qonnx's executor) equals qkeras-v3's predict at batch 1 and 8,
    within 1e-6 relative."""
    name = onnx_model.graph.input[0].name
    for batch in (1, 8):
        x, y = reference[f"x{batch}"], reference[f"y{batch}"]
        got = execute_qonnx(onnx_model, {name: x})[onnx_model.graph.output[0].name]
        assert got.shape == y.shape
        np.testing.assert_allclose(got, y, rtol=1e-6, atol=1e-6 * max(1.0, float(np.abs(y).max())))


def keras2_era_hdf5(keras3_hdf5: Path, out: Path, version: str = "2.13.1") -> Path:
    """``keras3_hdf5`` rewritten as tf.keras 2 writes a legacy HDF5 model: ``keras_version``
    2.x, a Keras 2 configuration (plain dtype strings, ``batch_input_shape``, no ``module`` /
    ``registered_name``) and weights named ``layer/name:0``, same values in the same order.

    The models MLPerf Tiny and other projects trained with QKeras's git master (which has
    QDenseBatchnorm; the QKeras 0.9 release does not) are such files; the public ones sit
    behind Git LFS, so the tests make one from a qkeras-v3 model whose predict they know.
    """
    import json

    import h5py

    with h5py.File(keras3_hdf5, "r") as src, h5py.File(out, "w") as dst:
        config = _keras2_config(json.loads(src.attrs["model_config"]))
        dst.attrs.update(
            keras_version=version, backend="tensorflow", model_config=json.dumps(config)
        )
        weights, source = dst.create_group("model_weights"), src["model_weights"]
        weights.attrs.update(keras_version=version, backend="tensorflow")
        weights.attrs["layer_names"] = source.attrs["layer_names"]
        for layer in source.attrs["layer_names"]:
            group, names = weights.create_group(layer), []
            for name in source[layer].attrs["weight_names"]:
                name = name.decode() if isinstance(name, bytes) else str(name)
                short = name.split("/", 1)[1] + ":0"  # Keras 3 prefixes the model's name
                group.create_dataset(short, data=source[layer][name][()])
                names.append(short.encode())
            group.attrs["weight_names"] = np.array(names, dtype=object if names else np.float64)
    return out


def _keras2_config(obj):
    if isinstance(obj, dict):
        if obj.get("class_name") == "DTypePolicy":
            return obj["config"]["name"]
        skip = ("module", "registered_name", "optional")
        out = {k: _keras2_config(v) for k, v in obj.items() if k not in skip}
        if "batch_shape" in out:
            out["batch_input_shape"] = out.pop("batch_shape")
        return out
    if isinstance(obj, list):
        return [_keras2_config(v) for v in obj]
    return obj
