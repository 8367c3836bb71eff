"""tflite2qonnx.convert: a .tflite flatbuffer in, a QONNX model out, without TensorFlow."""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import onnx

from layout.channels_first import channels_first
from qonnx_ingest import DEFAULT_OPSET
from qonnx_ingest.errors import ConversionError, ConversionWarning, InputError
from qonnx_ingest.finish import finish_model, set_opset_imports
from qonnx_ingest.output import OutputOptions, finish_output
from tflite2qonnx.bundle import model_source
from tflite2qonnx.flatbuffer import read_model
from tflite2qonnx.graph import GraphBuilder
from tflite2qonnx.model import MissingOperandError, ScaleRangeError, Subgraph
from tflite2qonnx.ops.dispatch import converter as converter_for
from tflite2qonnx.ops.dispatch import unsupported_message
from tflite2qonnx.ops.treatment import rounded_once
from tflite2qonnx.state import STATE_IO_KEY, state_names, stateful_names
from tflite2qonnx.state import metadata as state_metadata

if TYPE_CHECKING:
    from qonnx_ingest.verification import Verification

IO_QUANTIZATION_KEY = "tflite2qonnx.io_quantization"


def convert(
    source: str | os.PathLike | bytes,
    output_path: str | os.PathLike | None = None,
    *,
    opset: int = DEFAULT_OPSET,
    int_quant: bool = False,
    keep_io_layout: bool = False,
    layouts: Mapping[str, str] | None = None,
    verify: bool = False,
    bit_exact: bool = False,
    channels_last: bool = False,
    batch_size: int | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    format: str = "qonnx",
    state_io: bool = False,
    member: str | None = None,
) -> onnx.ModelProto:
    """Convert a TFLite model (path or bytes) to QONNX; save it too when ``output_path`` is given.

    A MediaPipe ``.task`` bundle (a zip of .tflite models) needs ``member``, the name of the
    model in it to convert (``tflite2qonnx.bundle.members`` lists them; the CLI converts them
    all); without it the InputError lists them.

    ``verify`` runs the TFLite interpreter and the result on seeded inputs first and raises
    ``VerificationError`` (nothing saved) when they disagree beyond the converter's tolerance;
    ``convert_and_verify`` returns the figures too.

    ``format="qcdq"`` lowers the quantizers to QuantizeLinear/Clip/DequantizeLinear
    (``qonnx_ingest.qcdq.to_qcdq``; what is verified and saved is that form).

    Graph inputs and outputs carry real (dequantized) values; for integer I/O tensors the
    scale and zero point are recorded in the metadata under ``tflite2qonnx.io_quantization``
    so raw integers can be fed as ``scale * (q - zero_point)``. 4D (3D, 5D) I/O tensors that
    feed convolutions are channels-first unless ``keep_io_layout``; the ``layout`` metadata
    records each permutation. ``layouts`` forces tensors to "NHWC" or "NCHW".

    .. emulated-ops:begin
    ``bit_exact`` emulates the builtin integer kernels' arithmetic bit for bit where a
    record says so: ABS, ADD, AVERAGE_POOL_2D, BATCH_MATMUL, CONCATENATION, CONV_2D,
    DEPTHWISE_CONV_2D, DIV, ELU, EQUAL, EXP, FULLY_CONNECTED, GELU, GREATER, GREATER_EQUAL,
    HARD_SWISH, L2_NORMALIZATION, LEAKY_RELU, LESS, LESS_EQUAL, LOG, LOGISTIC, LOG_SOFTMAX,
    MEAN, MUL, NEG, NOT_EQUAL, PRELU, QUANTIZE, REDUCE_PROD, RELU, RELU6, RELU_0_TO_1,
    RELU_N1_TO_1, RESIZE_BILINEAR, RSQRT, SOFTMAX, SQUARED_DIFFERENCE, SUB, SUM, SVDF, TANH,
    TRANSPOSE_CONV, UNIDIRECTIONAL_SEQUENCE_LSTM (see ``tflite2qonnx.fixed_point``); the
    default rounds once per op, like XNNPACK, except the 16x8 (int16) kernels no single
    rounding agrees with, emulated either way: AVERAGE_POOL_2D, CONV_2D, DEPTHWISE_CONV_2D,
    DIV, EXP, FULLY_CONNECTED, GELU, LOG, LOGISTIC, MEAN, PRELU, QUANTIZE, REDUCE_PROD,
    RESIZE_BILINEAR, RSQRT, SOFTMAX, TANH, TRANSPOSE_CONV (the convolutions with an int64 or
    int32 bias, TRANSPOSE_CONV with no bias too; docs/int16.md), and the int8 / uint8
    kernels that run by default: CONV_2D, DEPTHWISE_CONV_2D, LEAKY_RELU, MEAN, MUL, PRELU,
    QUANTIZE, SVDF, UNIDIRECTIONAL_SEQUENCE_LSTM (SVDF's and the LSTM's kernels; the others'
    requantization rounded twice, as the builtin kernels round it, where its multiplier
    shifts right; docs/tflite.md).
    .. emulated-ops:end

    ``channels_last`` keeps every tensor NHWC (graph I/O too) with static shapes (batch 1
    unless ``batch_size``; ``input_shapes`` are NHWC) and writes Conv / MaxPool /
    BatchNormalization as qonnx's channels-last ops, as qonnx's ConvertToChannelsLastAndClean
    would (the form hls4ml's QONNX frontend reads).

    ``state_io`` makes each variable tensor (LSTM / RNN / SVDF state, which TFLite keeps from
    one invocation to the next) and each resource variable (Keras ``stateful=True`` layers,
    named by shared_name, its CALL_ONCE value recorded as ``initial``) a graph input and a graph
    output (``<name>_next``), listed in the ``tflite2qonnx.state_io`` metadata: feeding the
    outputs back reproduces a stream of calls. Without it the graph starts from the initial
    state on every run (a warning says so).
    """
    given = [] if isinstance(source, bytes | bytearray | memoryview) else [str(source)]
    out = OutputOptions(
        opset=opset, int_quant=int_quant, channels_last=channels_last, batch_size=batch_size,
        input_shapes=input_shapes, format=format, verify=verify, output_path=output_path,
        inputs=tuple(given),
    )  # fmt: skip
    model_bytes, shown = model_source(source, member)
    tfl = read_model(model_bytes, name=shown)
    # the graph is named after the file (subgraph names are mostly "main" or empty)
    from_file = tfl.source_name != "<bytes>"
    name = Path(member or tfl.source_name).stem if from_file else tfl.subgraphs[0].name
    name = name or "tflite"
    model = convert_subgraph(
        tfl.subgraphs[0],
        name=name,
        opset=opset,
        int_quant=int_quant,
        keep_io_layout=keep_io_layout,
        layouts=layouts,
        metadata={"source": tfl.source_name},
        where=tfl.source_name,
        bit_exact=bit_exact,
        channels_last=channels_last,
        batch_size=batch_size if channels_last else None,
        input_shapes=input_shapes if channels_last else None,
        subgraphs=tfl.subgraphs,
        state_io=state_io,
    )
    return finish_output(model, out, reference=partial(_reference, model_bytes))[0]


def _reference(model_bytes: bytes, model: onnx.ModelProto) -> Verification:
    """The TFLite interpreter against ``model`` on seeded inputs."""
    from tflite2qonnx.reference import verify

    return verify(model_bytes, model)


def convert_subgraph(
    subgraph: Subgraph,
    *,
    name: str = "tflite",
    opset: int = DEFAULT_OPSET,
    int_quant: bool = False,
    keep_io_layout: bool = False,
    layouts: Mapping[str, str] | None = None,
    metadata: Mapping[str, str] | None = None,
    where: str = "<subgraph>",
    bit_exact: bool = False,
    channels_last: bool = False,
    batch_size: int | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    subgraphs: Sequence[Subgraph] = (),
    state_io: bool = False,
) -> onnx.ModelProto:
    """Convert one subgraph; tests use it on slices of a model (one operator, a few layers).
    ``batch_size`` and ``input_shapes`` (NHWC) apply to the channels-last form only, which
    needs them before finishing; ``convert`` fixes the other form's shapes afterwards.
    ``subgraphs``: the model's, for the operators that call one (IF, WHILE, CALL_ONCE)."""
    quant_op_type = "IntQuant" if int_quant else "Quant"
    builder = GraphBuilder(
        subgraph, quant_op_type=quant_op_type, opset=opset, bit_exact=bit_exact,
        subgraphs=subgraphs, state_io=state_io,
    )  # fmt: skip
    for op in subgraph.operators:
        converter = converter_for(op.name)
        if converter is None:
            raise ConversionError(unsupported_message(op), where)
        builder.current = op
        try:
            converter(builder, op)
        except MissingOperandError as exc:  # a tensor lacks an axis: say which operator asked
            if exc.where is None or exc.where.startswith(op.where):
                raise
            raise MissingOperandError(exc.message, f"{op.where}: {exc.where}") from None
        except ScaleRangeError as exc:
            if exc.where is not None:
                raise
            raise ScaleRangeError(f"{exc.message}; {_scales(subgraph, op)}", op.where) from None
    builder.current = None
    if bit_exact and (rounded := rounded_once(builder, subgraph.operators)):
        counts = Counter(rounded)
        kinds = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in sorted(counts.items()))
        warnings.warn(
            f"{where}: --bit-exact leaves {_count(len(rounded), 'integer operator')} rounding "
            f"once, as XNNPACK does: {kinds}",
            ConversionWarning,
            stacklevel=2,
        )
    if not state_io and (names := stateful_names(builder)):
        warnings.warn(
            f"{where}: the model is stateful ({names} carry over between "
            "TFLite invocations); the converted model starts from their initial state on every "
            "run (--state-io makes them graph inputs and outputs)",
            ConversionWarning,
            stacklevel=2,
        )
    model = builder.make_model(name)
    metadata = dict(metadata or {})
    if builder.io_quantization:
        metadata[IO_QUANTIZATION_KEY] = json.dumps(builder.io_quantization)
    if (states := state_metadata(builder)) is not None:
        metadata[STATE_IO_KEY] = states
    model, _ = set_opset_imports(model, opset=opset)
    if channels_last:
        from layout.channels_last import finish_channels_last

        if batch_size is not None or input_shapes:
            from qonnx_ingest.static_shapes import fix_input_shapes

            model, _ = fix_input_shapes(model, batch_size=batch_size, shapes=input_shapes)
        return finish_channels_last(model, opset=opset, metadata=metadata, layouts=layouts)
    if layouts:
        _check_layout_names(model, layouts)
    try:
        model, _ = channels_first(
            model, keep_io_layout=keep_io_layout, explicit=layouts, keep_layout=state_names(builder)
        )
    except ConversionError as exc:
        raise _with_layout_hint(exc, model, layouts) from None
    # the metadata names graph inputs and outputs only, which the compact form keeps
    return finish_model(model, opset=opset, metadata=metadata, compact_large=True)[0]


def _scales(subgraph: Subgraph, op) -> str:
    """The operator's quantized tensors with their scales: which one is out of range."""
    parts = []
    for idx in (*op.inputs, *op.outputs):
        t = subgraph.tensors[idx] if 0 <= idx < len(subgraph.tensors) else None
        if t is not None and t.quantization is not None and len(t.quantization.scale):
            scale = t.quantization.scale
            shown = f"{float(scale[0]):.3g}" + (f" (+{len(scale) - 1})" if len(scale) > 1 else "")
            parts.append(f"tensor {idx} '{t.name}' scale {shown}")
    return "scales: " + (", ".join(parts) or "none")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _check_layout_names(model: onnx.ModelProto, layouts: Mapping[str, str]) -> None:
    """A --layout naming no tensor: say which names would do (close ones, inputs, outputs)."""
    graph = model.graph
    known = [i.name for i in graph.input] + [o for n in graph.node for o in n.output]
    known_set = {*known, *(t.name for t in graph.initializer)}
    for name in layouts:
        if name in known_set:
            continue
        close = difflib.get_close_matches(name, known, n=3)
        ins = ", ".join(i.name for i in graph.input)
        outs = ", ".join(o.name for o in graph.output)
        hint = f"did you mean {', '.join(close)}? " if close else ""
        raise InputError(
            f"--layout names a tensor this model does not have; {hint}inputs: {ins}; outputs: "
            f"{outs} ({len(known)} tensors in all, named as in the .tflite file)",
            name,
        )


def _with_layout_hint(
    exc: ConversionError, model: onnx.ModelProto, layouts: Mapping[str, str] | None
) -> ConversionError:
    """A layout conflict caused by ``--layout IO=NHWC``: what the user wants is
    --keep-io-layout, which keeps the graph's inputs and outputs NHWC around a channels-first
    inside."""
    io = {v.name for v in (*model.graph.input, *model.graph.output)}
    pinned = [n for n, v in (layouts or {}).items() if n in io and str(v).upper() == "NHWC"]
    if not pinned or "layout conflict" not in exc.message:
        return exc
    hint = (
        f"; to keep {', '.join(pinned)} in NHWC at the graph boundary, drop --layout and use "
        "--keep-io-layout (one Transpose per input/output, channels-first inside)"
    )
    return type(exc)(exc.message + hint, exc.where)


def slice_subgraph(
    subgraph: Subgraph, operators: Sequence[int], outputs: Sequence[int] | None = None
) -> Subgraph:
    """The operators ``operators`` of ``subgraph`` as a subgraph of their own.

    Its inputs are the non-constant tensors they read but do not produce; its outputs are
    ``outputs`` or, by default, the outputs of the last operator.
    """
    ops = [subgraph.operators[i] for i in operators]
    produced = {t for op in ops for t in op.outputs}
    reads = [t for op in ops for t in op.inputs if t >= 0 and t not in produced]
    inputs = [t for t in dict.fromkeys(reads) if subgraph.tensors[t].data is None]
    outs = tuple(outputs) if outputs is not None else tuple(ops[-1].outputs)
    return dataclasses.replace(subgraph, operators=ops, inputs=tuple(inputs), outputs=outs)
