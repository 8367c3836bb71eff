"""``qkeras2qonnx`` command line, built on the shared ``qonnx_ingest.cli.command`` plumbing.

Only the standard library and qonnx_ingest are imported until a conversion starts, so
``--help`` is instant and never loads TensorFlow.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from qonnx_ingest.cli.command import ModelScan, default_output, make_parser, positive_int, run
from qonnx_ingest.cli.versions import BASE, KERAS


def _isolated_versions() -> dict:
    """qkeras-v3 and hgq2 live in directories of their own (each ships a ``qkeras``)."""
    from qkeras2qonnx.environment import flavour

    return {"qkeras-v3": flavour.qkeras3_dir(), "hgq2": flavour.hgq2_dir()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = make_parser(
        "qkeras2qonnx",
        "Convert a quantized QKeras (0.9 or qkeras-v3) or HGQ2 model to QONNX: one "
        "Quant/BipolarQuant node per quantizer, or an error naming the layer and quantizer "
        "that cannot be converted exactly.",
        "QKeras or HGQ2 model: full-model .h5, .keras, Keras SavedModel directory, or .json "
        "architecture (with --weights)",
        versions=(*BASE, *KERAS),
        isolated_versions=_isolated_versions,
        examples=(
            ("model.h5", "write model.onnx beside model.h5"),
            (
                "arch.json --weights arch_weights.h5 -o model.onnx --verify",
                "a JSON architecture and its weights, compared with Keras predict",
            ),
            (
                "models/ -o out/ --jobs 2",
                "each model in models/ (X.json with X_weights.h5) into out/",
            ),
        ),
    )
    parser.add_argument(
        "--weights", metavar="WEIGHTS.h5", help="weights file (required for a .json architecture)"
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        metavar="N",
        help="fix the batch dimension to N (default: dynamic)",
    )
    parser.add_argument(
        "--allow-lambda",
        action="store_true",
        help="load Lambda layers and modules the configuration names beyond Keras, TensorFlow "
        "and QKeras: both run Python code the model file brings",
    )
    parser.add_argument(
        "--channels-last",
        action="store_true",
        help="NHWC throughout, Conv / MaxPool / BatchNormalization as qonnx's channels-last "
        "ops, for hls4ml and FINN (fixes the batch to 1 unless --batch-size is given)",
    )
    return run(
        parser,
        _convert,
        argv,
        extra_inputs=lambda a: [a.weights] if a.weights else [],
        verify=_verify,
        scan=ModelScan(
            (".h5", ".keras"),
            marker="saved_model.pb",
            pairs={".json": ("_weights.h5", ".weights.h5")},
            pair_option="--weights",
            workers="qkeras2qonnx.cli",
            route=_worker_kind,
        ),
    )


def _worker_kind(model: str) -> str:
    """A folder's models go to reused workers (``qonnx_ingest.cli.batch_workers``), each of one
    QKeras flavour: a process cannot import both (``flavour``)."""
    from pathlib import Path

    from qkeras2qonnx.environment import flavour

    path = Path(model)
    return flavour.file_flavour(path) if path.exists() else flavour.KERAS2


def warm_up(kind: str) -> None:
    """A reused worker's imports (TensorFlow, QKeras, tf2onnx) for models of flavour ``kind``,
    made before its first model's clock starts."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from qkeras2qonnx.environment import flavour

    flavour.enter(kind)
    from qkeras2qonnx.environment.backend import custom_objects
    from qkeras2qonnx.pipeline import convert  # noqa: F401  (the layer table)

    custom_objects()
    from qkeras2qonnx.compat.tf2onnx import restart_name_counter

    restart_name_counter()  # takes the fresh process's counter now; each conversion restarts it


def between_models() -> None:
    """A reused worker forgets the last model, so the next converts as in a fresh process:
    Keras's session (generated layer names, graphs); tf2onnx's node-name counter is restarted
    by each conversion (``compat.tf2onnx.restart_name_counter``)."""
    import sys

    from qkeras2qonnx.environment import flavour

    if flavour.process_flavour() is not None and "qkeras2qonnx.environment.backend" in sys.modules:
        from qkeras2qonnx.environment.backend import keras

        keras().backend.clear_session()


# what loading and converting a QKeras model imports: all in the keras extra (h5py with TF)
KERAS_MODULES = ("tensorflow", "tf_keras", "qkeras", "tf2onnx", "h5py")  # the one to name first
TFLITE_IDENTIFIER = b"TFL3"


def _convert(args: argparse.Namespace):
    _refuse_tflite(args.input)
    status = getattr(args, "status", None)
    if status is not None:
        status.phase("importing TensorFlow")
    # Quieten TensorFlow's C++ start-up chatter; must be set before TensorFlow is imported.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    _require_keras_extra(args.input)
    if status is not None:
        status.phase(f"converting {args.input}")
    from qkeras2qonnx.environment.load import load_model
    from qkeras2qonnx.pipeline import convert

    # Loaded once: --verify runs this same Keras model as the reference.
    args.keras_model = load_model(args.input, weights=args.weights, allow_lambda=args.allow_lambda)
    model = convert(
        args.keras_model,
        opset=args.opset,
        batch_size=args.batch_size,
        int_quant=args.int_quant,
        channels_last=args.channels_last,
    )
    model.graph.name = default_output(args.input).stem  # the file's name, not "tf2onnx"
    return model


def _verify(args: argparse.Namespace, model):
    from qkeras2qonnx.reference import verify

    return verify(args.keras_model, model, inputs=args.verify_count, inputs_path=args.verify_inputs)


def _refuse_tflite(path: str) -> None:
    """A .tflite flatbuffer carries "TFL3" at bytes 4..8: name the tool that reads it."""
    from qonnx_ingest.errors import InputError

    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return  # a directory (SavedModel) or unreadable: loading says what is wrong
    if head[4:8] == TFLITE_IDENTIFIER:
        raise InputError("this is a TFLite model: use tflite2qonnx", path)


def _require_keras_extra(path: str) -> None:
    """Check that what conversion needs is installed, so a base install (no TensorFlow) hears
    how to get it instead of an import error from deep inside loading. Found, not imported:
    which QKeras to import (0.9 or qkeras-v3) is the model file's to decide. An HGQ2 ``.keras``
    file hears the hgq2 extra's command (and hgq2's own, if it is missing too)."""
    import importlib.util

    from qonnx_ingest.errors import InputError
    from qonnx_ingest.install_hints import MODULES, extra_hint

    for name in KERAS_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ImportError as exc:
            found, name = False, getattr(exc, "name", None) or name
        if not found:
            missing = MODULES.get(name.split(".")[0], (name,))[0]
            hint = extra_hint("keras")
            if _names_hgq2(path):
                hint = extra_hint("hgq2") + _hgq2_apart_hint()
            raise InputError(
                f"qkeras2qonnx needs TensorFlow and QKeras, and {missing} is not installed: {hint}"
            ) from None


def _names_hgq2(path: str) -> bool:
    """True for a ``.keras`` archive whose configuration names HGQ2's ``hgq`` modules (read
    without Keras; an HDF5 file would need h5py, which a base install lacks)."""
    import re
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            return re.search(rb'"module":\s*"hgq[."]', archive.read("config.json")) is not None
    except (OSError, KeyError, zipfile.BadZipFile):
        return False


def _hgq2_apart_hint() -> str:
    import shlex
    import sys

    from qkeras2qonnx.environment import flavour

    if flavour.hgq2_dir() is not None:
        return ""
    return f", then {shlex.quote(sys.executable)} -m qkeras2qonnx.apart hgq2"
