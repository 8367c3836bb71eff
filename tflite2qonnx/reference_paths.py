"""--verify's TFLite runtimes: which one is the reference and which one measures TFLite's own
spread, chosen among those that actually run the model.

The reference is the first that runs of: the builtin reference kernels (the semantics the
file defines; TFLM's interpreter instead for TFLite Micro's Signal ops, which LiteRT lacks),
the optimized builtin kernels, XNNPACK (MediaPipe's custom ops exist only in its delegate).
The reference resolver registers TILE only up to version 2 (the same kernel as version 3):
the builtin kernels run a copy with that version. A 16x8 CONV_2D / FULLY_CONNECTED /
TRANSPOSE_CONV with an int32 bias but no ``quantized_bias_type`` (older converters did not
write it) makes LiteRT's kernels, and TFLM's TRANSPOSE_CONV, read the bias as int64, past its
end (their bug; garbage: the xmos denoiser's mask saturates): every LiteRT path runs a copy
declaring INT32, which selects the kernel the bias's type means.

The spread (how far TFLite's own CPU paths differ, the allowance for quantized outputs) is
XNNPACK against the reference, or the other builtin resolver where XNNPACK fails to build
(OSNet); XNNPACK as the reference is its own. A model with quantized outputs that no second
runtime runs is reported as unverifiable (ReferenceUnavailable), not held to no spread.
Whether the reference and the spread runtime can be trusted is reference_trust's: a runtime
computing something else than the two others is passed over.
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
# --verify's reference: the first of these that runs the model
REFERENCE_ORDER = (BUILTIN_REF, BUILTIN, XNNPACK)
_SHORT = {BUILTIN_REF: "builtin", BUILTIN: "optimized builtin", XNNPACK: "XNNPACK", TFLM: "TFLM"}
# ops whose one kernel the reference resolver registers only up to an older version than the
# optimized one (register_ref.cc: TILE 1-2; version 3 adds no kernel of its own), by code
_REF_MAX_VERSION = {69: 2}  # BuiltinOperator.TILE
# builtin code -> (activation, bias) slots of the ops whose 16x8 kernels LiteRT picks by
# quantized_bias_type rather than by the bias's type: CONV_2D, FULLY_CONNECTED,
# TRANSPOSE_CONV (DEPTHWISE_CONV_2D's 16x8 kernel takes int64 biases only)
_BIAS_TYPED = {3: (0, 2), 9: (0, 2), 67: (2, 3)}


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
    declared = repaired(source)  # after the import above: the schema is LiteRT's
    if declared is not None:
        source = declared
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
        lowered = repaired(source, lower_versions=True) if kind == BUILTIN_REF else None
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


def _read_bytes(source) -> bytes:
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source)
    with open(source, "rb") as f:
        return f.read()


def repaired(source, lower_versions: bool = False) -> bytes | None:
    """A copy of ``source`` declaring the int32 biases of 16x8 kernels (module docstring),
    with ``lower_versions`` each op of ``_REF_MAX_VERSION`` set to that version; None when
    nothing changes."""
    from ai_edge_litert import schema_py_generated as fb

    data = _read_bytes(source)
    if not _undeclared_biases(fb, data) and not (lower_versions and _above_ref(fb, data)):
        return None  # the cheap look (the object API unpacks dp_net in 1.7 s)
    model = fb.ModelT.InitFromPackedBuf(bytearray(data), 0)
    changed = False
    if lower_versions:
        for code in model.operatorCodes or []:
            top = _REF_MAX_VERSION.get(max(code.builtinCode, code.deprecatedBuiltinCode))
            if top is not None and code.version > top:
                code.version, changed = top, True
    for sub in model.subgraphs or []:
        for op in sub.operators or []:
            code = model.operatorCodes[op.opcodeIndex]
            slots = _BIAS_TYPED.get(max(code.builtinCode, code.deprecatedBuiltinCode))
            if slots is None or op.builtinOptions is None or len(op.inputs) <= slots[1]:
                continue
            x, bias = (op.inputs[i] for i in slots)
            declared = getattr(op.builtinOptions, "quantizedBiasType", None)
            if min(x, bias) < 0 or declared != fb.TensorType.FLOAT32:
                continue
            if (sub.tensors[x].type, sub.tensors[bias].type) == (
                fb.TensorType.INT16,
                fb.TensorType.INT32,
            ):
                op.builtinOptions.quantizedBiasType, changed = fb.TensorType.INT32, True
    if not changed:
        return None
    import flatbuffers

    builder = flatbuffers.Builder(len(data) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def _codes(fb, model) -> list[int]:
    return [
        max(c.BuiltinCode(), c.DeprecatedBuiltinCode())
        for c in (model.OperatorCodes(i) for i in range(model.OperatorCodesLength()))
    ]


def _above_ref(fb, data: bytes) -> bool:
    model = fb.Model.GetRootAs(data, 0)
    versions = [model.OperatorCodes(i).Version() for i in range(model.OperatorCodesLength())]
    codes = _codes(fb, model)
    return any(v > _REF_MAX_VERSION.get(c, v) for c, v in zip(codes, versions, strict=True))


def _undeclared_biases(fb, data: bytes) -> bool:
    """Whether ``repaired`` has an int32 bias to declare (read without unpacking)."""
    model = fb.Model.GetRootAs(data, 0)
    codes = _codes(fb, model)
    if not any(c in _BIAS_TYPED for c in codes):
        return False
    for k in range(model.SubgraphsLength()):
        sub = model.Subgraphs(k)
        for i in range(sub.OperatorsLength()):
            op = sub.Operators(i)
            slots = _BIAS_TYPED.get(codes[op.OpcodeIndex()])
            if slots is None or op.InputsLength() <= slots[1]:
                continue
            x, bias = (op.Inputs(j) for j in slots)
            if min(x, bias) < 0:
                continue
            types = (sub.Tensors(x).Type(), sub.Tensors(bias).Type())
            if types == (fb.TensorType.INT16, fb.TensorType.INT32):
                return True
    return False


def repair_note(source) -> str:
    """What --verify's runner line says about a declared copy, or ""."""
    from ai_edge_litert import schema_py_generated as fb

    if not _undeclared_biases(fb, _read_bytes(source)) or repaired(source) is None:
        return ""
    return " (on a copy declaring the 16x8 kernels' int32 biases, which LiteRT reads as int64)"


def _has_litert() -> bool:
    try:
        import ai_edge_litert.interpreter  # noqa: F401
    except ImportError:
        return False
    return True


def choose_reference(source, model: onnx.ModelProto):
    """The first runtime that runs ``source`` (module docstring), and its name."""
    first_failure = None
    for kind in REFERENCE_ORDER:
        try:
            it = open_path(source, kind, model)
        except ReferenceUnavailable as exc:
            if kind == BUILTIN_REF and not _has_litert():
                raise  # the install hint: no other runtime is worth trying
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
