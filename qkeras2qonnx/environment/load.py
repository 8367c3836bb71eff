"""Load a Keras model from the formats QKeras users save, by content rather than by suffix.

Full model .h5 (any suffix, HDF5 content), Keras v3 ``.keras`` zip, Keras SavedModel directory,
or a ``.json`` architecture plus weights. Stored code is refused from the configuration
*before* deserializing: a Lambda layer executes code kept in the file, and Keras v3 configs name
the module of each object, which tf_keras imports (running its top-level code) even in safe
mode, so only Keras's, TensorFlow's and QKeras's own modules may be named.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from qkeras2qonnx.environment import flavour
from qkeras2qonnx.environment.backend import custom_objects, keras
from qonnx_ingest.errors import ConversionError, InputError

# Modules a configuration may name (``module`` keys): the frameworks' own, and builtins,
# which tf_keras resolves to Keras functions by name without importing anything.
# hgq: HGQ2, installed beside the venv like qkeras-v3 (``flavour``)
_TRUSTED_MODULES = ("keras", "tf_keras", "tensorflow", "qkeras", "hgq", "builtins")
_FORMATS = (
    "a full-model .h5, a .keras archive, a Keras SavedModel directory or a .json architecture"
)


def load_model(source: Any, *, weights: Any = None, allow_lambda: bool = False) -> Any:
    """A built Keras model from an in-memory model or a path (plus an optional weights file).

    In-memory models are the caller's own code and are taken as they are.
    """
    if hasattr(source, "layers") and hasattr(source, "get_config"):
        flavour.enter(flavour.model_flavour(source))  # a clear error if this process cannot
        model = source
    else:
        path = Path(source)
        if not path.exists():
            raise InputError("no such file or directory", str(path))
        model = _load_path(path, allow_lambda, has_weights=weights is not None)
    if weights is not None:
        load_weights(model, weights)
    return model


def load_weights(model: Any, weights: Any) -> None:
    """Load weights by file content: legacy HDF5 layout (whatever the file is called, even
    ``*.weights.h5``, which tf_keras would read as the Keras v3 layout), Keras v3 HDF5 layout,
    or a TensorFlow checkpoint prefix."""
    import h5py

    path = Path(weights)
    checkpoint = Path(f"{path}.index").exists()
    if not path.exists() and not checkpoint:
        raise InputError("no such weights file", str(path))
    try:
        if flavour.model_flavour(model) == flavour.KERAS3:
            model.load_weights(str(path))
            return
        if not checkpoint and h5py.is_hdf5(path):
            with h5py.File(path, "r") as f:
                if "layer_names" in f.attrs or "model_weights" in f:
                    from qkeras2qonnx.compat.keras import load_weights_from_hdf5_group

                    group = f if "layer_names" in f.attrs else f["model_weights"]
                    load_weights_from_hdf5_group(group, model)
                    return
            if not path.name.endswith(".weights.h5"):
                raise InputError("a Keras v3 weights file must be named *.weights.h5", str(path))
        model.load_weights(str(path))
    except ConversionError:
        raise
    except Exception as exc:
        raise InputError(f"cannot load these weights into the model: {exc}", str(path)) from exc


def _load_path(path: Path, allow_lambda: bool, has_weights: bool) -> Any:
    import h5py

    # Before Keras is imported: the file decides which QKeras this process runs (``flavour``).
    flavour.enter(flavour.file_flavour(path))
    if path.is_dir():
        return _load_saved_model(path, allow_lambda)
    if h5py.is_hdf5(path):
        return _load_hdf5(path, allow_lambda)
    if zipfile.is_zipfile(path):
        return _load_keras_archive(path, allow_lambda)
    return _load_json(path, allow_lambda, has_weights)


def _load_hdf5(path: Path, allow_lambda: bool) -> Any:
    import h5py

    try:
        with h5py.File(path, "r") as f:
            config = f.attrs.get("model_config")
            weights_only = "layer_names" in f.attrs or "model_weights" in f
    except OSError as exc:  # truncated or damaged: h5py's message says which
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"corrupt or truncated HDF5 file ({first})", str(path)) from None
    if config is None:
        if weights_only:
            raise InputError(
                "this HDF5 file holds only weights: pass the architecture (.json) as the "
                "model and this file as weights (--weights)",
                str(path),
            )
        raise InputError(f"HDF5 file without a Keras model; expected {_FORMATS}", str(path))
    _refuse_lambda(_json(config, path), allow_lambda, path)
    # tf_keras reads any non-directory, non-.keras-zip path as a legacy HDF5 model.
    args = _load_args(config)
    return _keras_load(path, lambda: keras().models.load_model(str(path), **args))


def _load_keras_archive(path: Path, allow_lambda: bool) -> Any:
    try:
        with zipfile.ZipFile(path) as archive:
            config = archive.read("config.json")
    except (KeyError, zipfile.BadZipFile):
        raise InputError(
            f"zip archive is not a Keras model; expected {_FORMATS}", str(path)
        ) from None
    _refuse_lambda(_json(config, path), allow_lambda, path)
    if path.suffix != ".keras":
        raise InputError("a Keras v3 model archive must be named *.keras", str(path))
    args = _load_args(config)
    return _keras_load(
        path, lambda: keras().models.load_model(str(path), safe_mode=not allow_lambda, **args)
    )


def _load_saved_model(path: Path, allow_lambda: bool) -> Any:
    metadata = path / "keras_metadata.pb"
    if not metadata.exists():
        raise InputError(
            "not a Keras SavedModel (no keras_metadata.pb): a plain TensorFlow SavedModel has "
            "no QKeras layers left to convert",
            str(path),
        )
    keras()
    from tf_keras.protobuf import saved_metadata_pb2

    saved = saved_metadata_pb2.SavedMetadata()
    saved.ParseFromString(metadata.read_bytes())
    _refuse_lambda([_json(n.metadata or "{}", path) for n in saved.nodes], allow_lambda, path)
    args = _load_args("".join(n.metadata for n in saved.nodes))
    return _keras_load(path, lambda: keras().models.load_model(str(path), **args))


def _load_json(path: Path, allow_lambda: bool, has_weights: bool) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
        config = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise InputError(f"unrecognized model file; expected {_FORMATS}", str(path)) from None
    if not (isinstance(config, dict) and "class_name" in config and "config" in config):
        raise InputError("JSON file is not a Keras model architecture", str(path))
    _refuse_lambda(config, allow_lambda, path)
    if not has_weights:
        raise InputError(
            "a .json architecture has no weights: pass the weights file (--weights)", str(path)
        )
    objects = _load_args(text)["custom_objects"]
    return _keras_load(path, lambda: keras().models.model_from_json(text, custom_objects=objects))


def _load_args(config: str | bytes) -> dict[str, Any]:
    """QKeras's objects, plus the pruning wrappers' when the configuration names one."""
    return {"custom_objects": {**custom_objects(), **_pruning_objects(config)}, "compile": False}


# tensorflow-model-optimization's wrappers (converted by ``qkeras_layers.pruning``)
PRUNING_WRAPPERS = frozenset({"PruneLowMagnitude"})


def _pruning_objects(config: str | bytes) -> dict[str, Any]:
    """Custom objects for the pruning wrappers a model configuration names (else nothing): the
    library is imported only then (its import takes seconds)."""
    text = config.decode("utf-8", "replace") if isinstance(config, bytes) else str(config)
    if not any(f'"{name}"' in text for name in PRUNING_WRAPPERS):
        return {}
    from tensorflow_model_optimization.python.core.sparsity.keras import pruning_wrapper

    return {"PruneLowMagnitude": pruning_wrapper.PruneLowMagnitude}


def _keras_load(path: Path, load: Callable[[], Any]) -> Any:
    try:
        if flavour.process_flavour() == flavour.KERAS3 and flavour.qkeras3_available():
            from qkeras2qonnx.environment.keras3_compat import fixed_classes

            with fixed_classes():
                return load()
        return load()
    except ConversionError:
        raise
    except Exception as exc:
        message = _line(f"{type(exc).__name__}: {exc}", first=True)
        root = _root_cause(exc)
        cause = _line(str(root), first=False)
        if ":" not in cause.split(" ")[0]:  # "ValueError: ..." is already typed
            cause = f"{type(root).__name__}: {cause}"
        if cause.split(": ", 1)[-1] not in message:  # Keras wraps the reason away
            message += f" (root cause: {cause})"
        raise InputError(f"Keras cannot load this model: {message}", str(path)) from exc


def _root_cause(exc: BaseException) -> BaseException:
    """The last exception of the chain: causes, and contexts too (Keras re-raises its layers'
    errors ``from None`` with a summary, leaving the reason in the context)."""
    seen = {id(exc)}
    while True:
        nxt = exc.__cause__ or exc.__context__
        if nxt is None or id(nxt) in seen:
            return exc
        seen.add(id(nxt))
        exc = nxt


def _line(text: str, *, first: bool, limit: int = 300) -> str:
    """The first (or last) non-blank line of ``text``: Keras puts its summary first and a
    traced error's own line last. Long ones are cut (Keras quotes whole configurations)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()] or [""]
    line = lines[0] if first else lines[-1]
    return line if len(line) <= limit else line[:limit] + "..."


def _json(text: str | bytes, path: Path) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"unreadable model configuration: {exc}", str(path)) from None


def _refuse_lambda(config: Any, allow_lambda: bool, path: Path) -> None:
    """Refuse stored code: Lambda layers, and modules outside the frameworks'; and a model
    whose framework is not installed (or not supported: HGQ v1), naming what to do."""
    _require_frameworks(config, path)
    if allow_lambda:
        return
    name = _find_lambda(config)
    if name is not None:
        raise InputError(
            f"Lambda layer {name!r}: loading it runs Python code stored in the file; if you "
            "trust the file, allow it with allow_lambda=True (--allow-lambda)",
            str(path),
        )
    module, class_name = next(_untrusted_modules(config), (None, None))
    if module is not None:
        raise InputError(
            f"the configuration names module {module!r} (for {class_name!r}): loading imports "
            "it, which runs its code; if you trust the file, allow it with allow_lambda=True "
            "(--allow-lambda)",
            str(path),
        )


def _require_frameworks(config: Any, path: Path) -> None:
    """HGQ v1 refused by name; HGQ2 and qkeras-v3 models without their library refused with
    the install command, before Keras reports an unknown layer."""
    names = _class_names(config)
    hgq1 = sorted(n for n in names if n.startswith("HGQ>"))
    if hgq1:
        raise InputError(
            f"this is an HGQ v1 model ({hgq1[0]!r}): HGQ v1 requires keras<3 and is not "
            "supported; port the model to HGQ2 (hgq2, docs/keras.md) and convert that",
            str(path),
        )
    if _names_hgq2(config):
        import importlib.util

        if flavour.hgq2_dir() is None and importlib.util.find_spec("hgq") is None:
            raise InputError(flavour.hgq2_missing_message(), str(path))
    if flavour.process_flavour() == flavour.KERAS3 and _names_qkeras(config, names):
        try:
            flavour.require_qkeras3()
        except InputError as exc:
            raise InputError(str(exc), str(path)) from None


def _class_names(obj: Any) -> set[str]:
    """Every ``class_name`` string in a (nested) Keras configuration."""
    found: set[str] = set()
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("class_name"), str):
                found.add(item["class_name"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _names_qkeras(config: Any, names: set[str]) -> bool:
    """True if a configuration names QKeras: a ``qkeras`` module or registered name, or a
    layer only qkeras-v3 has."""
    if names & flavour.QKERAS3_ONLY_LAYERS or any(n.startswith("qkeras>") for n in names):
        return True
    return any(m.split(".")[0] == "qkeras" for m in _modules(config))


def _modules(obj: Any) -> Iterator[str]:
    if isinstance(obj, dict):
        if isinstance(obj.get("module"), str):
            yield obj["module"]
        for child in obj.values():
            yield from _modules(child)
    elif isinstance(obj, list):
        for child in obj:
            yield from _modules(child)


def _untrusted_modules(obj: Any) -> Iterator[tuple[str, str]]:
    """(module, class name) of each object whose ``module`` is not a trusted framework's."""
    if isinstance(obj, dict):
        module = obj.get("module")
        if isinstance(module, str) and module and module.split(".")[0] not in _TRUSTED_MODULES:
            yield module, str(obj.get("class_name", "?"))
        children = obj.values()
    elif isinstance(obj, list):
        children = obj
    else:
        return
    for child in children:
        yield from _untrusted_modules(child)


def _names_hgq2(obj: Any) -> bool:
    """True if a (nested) Keras configuration names a class of HGQ2's ``hgq`` package."""
    if isinstance(obj, dict):
        module = obj.get("module")
        if isinstance(module, str) and module.split(".")[0] == "hgq":
            return True
        return any(_names_hgq2(child) for child in obj.values())
    if isinstance(obj, list):
        return any(_names_hgq2(child) for child in obj)
    return False


def _find_lambda(obj: Any) -> str | None:
    """The name of the first Lambda layer anywhere in a (nested) Keras configuration."""
    if isinstance(obj, dict):
        if obj.get("class_name") == "Lambda":
            config = obj.get("config")
            return str(config.get("name", "?")) if isinstance(config, dict) else "?"
        children = obj.values()
    elif isinstance(obj, list):
        children = obj
    else:
        return None
    for child in children:
        found = _find_lambda(child)
        if found is not None:
            return found
    return None
