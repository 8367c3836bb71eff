"""Hand-built models with a STABLEHLO_COMPOSITE (what litert-torch emits for ``odml.*``
ops), written with the object API of ai-edge-litert's schema bindings: the ``tflite`` 2.18
package reads StableHLOCompositeOptions but has no object API to write several subgraphs.

The interpreter has no kernel for these names and runs the decomposition subgraph."""

from __future__ import annotations

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as s
from flatbuffers import flexbuffers

_TYPES = {"float32": s.TensorType.FLOAT32, "int8": s.TensorType.INT8}


class _Builder:
    """Tensors as (name, shape, dtype, data, quant); operators as (code, ins, outs, options)."""

    def __init__(self) -> None:
        self.model = s.ModelT()
        self.model.version = 3
        self.model.buffers = [s.BufferT()]
        self.model.operatorCodes, self.model.subgraphs = [], []
        self.codes: list[int] = []

    def code(self, builtin: int) -> int:
        if builtin not in self.codes:
            c = s.OperatorCodeT()
            c.builtinCode, c.deprecatedBuiltinCode, c.version = builtin, min(builtin, 127), 1
            self.codes.append(builtin)
            self.model.operatorCodes.append(c)
        return self.codes.index(builtin)

    def tensor(self, name, shape, dtype="float32", data=None, quant=None) -> s.TensorT:
        t = s.TensorT()
        t.name, t.shape, t.type = name, list(shape), _TYPES[dtype]
        buf = s.BufferT()
        if data is not None:
            buf.data = list(np.ascontiguousarray(data).tobytes())
        self.model.buffers.append(buf)
        t.buffer = len(self.model.buffers) - 1
        if quant is not None:
            q = s.QuantizationParametersT()
            q.scale, q.zeroPoint = [float(quant[0])], [int(quant[1])]
            t.quantization = q
        return t

    def subgraph(self, name, tensors, operators, inputs, outputs) -> int:
        sg = s.SubGraphT()
        sg.name, sg.tensors, sg.inputs, sg.outputs = name, tensors, inputs, outputs
        sg.operators = []
        for builtin, ins, outs, options in operators:
            o = s.OperatorT()
            o.opcodeIndex, o.inputs, o.outputs = self.code(builtin), ins, outs
            if isinstance(options, s.StableHLOCompositeOptionsT):
                o.builtinOptions2Type = s.BuiltinOptions2.StableHLOCompositeOptions
                o.builtinOptions2 = options
            elif options is not None:
                o.builtinOptionsType, o.builtinOptions = options
            sg.operators.append(o)
        self.model.subgraphs.append(sg)
        return len(self.model.subgraphs) - 1

    def bytes(self) -> bytes:
        b = flatbuffers.Builder(1024)
        b.Finish(self.model.Pack(b), b"TFL3")
        return bytes(b.Output())


def composite_options(name: str, index: int) -> s.StableHLOCompositeOptionsT:
    """The interpreter requires composite_attributes (a FlexBuffer map)."""
    options = s.StableHLOCompositeOptionsT()
    options.name, options.decompositionSubgraphIndex, options.version = name.encode(), index, 1
    options.compositeAttributes = list(flexbuffers.Dumps({"approximate": False}))
    return options


def _conv_options() -> tuple[int, s.Conv2DOptionsT]:
    o = s.Conv2DOptionsT()
    o.padding, o.strideW, o.strideH = s.Padding.SAME, 1, 1
    o.dilationWFactor = o.dilationHFactor = 1
    o.fusedActivationFunction = s.ActivationFunctionType.RELU
    return s.BuiltinOptions.Conv2DOptions, o


def _add_options() -> tuple[int, s.AddOptionsT]:
    return s.BuiltinOptions.AddOptions, s.AddOptionsT()


def float_conv_composite(seed: int = 0, decomposition: int = 1) -> bytes:
    """x (1,6,6,2) -> composite 'odml.conv_relu' [CONV_2D 3x3 SAME, relu] -> ADD to itself
    in the main graph; ``decomposition``: the subgraph index the options name."""
    rng = np.random.default_rng(seed)
    m = _Builder()
    main = [m.tensor("x", (1, 6, 6, 2)), m.tensor("conv_relu", (1, 6, 6, 3)),
            m.tensor("y", (1, 6, 6, 3))]  # fmt: skip
    ops = [
        (s.BuiltinOperator.STABLEHLO_COMPOSITE, [0], [1],
         composite_options("odml.conv_relu", decomposition)),
        (s.BuiltinOperator.ADD, [1, 1], [2], _add_options()),
    ]  # fmt: skip
    m.subgraph("main", main, ops, [0], [2])
    weights = rng.uniform(-1, 1, (3, 3, 3, 2)).astype(np.float32)
    bias = rng.uniform(-0.5, 0.5, (3,)).astype(np.float32)
    inner = [m.tensor("a", (1, 6, 6, 2)), m.tensor("w", weights.shape, data=weights),
             m.tensor("b", bias.shape, data=bias), m.tensor("out", (1, 6, 6, 3))]  # fmt: skip
    conv = (s.BuiltinOperator.CONV_2D, [0, 1, 2], [3], _conv_options())
    m.subgraph("odml.conv_relu_decomp", inner, [conv], [0], [3])
    return m.bytes()


X_GRID, C_GRID, OUT_GRID = (0.02, 3), (0.01, -5), (0.03, -2)


def int8_add_composite(inner_out_grid: tuple[float, int] = OUT_GRID) -> bytes:
    """int8 x (1,8) -> composite 'odml.add_bias' [ADD x + constant c] -> y; the decomposition's
    tensors on the outer tensors' grids unless ``inner_out_grid`` says otherwise."""
    m = _Builder()
    main = [m.tensor("x", (1, 8), "int8", quant=X_GRID),
            m.tensor("y", (1, 8), "int8", quant=OUT_GRID)]  # fmt: skip
    m.subgraph("main", main, [(s.BuiltinOperator.STABLEHLO_COMPOSITE, [0], [1],
                               composite_options("odml.add_bias", 1))], [0], [1])  # fmt: skip
    c = np.arange(-40, 40, 10, dtype=np.int8).reshape(1, 8)
    inner = [m.tensor("a", (1, 8), "int8", quant=X_GRID),
             m.tensor("c", (1, 8), "int8", data=c, quant=C_GRID),
             m.tensor("sum", (1, 8), "int8", quant=inner_out_grid)]  # fmt: skip
    m.subgraph("odml.add_bias_decomp", inner,
               [(s.BuiltinOperator.ADD, [0, 1], [2], _add_options())], [0], [2])  # fmt: skip
    return m.bytes()
