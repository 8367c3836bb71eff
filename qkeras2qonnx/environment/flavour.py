"""Which QKeras a model needs, and whether this process can run it.

Two QKeras generations install the same top-level package ``qkeras``: QKeras 0.9 on Keras 2
(tf_keras, TensorFlow imported with ``TF_USE_LEGACY_KERAS=1``) and qkeras-v3 on Keras 3. A
process can import only one of them, so:

* the environment holds QKeras 0.9 in site-packages and qkeras-v3 in a ``pip --target``
  directory (``scripts/setup.sh``: ``.venv/qkeras-v3``; elsewhere ``$QKERAS2QONNX_QKERAS3_DIR``);
* the model chooses: a ``.keras`` archive or HDF5 file written by Keras 3, or an HDF5 model
  naming a layer only qkeras-v3 has, needs Keras 3; an in-memory model needs the Keras its
  class comes from; everything else (legacy HDF5, SavedModel, JSON) needs Keras 2;
* the process commits on first use (TensorFlow or ``qkeras`` imported) and keeps that flavour.
  ``pipeline.convert`` runs a model of the other flavour in a subprocess (``isolated``); a
  bare ``load_model`` cannot return a model across processes and refuses.

Importing this module imports neither TensorFlow nor Keras.
"""

from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

from qonnx_ingest.errors import ConversionError, InputError

KERAS2, KERAS3 = "keras2", "keras3"
QKERAS3_PIN = "qkeras-v3==1.2.1"
DIR_VARIABLE = "QKERAS2QONNX_QKERAS3_DIR"
HGQ2_PIN = "hgq2==0.2.0"
HGQ2_DIR_VARIABLE = "QKERAS2QONNX_HGQ2_DIR"
# Layers only qkeras-v3 defines: a legacy HDF5 naming one cannot load in QKeras 0.9.
QKERAS3_ONLY_LAYERS = frozenset(
    {"QDenseBatchnorm", "QDepthwiseConv2DTranspose", "QSeparableConv2DTranspose", "QScaleShift"}
)


def qkeras3_dir() -> Path | None:
    """The directory holding qkeras-v3's ``qkeras`` package, if installed beside the venv."""
    configured = os.environ.get(DIR_VARIABLE)
    candidate = Path(configured) if configured else Path(sys.prefix) / "qkeras-v3"
    return candidate if (candidate / "qkeras" / "__init__.py").is_file() else None


def hgq2_dir() -> Path | None:
    """The directory holding HGQ2's ``hgq`` package (``.venv/hgq2``, or
    ``$QKERAS2QONNX_HGQ2_DIR``): apart, because the hgq2 wheel also ships a ``qkeras``."""
    configured = os.environ.get(HGQ2_DIR_VARIABLE)
    candidate = Path(configured) if configured else Path(sys.prefix) / "hgq2"
    return candidate if (candidate / "hgq" / "__init__.py").is_file() else None


def hgq2_missing_message() -> str:
    """The install commands: hgq2's dependencies (the ``hgq2`` extra, pinned), then hgq2 itself
    into the directory ``hgq2_dir`` looks in by default, beside this environment (``apart``)."""
    import shlex

    from qonnx_ingest.install_hints import extra_hint

    target = shlex.quote(str(Path(sys.prefix) / "hgq2"))
    python = shlex.quote(sys.executable)
    return (
        f"this model uses HGQ2 layers, but hgq2 is not installed: {extra_hint('hgq2')}, then "
        f"{python} -m qkeras2qonnx.apart hgq2 (installs {HGQ2_PIN} into {target}; or set "
        f"{HGQ2_DIR_VARIABLE} to where it is)"
    )


def process_flavour() -> str | None:
    """The flavour this process is committed to, or None while it can still choose."""
    qkeras = sys.modules.get("qkeras")
    if qkeras is not None:
        return KERAS3 if _is_qkeras3(qkeras) else KERAS2
    if _entered is not None:
        return _entered
    if "tensorflow" in sys.modules or "tf_keras" in sys.modules:
        return KERAS2 if _legacy_keras_requested() else KERAS3
    return None


def enter(flavour: str) -> None:
    """Commit this process to ``flavour`` (before TensorFlow or QKeras is imported), or raise
    ConversionError if it already committed to the other one."""
    current = process_flavour()
    if current == flavour:
        if flavour == KERAS3:
            _put_qkeras3_first()
        return
    if current is not None:
        raise ConversionError(
            f"this model needs {_NAMES[flavour]}, but this process already imported "
            f"{_NAMES[current]} and cannot import both; convert the file with "
            "qkeras2qonnx.convert(path) (it runs such models in a subprocess) or in a new process"
        )
    global _entered
    if flavour == KERAS3:
        _put_qkeras3_first()
        os.environ["TF_USE_LEGACY_KERAS"] = "0"
    else:
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
    _entered = flavour


def can_run(flavour: str) -> bool:
    """True if this process runs ``flavour`` itself (already committed to it, or free)."""
    current = process_flavour()
    return current is None or current == flavour


def qkeras3_available() -> bool:
    """True if qkeras-v3 can be imported in a Keras 3 process (its directory, or a Keras 3
    environment whose ``qkeras`` is qkeras-v3). HGQ2 models do not need it."""
    return qkeras3_dir() is not None or _qkeras3_importable()


def require_qkeras3() -> None:
    """Raise InputError with the install command unless qkeras-v3 is available: called when a
    Keras 3 model names QKeras layers, not for every Keras 3 model (HGQ2 needs only hgq2)."""
    if not qkeras3_available():
        raise InputError(_missing_message())


def model_flavour(model: Any) -> str:
    """Keras 3 for ``keras`` model classes, Keras 2 for ``tf_keras`` (and anything else)."""
    for cls in type(model).__mro__:
        root = cls.__module__.split(".")[0]
        if root == "keras":
            return KERAS3
        if root == "tf_keras":
            return KERAS2
    return KERAS2


def needed(source: Any) -> str:
    """The flavour an in-memory model or a saved model (path) needs."""
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        return file_flavour(path) if path.exists() else KERAS2
    return model_flavour(source)


def file_flavour(path: Path) -> str:
    """The flavour a saved model needs, read from the file without importing Keras."""
    if path.is_dir():
        return KERAS2
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                metadata = json.loads(archive.read("metadata.json"))
            return KERAS3 if _major(metadata.get("keras_version")) >= 3 else KERAS2
        import h5py

        if h5py.is_hdf5(path):
            with h5py.File(path, "r") as f:
                version = f.attrs.get("keras_version")
                config = f.attrs.get("model_config")
            if _major(version) >= 3:
                return KERAS3
            if config is not None and _class_names(json.loads(config)) & QKERAS3_ONLY_LAYERS:
                return KERAS3
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        pass  # unreadable: the loader reports it in its own words
    return KERAS2


def qkeras3_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a subprocess that runs qkeras-v3 (for ``isolated`` and the tests)."""
    env = dict(os.environ if base is None else base)
    directory = qkeras3_dir()  # absent: only HGQ2 and plain Keras 3 models run there
    project = str(Path(__file__).resolve().parents[1])
    paths = [str(directory)] if directory is not None else []
    paths += [project, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    hgq2 = hgq2_dir()
    if hgq2 is not None:
        paths.append(str(hgq2))
        env[HGQ2_DIR_VARIABLE] = str(hgq2)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["TF_USE_LEGACY_KERAS"] = "0"
    if directory is not None:
        env[DIR_VARIABLE] = str(directory)
    return env


def keras2_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a subprocess that runs QKeras 0.9 on tf_keras."""
    env = dict(os.environ if base is None else base)
    directory = qkeras3_dir()
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    for apart in (directory, hgq2_dir()):
        if apart is not None:
            paths = [p for p in paths if Path(p).resolve() != apart.resolve()]
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), *paths])
    env["TF_USE_LEGACY_KERAS"] = "1"
    return env


_entered: str | None = None  # set by enter() before anything is imported
_NAMES = {KERAS2: "QKeras 0.9 on Keras 2 (tf_keras)", KERAS3: "qkeras-v3 on Keras 3"}


def _put_qkeras3_first() -> None:
    hgq2 = hgq2_dir()  # HGQ2 is Keras 3 too; its directory holds only ``hgq``
    if hgq2 is not None and str(hgq2) not in sys.path:
        sys.path.append(str(hgq2))
    directory = qkeras3_dir()
    if directory is None:
        return  # qkeras-v3 importable as it is, or absent (``require_qkeras3`` says so)
    if sys.path[:1] != [str(directory)]:
        sys.path.insert(0, str(directory))


def _missing_message() -> str:
    """Where ``qkeras3_dir`` looks by default: beside this interpreter's environment, any venv."""
    import shlex

    target = shlex.quote(str(Path(sys.prefix) / "qkeras-v3"))
    return (
        f"this model needs {_NAMES[KERAS3]}, which is not installed: "
        f"pip install --no-deps --target {target} {QKERAS3_PIN} (or set {DIR_VARIABLE} to "
        "where it is)"
    )


def _is_qkeras3(module: Any) -> bool:
    return _major(getattr(module, "__version__", "0")) >= 1


def _qkeras3_importable() -> bool:
    """True if the ``qkeras`` found on sys.path is qkeras-v3 itself (a Keras 3 environment)."""
    import importlib.util

    spec = importlib.util.find_spec("qkeras")
    if spec is None or spec.origin is None:
        return False
    return (Path(spec.origin).parent / "qdense_batchnorm.py").is_file()


def _legacy_keras_requested() -> bool:
    # TensorFlow's own test (tensorflow/__init__.py).
    return os.environ.get("TF_USE_LEGACY_KERAS") in ("true", "True", "1")


def _major(version: Any) -> int:
    if isinstance(version, bytes):
        version = version.decode()
    try:
        return int(str(version).split(".")[0])
    except ValueError:
        return 0


def _class_names(obj: Any) -> set[str]:
    if isinstance(obj, dict):
        names = {obj["class_name"]} if isinstance(obj.get("class_name"), str) else set()
        for child in obj.values():
            names |= _class_names(child)
        return names
    if isinstance(obj, list):
        return set().union(*(_class_names(c) for c in obj)) if obj else set()
    return set()
