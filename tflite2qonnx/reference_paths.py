"""--verify's TFLite runtimes: which one is the reference and which one measures TFLite's own
spread, chosen among those that actually run the model.

The reference is the first that runs of: the builtin reference kernels (the semantics the
file defines), the optimized builtin kernels (their resolver registers op versions the
reference resolver lacks: TILE version 3), TFLM's interpreter (TFLite Micro's Signal ops),
XNNPACK (MediaPipe's custom ops exist only in its delegate). A model whose 16x8
convolution or FULLY_CONNECTED carries an int32 bias without declaring it
(``quantized_bias_type`` unset) has TFLM's interpreter first: LiteRT's kernels then read the
bias as int64, past its end (a bug of theirs), where TFLM reads it by its type.

The spread (how far TFLite's own CPU paths differ, the allowance for quantized outputs) is
XNNPACK against the reference, or the other builtin resolver where XNNPACK fails to build
(OSNet), never the reference against itself unless nothing else runs it.
"""

from __future__ import annotations

import numpy as np
import onnx

from layout import stored_perms
from qonnx_ingest.errors import ReferenceUnavailable
from qonnx_ingest.native_stderr import silenced
from tflite2qonnx.tflm_reference import TflmInterpreter, needs_tflm

BUILTIN_REF = "builtin kernels"
BUILTIN = "optimized builtin kernels"
XNNPACK = "XNNPACK"
TFLM = "TFLM interpreter"
_SHORT = {BUILTIN_REF: "builtin", BUILTIN: "optimized builtin", XNNPACK: "XNNPACK", TFLM: "TFLM"}
# ops whose one kernel the reference resolver registers only up to an older version than the
# optimized one (register_ref.cc: TILE 1-2; version 3 adds no kernel of its own)
_REF_MAX_VERSION = {69: 2}  # BuiltinOperator.TILE
# the ops whose 16x8 kernels LiteRT dispatches on quantized_bias_type rather than the bias type
_BIAS_TYPED = {"CONV_2D": 2, "DEPTHWISE_CONV_2D": 2, "FULLY_CONNECTED": 2}


def open_path(source, kind: str, model: onnx.ModelProto | None = None):
    """An interpreter of ``kind`` on ``source`` (LiteRT's API; TFLM's behind the same
    methods), inputs resized to ``model``'s static shapes; ReferenceUnavailable if it fails."""
    if kind == TFLM:
        return TflmInterpreter(source)
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        from qonnx_ingest.install_hints import extra_hint

        raise ReferenceUnavailable(
            f"--verify needs the TFLite interpreter: {extra_hint('verify')}"
        ) from None
    kwargs = (
        {"model_content": bytes(source)}
        if isinstance(source, bytes | bytearray | memoryview)
        else {"model_path": str(source)}
    )
    if kind == BUILTIN_REF:
        kwargs["experimental_op_resolver_type"] = OpResolverType.BUILTIN_REF
    elif kind == BUILTIN:
        kwargs["experimental_op_resolver_type"] = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    try:
        # the XNNPACK delegate's INFO line goes from C++ to fd 2: not for a Python caller
        with silenced():
            it = Interpreter(**kwargs)
            it.allocate_tensors()
            if model is not None:
                _resize_to(it, model, source)
    except (RuntimeError, ValueError) as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        lowered = _versions_lowered(source) if kind == BUILTIN_REF else None
        if lowered is not None:
            return open_path(lowered, kind, model)
        if needs_tflm(text):  # TFLite Micro's Signal ops: TFLM's interpreter is the reference
            return TflmInterpreter(source)
        first = text.split(". ")[0][:200]
        raise ReferenceUnavailable(
            f"the TFLite interpreter cannot run this model: {first}"
        ) from None
    it.reference_name = kind
    return it


def _versions_lowered(source) -> bytes | None:
    """``source`` with each op of ``_REF_MAX_VERSION`` above it set to that version (None when
    there is none): the reference resolver registers the same kernel only up to there."""
    import struct

    import tflite

    if isinstance(source, bytes | bytearray | memoryview):
        data = bytearray(source)
    else:
        with open(source, "rb") as f:
            data = bytearray(f.read())
    model = tflite.Model.GetRootAsModel(data, 0)
    changed = False
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        top = _REF_MAX_VERSION.get(builtin)
        slot = code._tab.Offset(8)  # OperatorCode.version
        if top is not None and slot and code.Version() > top:
            struct.pack_into("<i", data, code._tab.Pos + slot, top)
            changed = True
    return bytes(data) if changed else None


def choose_reference(source, model: onnx.ModelProto):
    """The first runtime that runs ``source`` (module docstring), and its name."""
    order = [BUILTIN_REF, BUILTIN, TFLM, XNNPACK]
    if misreads_int32_biases(source):
        order = [TFLM, *order[:2], XNNPACK]
    first_failure = None
    for kind in order:
        try:
            it = open_path(source, kind, model)
        except ReferenceUnavailable as exc:
            first_failure = first_failure or exc
            continue
        return it, getattr(it, "reference_name", kind)
    raise first_failure


def spread_paths(reference: str) -> list[str]:
    """The runtimes that measure TFLite's spread against ``reference``, in order of choice."""
    return [k for k in (XNNPACK, BUILTIN, BUILTIN_REF) if k != reference]


def baseline_name(reference: str, other: str) -> str:
    """``TFLite's own CPU paths (XNNPACK, builtin)``: the two runtimes compared."""
    return (
        f"TFLite's own CPU paths ({_SHORT.get(other, other)}, {_SHORT.get(reference, reference)})"
    )


def misreads_int32_biases(source) -> bool:
    """Whether a 16x8 CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED has an int32 bias without
    ``quantized_bias_type`` INT32: LiteRT's kernels then read it as int64."""
    from tflite2qonnx.reader import read_model

    for sub in read_model(source).subgraphs[:1]:
        for op in sub.operators:
            slot = _BIAS_TYPED.get(op.opcode.builtin)
            if slot is None or len(op.inputs) <= slot or min(op.inputs[0], op.inputs[slot]) < 0:
                continue
            x, bias = sub.tensors[op.inputs[0]], sub.tensors[op.inputs[slot]]
            declared = op.options.get("quantized_bias_type") == "INT32"
            if x.dtype == "int16" and bias.dtype == "int32" and not declared:
                return True
    return False


def _resize_to(it, model: onnx.ModelProto, source) -> None:
    """Give the interpreter's inputs the converted model's static shapes (``--batch-size``,
    ``--input-shape``), mapped back to the TFLite layout."""
    from tflite2qonnx.graph_io import unique_tensor_names
    from tflite2qonnx.reader import read_model

    perms = stored_perms(model)
    shapes = {}
    for vi in model.graph.input:
        dims = vi.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = [d.dim_value for d in dims]
    names = unique_tensor_names(read_model(source).subgraphs[0])
    resized = False
    for d in it.get_input_details():
        stored = shapes.get(names[int(d["index"])])
        if stored is None:
            continue
        perm = perms.get(names[int(d["index"])])
        shape = stored if perm is None else [stored[i] for i in np.argsort(perm)]
        if tuple(shape) != tuple(int(n) for n in d["shape"]):
            it.resize_tensor_input(d["index"], shape)
            resized = True
    if resized:
        it.allocate_tensors()
