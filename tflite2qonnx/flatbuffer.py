"""Read a ``.tflite`` flatbuffer into the validated, read-only data model (``tflite2qonnx.model``).

The converter works on plain dataclasses instead of the generated flatbuffer accessors so that
every malformed-file condition is found here, once, and reported as a one-line
:class:`~qonnx_ingest.errors.InputError` naming the file and the exact subgraph / operator /
tensor, instead of surfacing later as an ``IndexError`` deep inside a lowering rule. Each
operator's operands are checked against its record (``tflite2qonnx.ops.OPERATORS``).

Only the ``tflite`` flatbuffer bindings are used (never TensorFlow).  Constant data is exposed as
read-only numpy views of the file bytes (no per-element Python loops), so reading a multi-MB
model takes milliseconds.
"""

from __future__ import annotations

import os
import re
import struct
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import tflite

from qonnx_ingest.errors import ConversionWarning, InputError
from tflite2qonnx.compat.tflite import int32_field
from tflite2qonnx.flatbuffer_tensors import TensorDecoder
from tflite2qonnx.model import (
    OpCode,
    Operands,
    Operator,
    Options,
    SignatureDef,
    Subgraph,
    Tensor,
    TFLiteModel,
)
from tflite2qonnx.ops import OPERATORS
from tflite2qonnx.schema import (
    BUILTIN_OPERATOR_NAMES,
    OPTIONS2_UNION,
    OPTIONS_UNION,
    POSITIVE_OPTIONS,
    as_tuple,
    enum_name,
    options_layout,
    quote,
    read_options,
)

_FILE_IDENTIFIER = b"TFL3"
_SCHEMA_VERSION = 3


def read_model(
    source: str | os.PathLike | bytes | bytearray | memoryview, name: str | None = None
) -> TFLiteModel:
    """Read and validate a TFLite model from a path or from the file's bytes (``name``: what
    messages call bytes, e.g. ``bundle.task:member.tflite``; default ``<bytes>``).

    Every problem with the input raises :class:`InputError` with a one-line message; no
    low-level exception from the flatbuffer library escapes.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        name = name or "<bytes>"
        try:
            data = bytes(source)
        except (TypeError, ValueError, BufferError) as exc:
            raise InputError(f"cannot read model bytes: {_one_line(exc)}", where=name) from exc
    elif isinstance(source, (str, os.PathLike)):
        name = os.fspath(source)
        if isinstance(name, bytes):
            name = os.fsdecode(name)
        data = _read_file(Path(name), name)
    else:
        raise InputError(
            f"expected a path or bytes, got {type(source).__name__}", where="read_model"
        )

    if len(data) < 8:
        raise InputError(
            f"not a TFLite flatbuffer: file is only {len(data)} bytes long", where=name
        )
    if data[4:8] != _FILE_IDENTIFIER:
        if data[:4] == b"PK\x03\x04" and _is_bundle(source):
            raise InputError(
                "is a MediaPipe .task bundle (a zip of .tflite models), not one model: convert "
                "them with tflite2qonnx BUNDLE.task -o DIR/, one with --member NAME",
                where=name,
            )
        keras = _keras_file_kind(data)
        if keras:
            raise InputError(f"this is {keras}, not TFLite: use qkeras2qonnx", where=name)
        if _is_onnx(data):
            raise InputError(
                "this is already an ONNX model, not a TFLite flatbuffer: nothing to convert",
                where=name,
            )
        raise InputError(
            f"not a TFLite flatbuffer: file identifier is {data[4:8]!r}, expected b'TFL3'",
            where=name,
        )

    reader = _Reader(data, name)
    try:
        return reader.read()
    except (struct.error, ValueError, TypeError) as exc:
        # What the flatbuffers accessors raise when an offset or a length points outside the
        # file: struct.error (a scalar read past the end), ValueError (a numpy view past the
        # end) and TypeError from flatbuffers' own range check of a computed offset. Anything
        # else (and any other TypeError) is a bug of ours and is not disguised as bad input.
        if isinstance(exc, TypeError) and not str(exc).startswith("bad number"):
            raise
        where = f"{name}: {reader.loc}" if reader.loc else name
        needed = (
            re.search(r"at least (\d+) bytes", str(exc)) if isinstance(exc, struct.error) else None
        )
        if needed and int(needed[1]) > len(data):
            raise InputError(
                f"the file looks truncated ({len(data)} bytes; the model refers to byte "
                f"{int(needed[1]) - 1}): copy or download it again",
                where=name,
            ) from exc
        raise InputError(
            f"malformed flatbuffer: an offset or length points outside the file "
            f"({_exc_name(exc)}: {_one_line(exc)})",
            where=where,
        ) from exc


def _read_file(path: Path, name: str) -> bytes:
    try:
        if path.is_dir():
            raise InputError("is a directory, expected a .tflite file", where=name)
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError("file does not exist", where=name) from exc
    except IsADirectoryError as exc:
        raise InputError("is a directory, expected a .tflite file", where=name) from exc
    except (OSError, ValueError) as exc:  # permissions, I/O errors, NUL in the path ...
        reason = getattr(exc, "strerror", None) or _one_line(exc)
        raise InputError(f"cannot read file: {reason}", where=name) from exc


# leading bytes of the files Keras saves: HDF5 (.h5), zip (.keras), JSON (an architecture)
_KERAS_SIGNATURES = (
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file (a Keras .h5 model?)"),
    (b"PK\x03\x04", "a zip archive (a Keras .keras model?)"),
    (b"{", "a JSON file (a Keras architecture?)"),
)


def _is_bundle(source) -> bool:
    from tflite2qonnx.bundle import is_bundle

    return is_bundle(source)


def _keras_file_kind(data: bytes) -> str | None:
    """What a Keras file handed to tflite2qonnx is, so the message can name the other tool."""
    head = data[:16].lstrip()
    return next((kind for sig, kind in _KERAS_SIGNATURES if head.startswith(sig)), None)


def _is_onnx(data: bytes) -> bool:
    """An ONNX ModelProto: field 1 (ir_version, a small varint) first, and the whole file
    parses as one with a graph. Parsed only when the first bytes say so."""
    if data[:1] != b"\x08" or not 1 <= data[1] <= 64:
        return False
    import onnx
    from google.protobuf.message import DecodeError

    try:
        return onnx.ModelProto.FromString(data).HasField("graph")
    except (DecodeError, ValueError, RuntimeError):
        return False


def _one_line(exc: BaseException | str) -> str:
    text = " ".join(str(exc).split())
    return text[:300] + "..." if len(text) > 300 else text


def _exc_name(exc: BaseException) -> str:
    cls = type(exc)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"


class _Reader(TensorDecoder):
    """One pass over the flatbuffer, model to subgraphs to operators (tensors: the base)."""

    def read(self) -> TFLiteModel:
        self.loc = "model"
        root = int.from_bytes(self.data[0:4], "little")
        if root + 4 > len(self.data):
            raise self.fail(
                f"root table offset {root} lies beyond the end of the file ({len(self.data)} bytes)"
            )
        model = tflite.Model.GetRootAsModel(self.data, 0)
        self.model = model
        version = int(model.Version())
        if version != _SCHEMA_VERSION:
            raise self.fail(f"unsupported TFLite schema version {version} (expected 3)")
        description = self.text(model.Description(), "description") or ""
        self.n_buffers = self.count(model, "Buffers")

        opcodes = [self.read_opcode(i) for i in range(self.count(model, "OperatorCodes"))]

        self.loc = "model"
        n_subgraphs = self.count(model, "Subgraphs")
        if n_subgraphs == 0:
            raise self.fail("model has no subgraphs")
        subgraphs = [self.read_subgraph(i, opcodes) for i in range(n_subgraphs)]

        self.loc = "model"
        signature_defs = [
            self.read_signature(i, subgraphs) for i in range(self.count(model, "SignatureDefs"))
        ]
        self.loc = "model"
        metadata = self.read_metadata()
        self.loc = ""
        if self.bias_axis_fixes:
            fixes = self.bias_axis_fixes
            warnings.warn(
                f"{self.name}: {len(fixes)} rank-1 per-channel tensors have an out-of-range "
                f"quantized_dimension (first: {fixes[0]}); read as per-channel along axis 0",
                ConversionWarning,
                stacklevel=3,
            )
        return TFLiteModel(
            version=version,
            description=description,
            subgraphs=subgraphs,
            opcodes=opcodes,
            signature_defs=signature_defs,
            metadata=metadata,
            source_name=self.name,
        )

    def read_opcode(self, i: int) -> OpCode:
        self.loc = f"opcode {i}"
        oc = self.model.OperatorCodes(i)
        # The schema keeps the old int8 field for codes < 127 and says to take the max.
        code = max(int(oc.DeprecatedBuiltinCode()), _builtin_code_field(oc))
        builtin = enum_name(BUILTIN_OPERATOR_NAMES, code)
        custom_code = self.text(oc.CustomCode(), "custom_code")
        if builtin == "CUSTOM" and not custom_code:
            raise self.fail("CUSTOM operator code without a custom_code")
        return OpCode(builtin=builtin, custom_code=custom_code, version=int(oc.Version()))

    def read_metadata(self) -> dict[str, bytes]:
        metadata: dict[str, bytes] = {}
        for i in range(self.count(self.model, "Metadata")):
            self.loc = f"metadata {i}"
            md = self.model.Metadata(i)
            key = self.text(md.Name(), "name") or ""
            index = int(md.Buffer())
            if index >= self.n_buffers:
                raise self.fail(
                    f"metadata {quote(key)} buffer index {index} out of range "
                    f"(model has {self.n_buffers} buffers)"
                )
            # TensorFlow's own converter writes min_runtime_version twice: the first one wins,
            # as in the TFLite runtime's lookup.
            if key not in metadata:
                metadata[key] = self.buffer_bytes(index).tobytes()
        return metadata

    # -- subgraphs ------------------------------------------------------------------------

    def read_subgraph(self, sg_index: int, opcodes: list[OpCode]) -> Subgraph:
        self.loc = f"subgraph {sg_index}"
        sg = self.model.Subgraphs(sg_index)
        sg_name = self.text(sg.Name(), "name") or ""
        n_tensors = self.count(sg, "Tensors")
        tensors = [self.read_tensor(sg_index, sg.Tensors(t), t) for t in range(n_tensors)]

        self.loc = f"subgraph {sg_index}"
        self.count(sg, "Inputs")
        self.count(sg, "Outputs")
        inputs = as_tuple(sg.InputsAsNumpy())
        outputs = as_tuple(sg.OutputsAsNumpy())
        self.check_indices(inputs, n_tensors, "input", allow_omitted=False)
        self.check_indices(outputs, n_tensors, "output", allow_omitted=False)

        operators = []
        for o in range(self.count(sg, "Operators")):
            self.loc = f"subgraph {sg_index} operator {o}"
            operator = self.read_operator(sg.Operators(o), o, opcodes, n_tensors)
            self.check_operands(operator, tensors)
            operators.append(operator)
        return Subgraph(
            index=sg_index,
            name=sg_name,
            tensors=tensors,
            operators=operators,
            inputs=inputs,
            outputs=outputs,
        )

    def check_operands(self, op: Operator, tensors: list[Tensor]) -> None:
        """The operand shapes TFLite's kernel for ``op`` requires (its record's ranks and
        operand rule); the converters rely on them."""
        record = OPERATORS.get(op.opcode.builtin)
        problem = None if record is None else record.operand_problem(op, tensors)
        if problem is not None:
            raise self.fail(problem)

    def check_indices(
        self, indices: tuple[int, ...], n_tensors: int, what: str, allow_omitted: bool
    ) -> None:
        for pos, t in enumerate(indices):
            if allow_omitted and t == -1:
                continue
            if not 0 <= t < n_tensors:
                raise self.fail(
                    f"{what} {pos} refers to tensor {t}, out of range "
                    f"(subgraph has {n_tensors} tensors)"
                )

    def read_operator(self, op: Any, index: int, opcodes: list[OpCode], n_tensors: int) -> Operator:
        opcode_index = int(op.OpcodeIndex())
        if opcode_index >= len(opcodes):
            raise self.fail(
                f"opcode index {opcode_index} out of range (model has {len(opcodes)} opcodes)"
            )
        for field in ("Inputs", "Outputs", "Intermediates"):
            self.count(op, field)
        inputs = as_tuple(op.InputsAsNumpy())
        outputs = as_tuple(op.OutputsAsNumpy())
        intermediates = as_tuple(op.IntermediatesAsNumpy())
        self.check_indices(inputs, n_tensors, "input", allow_omitted=True)
        self.check_indices(outputs, n_tensors, "output", allow_omitted=False)
        self.check_indices(intermediates, n_tensors, "intermediate", allow_omitted=False)

        options_type, options = self.read_builtin_options(op)

        custom_options: bytes | None = None
        if not op.CustomOptionsIsNone():
            self.count(op, "CustomOptions", 1)
            raw = op.CustomOptionsAsNumpy()
            custom_options = raw.tobytes() if isinstance(raw, np.ndarray) else b""
        large_offset = int(op.LargeCustomOptionsOffset())
        if large_offset > 1:  # custom options stored after the flatbuffer (large models)
            size = int(op.LargeCustomOptionsSize())
            if large_offset + size > len(self.data):
                raise self.fail(
                    f"custom options [{large_offset}, {large_offset + size}) lie beyond the end "
                    f"of the file ({len(self.data)} bytes)"
                )
            custom_options = self.data[large_offset : large_offset + size]

        opcode = opcodes[opcode_index]
        name = opcode.custom_code if opcode.builtin == "CUSTOM" else opcode.builtin
        where = f"operator {index} ({name})"  # as Operator.where says it
        return Operator(
            index=index,
            opcode=opcode,
            inputs=Operands(inputs, where, "input"),
            outputs=Operands(outputs, where, "output"),
            intermediates=Operands(intermediates, where, "intermediate"),
            options=Options(options, where, options_type),
            options_type=options_type,
            custom_options=custom_options,
        )

    def read_builtin_options(self, op: Any) -> tuple[str, dict[str, Any]]:
        unions = [(OPTIONS_UNION, op.BuiltinOptionsType, op.BuiltinOptions, "")]
        if OPTIONS2_UNION and hasattr(op, "BuiltinOptions2Type"):
            unions.append((OPTIONS2_UNION, op.BuiltinOptions2Type, op.BuiltinOptions2, "_2"))
        found: list[tuple[str, dict[str, Any]]] = []
        for union, type_getter, table_getter, suffix in unions:
            type_code = int(type_getter())
            if type_code == 0:  # NONE
                continue
            class_name = union.get(type_code)
            layout = None if class_name is None else options_layout(class_name)
            if layout is None:
                raise self.fail(f"unknown builtin_options{suffix} type {type_code}")
            table = table_getter()
            options = {} if table is None else read_options(table, layout, self.text)
            for key in POSITIVE_OPTIONS:
                value = options.get(key)
                if value is not None and value < 1:
                    raise self.fail(f"{class_name} {key} is {value}, must be positive")
            found.append((class_name, options))
        if len(found) > 1:
            raise self.fail(
                f"operator has both builtin_options ({found[0][0]}) and "
                f"builtin_options_2 ({found[1][0]})"
            )
        return found[0] if found else ("", {})

    def read_signature(self, i: int, subgraphs: list[Subgraph]) -> SignatureDef:
        self.loc = f"signature_def {i}"
        sig = self.model.SignatureDefs(i)
        key = self.text(sig.SignatureKey(), "signature_key") or ""
        self.loc = f"signature_def {i} {quote(key)}"
        sg_index = int(sig.SubgraphIndex())
        if sg_index >= len(subgraphs):
            raise self.fail(
                f"subgraph index {sg_index} out of range (model has {len(subgraphs)} subgraphs)"
            )
        n_tensors = len(subgraphs[sg_index].tensors)
        maps = []
        for field in ("Inputs", "Outputs"):
            mapping: dict[str, int] = {}
            for k in range(self.count(sig, field)):
                tm = getattr(sig, field)(k)
                sig_name = self.text(tm.Name(), f"{field.lower()[:-1]} {k} name") or ""
                t = int(tm.TensorIndex())
                what = field.lower()[:-1]
                if t >= n_tensors:
                    raise self.fail(
                        f"{what} {quote(sig_name)} refers to tensor {t}, out of range "
                        f"(subgraph {sg_index} has {n_tensors} tensors)"
                    )
                if sig_name in mapping:
                    raise self.fail(f"duplicate {what} name {quote(sig_name)}")
                mapping[sig_name] = t
            maps.append(mapping)
        return SignatureDef(key=key, subgraph_index=sg_index, inputs=maps[0], outputs=maps[1])


def _builtin_code_field(oc: Any) -> int:
    """OperatorCode.builtin_code as stored. The tflite bindings' ``BuiltinCode()`` returns
    ``deprecated_builtin_code`` for any code below 127, so a writer that leaves the old field
    0 (ADD) and sets only the new one (ai-edge-quantizer's DEQUANTIZE) read as ADD."""
    return int32_field(oc, 10)  # vtable slot 3: builtin_code (int32)
