"""The ONNX graph under construction while a TFLite subgraph is converted.

Op converters see TFLite tensors by index and ONNX values by name. Each TFLite tensor has one
float ONNX value: for a quantized tensor it is the output of a Quant node, so executing the
QONNX graph reproduces every quantize / requantize point of the TFLite graph.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qonnx_ingest.errors import ConversionError, InputError
from qonnx_ingest.names import TakenNames, short_name, unique_name
from qonnx_ingest.quant import make_quant
from tflite2qonnx.dtypes import ONNX_TYPES
from tflite2qonnx.element_types import (
    INTEGER_ELEM_TYPES,
    check_element_types,
    elem_type,
    refuse_complex_boundary,
    tensor_value_info,
)
from tflite2qonnx.graph_io import io_record, unique_tensor_names
from tflite2qonnx.minifloat import FORMATS, float_quant_constant
from tflite2qonnx.model import Operator, Subgraph, Tensor
from tflite2qonnx.quantization import dequantize
from tflite2qonnx.state import StateIO
from tflite2qonnx.state import finish as finish_states
from tflite2qonnx.state import reserve_names as reserve_state_names


class GraphBuilder:
    """Accumulates nodes and initializers and tracks TFLite tensor -> ONNX value."""

    def __init__(
        self,
        subgraph: Subgraph,
        *,
        quant_op_type: str = "Quant",
        opset: int = 13,
        bit_exact: bool = False,
        subgraphs: Sequence[Subgraph] = (),
        state_io: bool = False,
    ):
        self.subgraph = subgraph
        # every subgraph of the model, for the ops that call one (IF, WHILE, CALL_ONCE)
        self.subgraphs = tuple(subgraphs)
        self.opset = opset
        self.quant_op_type = quant_op_type
        # emulate the builtin integer kernels' fixed-point arithmetic (tflite2qonnx.fixed_point)
        self.bit_exact = bit_exact
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.io_quantization: dict[str, dict] = {}
        self._values: dict[int, str] = {}
        self._constants: dict[int, np.ndarray] = {}
        # constants given a value by bind / set_constant rather than read from the file
        self._bound: set[int] = set()
        self._materialized: dict[tuple[int, tuple[int, ...] | None], str] = {}
        self._producer: dict[str, onnx.NodeProto] = {}
        self._taken = TakenNames()
        self._tensor_names = unique_tensor_names(subgraph)
        # the operator being converted (set by convert_subgraph), named by operand errors
        self.current: Operator | None = None
        # what subgraph calls share (ops/control/flow.py: resource variables), and whether this
        # builder's graph runs conditionally or repeatedly (an If branch, a Loop body)
        self.calls: object | None = None
        self.nested = False
        # variable tensors, graph inputs and outputs under state_io (tflite2qonnx.state)
        self.states = StateIO(state_io)
        # graph output names, taken before any fresh name so none can take one; each is
        # released to its own tensor (``_claim``) or bound at the end (``_bind_output_name``)
        self._reserved = {self.tensor_name(i) for i in subgraph.outputs} - {
            self.tensor_name(i) for i in subgraph.inputs
        }
        self._taken.update(self._reserved)
        for idx in subgraph.inputs:
            self._add_graph_input(idx)
        if state_io:  # their graph inputs' names, taken before any node's
            reserve_state_names(self)

    def child(self, subgraph: Subgraph, *, inline: bool, nested: bool = False) -> GraphBuilder:
        """A builder for a called subgraph (IF, WHILE, CALL_ONCE) whose names never clash with
        this one's; ``inline``: its nodes go into this graph, else into a graph of its own (an
        ONNX subgraph). Its inputs are bound by the caller (``bind``)."""
        child = GraphBuilder(
            dataclasses.replace(subgraph, inputs=()),
            quant_op_type=self.quant_op_type,
            opset=self.opset,
            bit_exact=self.bit_exact,
            subgraphs=self.subgraphs,
        )
        child._taken = self._taken
        child._reserved = set()  # a called subgraph's outputs are no graph outputs
        child.calls = self.calls
        child.states = self.states
        child.nested = self.nested or nested or not inline
        if inline:
            child.nodes, child.initializers = self.nodes, self.initializers
            child._producer = self._producer
        return child

    def bind(self, idx: int, *, name: str | None = None, value: np.ndarray | None = None) -> None:
        """Tensor ``idx`` takes a value from outside: a constant, or a tensor by name."""
        if value is not None:
            self._constants[idx] = value
            self._bound.add(idx)
        else:
            assert name is not None, "bind needs a name or a value"
            self._values[idx] = name

    # ------------------------------------------------------------------ tensors and names
    def tensor(self, idx: int) -> Tensor:
        """Tensor ``idx``; -1 (an omitted optional operand) where a tensor is needed is an
        InputError, not Python's "last tensor"."""
        if not 0 <= idx < len(self.subgraph.tensors):
            what = "an omitted operand (-1)" if idx == -1 else f"tensor index {idx}"
            raise InputError(f"{what} is used where a tensor is required", self._where())
        return self.subgraph.tensors[idx]

    def _check_numeric(self, tensor: Tensor) -> None:
        """String, resource and variant buffers hold no numbers (the reader keeps their raw
        bytes), so an operator cannot take one as a constant operand."""
        if tensor.dtype in ("string", "resource", "variant"):
            raise InputError(
                f"{tensor.dtype} tensor {tensor.index} '{tensor.name}' is used as a numeric "
                "constant",
                self._where(),
            )

    def _where(self) -> str:
        return self.current.where if self.current is not None else "subgraph"

    def elem_type(self, idx: int) -> int:
        """The ONNX element type tensor ``idx`` has in the graph (``elem_type``)."""
        return elem_type(self.tensor(idx))

    def is_integer(self, idx: int) -> bool:
        """Whether tensor ``idx`` is an unquantized integer tensor: integers in the graph too,
        so float-only ONNX ops (Floor, Div's rounding) need an integer form."""
        return self.elem_type(idx) in INTEGER_ELEM_TYPES

    def tensor_name(self, idx: int) -> str:
        """The ONNX name a TFLite tensor keeps at the graph boundary."""
        return self._tensor_names[idx]

    def fresh(self, hint: str) -> str:
        """A name no other value, node or initializer has, nor any graph input or output."""
        return unique_name(hint, self._taken)

    def _claim(self, idx: int, perm: Sequence[int] | None = None) -> str | None:
        """Graph output ``idx``'s reserved name for its own value (the Quant node or constant
        that computes it), once; None for any other tensor or a second value."""
        name = self.tensor_name(idx)
        if perm is not None or name not in self._reserved:
            return None
        self._reserved.discard(name)
        return name

    # ------------------------------------------------------------------ reading values
    def constant(self, idx: int) -> np.ndarray | None:
        """The real (dequantized, float32) value of a constant tensor, else None."""
        if idx in self._constants:
            return self._constants[idx]
        tensor = self.tensor(idx)
        if tensor.data is None:
            return None
        self._check_readable(tensor)
        value = dequantize(tensor)
        self._constants[idx] = value
        return value

    def _check_readable(self, tensor: Tensor) -> None:
        self._check_numeric(tensor)
        if tensor.sparsity is not None:
            raise ConversionError("sparse constants need DENSIFY", f"tensor '{tensor.name}'")

    def stored_constant(self, idx: int) -> np.ndarray | None:
        """A constant as the graph holds it, else None: an unquantized integer or bool tensor
        keeps its TFLite type (shape arithmetic stays integer, exactly: int32 beyond 2**24
        does not survive float32), any other its real float32 value (``constant``)."""
        tensor = self.tensor(idx)
        # float32 / float16 (and string and the like, which constant refuses) read as real values
        if idx in self._bound or tensor.data is None or tensor.quant is not None:
            return self.constant(idx)
        if tensor.dtype not in ONNX_TYPES:
            return self.constant(idx)
        self._check_readable(tensor)
        return np.asarray(tensor.data)

    def input(self, idx: int, perm: Sequence[int] | None = None) -> str:
        """The ONNX value holding tensor ``idx`` (permuted by ``perm`` if given).

        Constants become initializers, permuted at conversion time; a quantized constant goes
        through a Quant node carrying its scale, zero point and width (per-axis parameters move
        with the permutation), so the annotation survives in the QONNX graph.
        """
        perm_key = tuple(perm) if perm is not None else None
        if (idx, perm_key) in self._materialized:
            return self._materialized[(idx, perm_key)]
        value = self.stored_constant(idx)
        shape = value.shape if value is not None else self.tensor(idx).shape
        if perm is not None and len(perm) != len(shape):
            raise InputError(
                f"operand tensor {idx} '{self.tensor(idx).name}' has shape {list(shape)}, "
                f"the operator needs rank {len(perm)}",
                self._where(),
            )
        if value is None:
            name = self._values.get(idx)
            if name is None:
                raise ConversionError(
                    "tensor is read before any operator produces it",
                    f"tensor {idx} '{self.tensor(idx).name}'",
                )
            if perm is not None:
                name = self.emit("Transpose", [name], perm=list(perm))[0]
        else:
            if perm is not None:
                value = np.ascontiguousarray(value.transpose(perm))
            name = self._quantize_constant(idx, value, perm_key)
        self._materialized[(idx, perm_key)] = name
        return name

    def raw_input(self, idx: int, out_idx: int, perm: Sequence[int] | None = None) -> str:
        """Tensor ``idx`` as a data-movement kernel hands it to output ``out_idx``."""
        return self.reinterpret(self.input(idx, perm), idx, out_idx)

    def reinterpret(self, value: str, src_idx: int, dst_idx: int) -> str:
        """``value`` (tensor ``src_idx``'s integers) read on tensor ``dst_idx``'s grid.

        Data-movement kernels (TRANSPOSE, RESHAPE, SLICE, GATHER, PAD, pooling, nearest and
        bilinear resize, MAXIMUM, SELECT, ...) copy, compare or average raw integers without
        requantizing, so where the two tensors' scale or zero point differ, the output holds
        the same integers on its own grid: ``y = s_out * (x / s_in + zp_in - zp_out)``.
        Rescaling the real value instead would be off by up to the whole range.
        """
        src, dst = self.tensor(src_idx).quant, self.tensor(dst_idx).quant
        if src is None or dst is None or src.axis is not None or dst.axis is not None:
            return value
        s_in, zp_in = float(src.scale), float(src.zero_point)
        s_out, zp_out = float(dst.scale), float(dst.zero_point)
        if s_in == s_out and zp_in == zp_out:
            return value
        hint = f"{self.tensor_name(src_idx)}_as_{self.tensor_name(dst_idx)}"
        ratio = self.const(np.array(s_out / s_in, np.float32), f"{hint}_ratio")
        value = self.emit("Mul", [value, ratio], hint=f"{hint}_rescaled")[0]
        if zp_in != zp_out:
            shift = self.const(np.array(s_out * (zp_in - zp_out), np.float32), f"{hint}_shift")
            value = self.emit("Add", [value, shift], hint=f"{hint}_shifted")[0]
        return value

    def _quantize_constant(self, idx: int, value: np.ndarray, perm: tuple[int, ...] | None) -> str:
        tensor = self.tensor(idx)
        args = tensor.quant if tensor.data is not None else None
        hint = self.tensor_name(idx) if perm is None else f"{self.tensor_name(idx)}_perm"
        claimed = self._claim(idx, perm)
        if tensor.dtype in FORMATS and tensor.data is not None:  # FLOAT8: FloatQuant
            out = claimed or self.fresh(hint)
            for node in float_quant_constant(self.const, self.fresh, tensor, perm, hint, out):
                self.nodes.append(node)
                self._producer[node.output[0]] = node
            return out
        if args is None:
            if claimed is None:
                return self.const(value, hint)
            self.initializers.append(numpy_helper.from_array(np.asarray(value), claimed))
            return claimed
        raw = self.const(value, f"{hint}_float")
        out = claimed or self.fresh(hint)
        axis = args.axis if perm is None or args.axis is None else list(perm).index(args.axis)
        kwargs = {**args.as_kwargs(), "axis": axis}
        if perm is not None and args.axis is None and np.ndim(args.scale) == len(perm):
            # blockwise: full-shape scale and zero point move with the values
            kwargs["scale"] = np.transpose(args.scale, perm)
            kwargs["zero_point"] = np.transpose(args.zero_point, perm)
        self._add_quant(raw, out, value.shape, tensor.name, kwargs)
        return out

    # ------------------------------------------------------------------ writing values
    def int_constant(self, idx: int, where: str) -> np.ndarray:
        """The integer value of a constant operand (a shape, axes, paddings, perm)."""
        if idx >= 0 and self.tensor(idx).data is not None:
            self._check_numeric(self.tensor(idx))
            return np.asarray(self.tensor(idx).data).astype(np.int64)
        value = self.constant(idx) if idx >= 0 else None
        if value is None:
            raise ConversionError(f"operand {idx} must be a constant", where)
        return np.rint(value).astype(np.int64)

    def const(self, value: np.ndarray, hint: str) -> str:
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def emit(
        self,
        op_type: str,
        inputs: Sequence[str],
        n_outputs: int = 1,
        hint: str | None = None,
        **attrs,
    ) -> list[str]:
        """Append a node; returns its fresh output names."""
        base = hint or op_type
        outputs = [
            self.fresh(f"{base}_out{k}" if n_outputs > 1 else base) for k in range(n_outputs)
        ]
        name = self.fresh(short_name(hint) if hint else self._op_node_name(op_type))
        node = helper.make_node(op_type, list(inputs), outputs, name=name, **attrs)
        self.nodes.append(node)
        for out in outputs:
            self._producer[out] = node
        return outputs

    def _op_node_name(self, op_type: str) -> str:
        """``<TFLite tensor the current operator produces>/<ONNX op type>``: readable in
        netron and in the layer names hls4ml makes of node names."""
        op = self.current
        if op is None or not op.outputs or not 0 <= op.outputs[0] < len(self.subgraph.tensors):
            return op_type
        return f"{short_name(self.tensor_name(op.outputs[0]))}/{op_type}"

    def set_output(self, idx: int, value: str) -> None:
        """``value`` computes tensor ``idx`` in float; a quantized tensor gets its Quant node."""
        tensor = self.tensor(idx)
        args = tensor.quant
        if args is not None:
            out = self._claim(idx) or self.fresh(self.tensor_name(idx))
            self._add_quant(value, out, tensor.shape, tensor.name, args.as_kwargs())
            value = out
        self._values[idx] = value

    def alias(self, idx: int, value: str) -> None:
        """Tensor ``idx`` holds exactly ``value`` (e.g. DEQUANTIZE of a float-on-grid value)."""
        self._values[idx] = value

    def set_constant(self, idx: int, value: np.ndarray) -> None:
        """Tensor ``idx`` is a constant folded at conversion time (e.g. float16 DEQUANTIZE)."""
        self._constants[idx] = np.asarray(value, dtype=np.float32)
        self._bound.add(idx)

    def quant(self, x: str, hint: str, shape, **kwargs) -> str:
        """A Quant node (``make_quant`` keyword arguments) on ``x``; returns its output."""
        y = self.fresh(hint)
        self._add_quant(x, y, shape, hint, {"rounding_mode": "ROUND", **kwargs})
        return y

    def _add_quant(self, x: str, y: str, shape, tensor_name: str, kwargs: dict) -> None:
        base = short_name(y)  # the node and its parameters: no ';'-joined fused names
        name = self.fresh(f"{base}_quant")
        qnode = make_quant(x, y, x_shape=shape, name=name, op_type=self.quant_op_type, **kwargs)
        for init in qnode.initializers:
            suffix = init.name[len(y) :] if init.name.startswith(y) else f"_{init.name}"
            init.name = self.fresh(base + suffix)
        qnode.node.input[1:] = [init.name for init in qnode.initializers]
        self.nodes.append(qnode.node)
        self.initializers.extend(qnode.initializers)
        self._producer[y] = qnode.node

    # ------------------------------------------------------------------ graph interface
    def _add_graph_input(self, idx: int) -> None:
        tensor = self.tensor(idx)
        name = self.tensor_name(idx)
        self._taken.add(name)
        self._values[idx] = name
        args = tensor.quant
        if args is not None:
            # Users feed real values; the Quant node puts them on the tensor's grid.
            self.io_quantization[name] = io_record(tensor)
            out = self.fresh(f"{name}_quantized")
            self._add_quant(name, out, tensor.shape, tensor.name, args.as_kwargs())
            self._values[idx] = out

    def make_model(self, graph_name: str) -> onnx.ModelProto:
        """Assemble the graph; graph outputs take their TFLite names without Identity nodes."""
        # the states' Identity nodes first: binding an output name renames their inputs too
        state_inputs, state_outputs = finish_states(self)
        for what, indices in (
            ("graph input", self.subgraph.inputs),
            ("graph output", self.subgraph.outputs),
        ):
            refuse_complex_boundary(map(self.tensor, indices), what)
        outputs = []
        for idx in self.subgraph.outputs:
            tensor = self.tensor(idx)
            name = self._bind_output_name(idx)
            if tensor.quant is not None:
                self.io_quantization[name] = io_record(tensor)
            outputs.append(tensor_value_info(name, tensor))
        inputs = [
            tensor_value_info(self.tensor_name(i), self.tensor(i)) for i in self.subgraph.inputs
        ]
        inputs, outputs = inputs + state_inputs, outputs + state_outputs
        # Every activation's TFLite (source-layout) shape: the layout pass needs the ranks.
        boundary = {v.name for v in (*inputs, *outputs)}
        value_info = [
            tensor_value_info(name, self.tensor(idx))
            for idx, name in self._values.items()
            if name not in boundary and name in self._producer
        ]
        graph = helper.make_graph(
            self.nodes, graph_name, inputs, outputs, self.initializers, value_info=value_info
        )
        check_element_types(graph, self.opset, self._values, self.tensor)
        return helper.make_model(graph)

    def _bind_output_name(self, idx: int) -> str:
        want = self.tensor_name(idx)
        if idx in self._constants or idx not in self._values:
            value = self.input(idx)
        else:
            value = self._values[idx]
        if value == want:
            return want
        node = self._producer.get(value)
        graph_inputs = {self.tensor_name(i) for i in self.subgraph.inputs}
        claimed = want in self._taken and want not in self._reserved  # by a value already
        self._reserved.discard(want)
        if node is None or want in graph_inputs or claimed:
            # a constant, an input or an already-used name: an Identity is unavoidable
            self._taken.add(want)
            node = helper.make_node("Identity", [value], [want], name=self.fresh(short_name(want)))
            self.nodes.append(node)
            return want
        self._taken.add(want)
        for n in self.nodes:
            n.input[:] = [want if i == value else i for i in n.input]
            n.output[:] = [want if o == value else o for o in n.output]
        self._producer[want] = node
        for key, v in self._values.items():
            if v == value:
                self._values[key] = want
        return want
