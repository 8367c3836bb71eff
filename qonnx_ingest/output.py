"""The end both converters share: one record of the output options, the passes they add after
the converter's own graph, the verification against the source, and the save.

A converter builds and finishes its graph in its own way (QKeras through tf2onnx, TFLite
operator by operator), reading the decisions made here (``OutputOptions.batch``); then it
hands the model and its source's reference to ``finish_output``, which runs
``output_passes`` (static shapes, the asked format), verifies what it will save and saves
it. The consumer forms (``--format finn`` / ``hls4ml``, ``qonnx_ingest.targets``) and QCDQ
plug in through ``FORMATS``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import onnx

from qonnx_ingest import DEFAULT_OPSET
from qonnx_ingest.errors import InputError
from qonnx_ingest.passes import Pass, PassResult, run_passes

if TYPE_CHECKING:
    from qonnx_ingest.verification import Verification

# the converted model's forms: ``format=`` / ``--format``; each but qonnx's is a lowering of it,
# named "module:function" (loaded on use: --help and the TFLite path stay light)
FORMATS: Mapping[str, str | None] = {
    "qonnx": None,
    "qcdq": "qonnx_ingest.qcdq:to_qcdq",  # QuantizeLinear/Clip/DequantizeLinear, onnxruntime
    "finn": "qonnx_ingest.targets.finn:to_finn",
    "hls4ml": "qonnx_ingest.targets.hls4ml:to_hls4ml",
}
# a source's reference: runs the source framework and the converted model, returns the figures
Reference = Callable[[onnx.ModelProto], "Verification"]


def check_format(format: str) -> None:
    if format not in FORMATS:
        raise InputError(f"format must be one of {', '.join(FORMATS)}, got {format!r}")


@dataclass(frozen=True)
class OutputOptions:
    """What the caller asked of the output, checked and decided once for both converters.

    ``batch_size`` None keeps a dynamic batch; ``channels_last`` (NHWC throughout, qonnx's
    channels-last ops) needs static shapes, so its batch is 1 unless given (``batch``).
    ``input_shapes`` fix named inputs (in the converted model's layout). ``format`` is a key
    of ``FORMATS``; ``strict`` refuses the QCDQ lowering's tie differences. ``verify`` runs
    the source's reference on what is saved; ``output_path`` is written last, never over one
    of ``inputs`` (the source's files).
    """

    opset: int = DEFAULT_OPSET
    int_quant: bool = False
    channels_last: bool = False
    batch_size: int | None = None
    input_shapes: Mapping[str, Sequence[int]] | None = None
    format: str = "qonnx"
    strict: bool = False
    verify: bool = False
    output_path: str | os.PathLike | None = None
    inputs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_format(self.format)
        size = self.batch_size
        if size is not None and (isinstance(size, bool) or int(size) < 1):
            raise InputError(f"batch_size must be a positive integer, got {size!r}")

    @property
    def batch(self) -> int | None:
        """The batch the converted model has: qonnx's channels-last ops need static shapes."""
        return 1 if self.channels_last and self.batch_size is None else self.batch_size

    def check_output(self) -> None:
        """Refuse an unusable ``output_path`` before the expensive part."""
        if self.output_path is not None:
            from qonnx_ingest.save import check_output_path

            check_output_path(self.output_path, self.inputs)


def in_format(model: onnx.ModelProto, format: str, strict: bool = False) -> onnx.ModelProto:
    """``model`` in ``format``: "qonnx" as it is, otherwise a lowered copy (``FORMATS``)."""
    check_format(format)
    target = FORMATS[format]
    if target is None:
        return model
    import importlib

    module, _, name = target.partition(":")
    lower = getattr(importlib.import_module(module), name)
    return lower(model, strict=strict) if format == "qcdq" else lower(model)


def output_passes(options: OutputOptions) -> list[Pass]:
    """Every pass the output options add after a converter's own, in order: an output step
    is added here. The asked static shapes are a no-op where the converter fixed them already
    (QKeras gives tf2onnx the batch; channels-last fixes the shapes before finishing, and a
    dynamic batch at 1, ``batch``, while keeping one the model fixes)."""
    passes: list[Pass] = []
    if options.batch_size is not None or options.input_shapes:
        from qonnx_ingest.static_shapes import fix_input_shapes

        sizes = {"batch_size": options.batch_size, "shapes": options.input_shapes}
        passes.append(partial(fix_input_shapes, **sizes))
    if options.format != "qonnx":
        passes.append(partial(_lowered, format=options.format, strict=options.strict))
    return passes


def _lowered(model: onnx.ModelProto, *, format: str, strict: bool) -> PassResult:
    return in_format(model, format, strict=strict), True


def finish_output(
    model: onnx.ModelProto, options: OutputOptions, reference: Reference | None = None
) -> tuple[onnx.ModelProto, Verification | None]:
    """The end of a conversion: ``output_passes``, then, under ``options.verify``, the source's
    ``reference`` on the model to be saved (``VerificationError``, nothing saved, when they
    disagree), then the save. The model and the figures (None without ``verify``)."""
    model, _ = run_passes(output_passes(options), model)
    checked = None
    if options.verify:
        if reference is None:
            raise InputError("verify needs the source model, which this conversion has not")
        checked = reference(model)
        checked.require_pass()
    save_output(model, options)
    return model, checked


def save_output(model: onnx.ModelProto, options: OutputOptions) -> onnx.ModelProto:
    """Write ``model`` to ``options.output_path`` (atomically) if there is one."""
    if options.output_path is not None:
        from qonnx_ingest.save import save_model

        save_model(model, options.output_path, inputs=options.inputs)
    return model
