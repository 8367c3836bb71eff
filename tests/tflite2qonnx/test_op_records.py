"""Each operator record's kernels and labels are what conversion does.

Five views: the bit-exact warning (``ops.treatment.rounded_once``) for every record against
its ``int8`` label; which function ``ops.dispatch`` runs for each record with int8 or int16
kernels, on int8 and int16 stand-ins, by default and under --bit-exact (the record's
``Kernel`` order, ``runs`` and ``when``); that no converter picks a kernel (a source check:
no converter reads --bit-exact or calls a kernel or predicate the records name, directly or
through its module's helpers); for every record with int16 kernels and a hand-built 16x8
single-op model (``int16_op_models.CASES``), the converted graphs: a kernel that runs by
default converts the same with and without --bit-exact and equals the interpreter's builtin
kernel, one that runs under --bit-exact only converts differently by default (one rounding)
and under --bit-exact (the kernel); and, for every record naming an int8 kernel, a hand-built
int8 single-op model converts differently under --bit-exact and then equals the interpreter's
builtin kernel.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from int16_op_models import CASES, differences
from litert_compare import reference_interpreter, run_ours
from tflite_writer import build_model

from qonnx_ingest.errors import ConversionError
from qonnx_ingest.quant_lowering import lower_quants
from tflite2qonnx.api import convert
from tflite2qonnx.ops import OPERATORS
from tflite2qonnx.ops.dispatch import dispatch
from tflite2qonnx.ops.record import (
    ANY_INTEGER,
    BY_DEFAULT,
    DEFAULT_WHERE,
    DEQUANTIZES,
    EMULATED,
    EXACT,
    EXACT_ON_ONE_GRID,
    ROUNDED_ONCE,
    UNDER_BIT_EXACT,
    Op,
    resolve,
)
from tflite2qonnx.ops.treatment import rounded_once

ROOT = Path(__file__).resolve().parents[2]
OPS = ROOT / "tflite2qonnx" / "ops"


def _tensor(dtype: str, scale: float | None, axis: int | None = None) -> SimpleNamespace:
    q = None if scale is None else SimpleNamespace(scale=[scale], zero_point=[0], block_size=0)
    quant = None if scale is None else SimpleNamespace(scale=scale, zero_point=0, axis=axis)
    return SimpleNamespace(
        dtype=dtype, integer_quantized=q is not None, quantization=q, quant=quant, shape=None
    )


def _builder(
    dtype: str, bit_exact: bool, bias: str = "int32", out_scale: float = 0.5, out_axis=None
):
    """A stand-in GraphBuilder: inputs 0 and 9 of ``dtype``, bias 2 of ``bias``, output 1, an
    int32 shape 7 (TRANSPOSE_CONV's input 0)."""
    tensors = {
        0: _tensor(dtype, 0.25),
        1: _tensor(dtype, out_scale, out_axis),
        2: _tensor(bias, None),
        7: _tensor("int32", None),
        9: _tensor(dtype, 0.125),  # weights, or a binary op's second operand
    }
    return SimpleNamespace(bit_exact=bit_exact, tensor=tensors.__getitem__)


def _op(name: str):
    """TRANSPOSE_CONV's activation is input 2 and its bias input 3 (the stand-in's 2)."""
    inputs = [7, 9, 0, 2] if name == "TRANSPOSE_CONV" else [0, 9, 2]
    return SimpleNamespace(
        name=name, inputs=inputs, outputs=[1], where=f"{name} (test)", options={}
    )


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_bit_exact_warning_follows_the_record(name: str) -> None:
    """--bit-exact warns about an int8 operator it leaves rounding once, and about no other."""
    record = OPERATORS[name]
    for same_grid in (True, False):
        b = _builder("int8", True, out_scale=0.25 if same_grid else 0.5)
        warned = rounded_once(b, [_op(name)]) == [name]
        if record.stored_integers == ANY_INTEGER or record.bit_exact in (
            EMULATED,
            EXACT,
            DEQUANTIZES,
        ):
            assert not warned
        elif record.bit_exact == EXACT_ON_ONE_GRID:
            assert warned != same_grid
        else:
            assert record.bit_exact == ROUNDED_ONCE and warned


def test_labels_follow_the_kernels() -> None:
    """A record is EMULATED exactly where it has int8 kernels; its int16 label is its int16
    kernels' ``runs``; a record's labels are nothing else (``int8`` a known label)."""
    labels = {ROUNDED_ONCE, EXACT, EXACT_ON_ONE_GRID, DEQUANTIZES}
    for name, record in OPERATORS.items():
        assert (record.bit_exact == EMULATED) == bool(record.int8_kernels), name
        assert record.int8_kernels or record.int8 in labels, name
        runs = {k.runs for k in record.int16_kernels}
        assert runs <= {BY_DEFAULT, DEFAULT_WHERE, UNDER_BIT_EXACT} and len(runs) <= 1, name
        assert record.int16_runs == (runs.pop() if runs else ""), name
        for k in record.hybrid_kernels:  # dynamic range: TFLite has no other kernel there
            assert k.runs == BY_DEFAULT and k.when is not None, name


# records with int8 or int16 kernels; CONCATENATION's runs on uint8 across grids only (a real
# model below); table kernels' own step is real too (the int8 models below)
_KERNEL_RECORDS = sorted(
    n
    for n, op in OPERATORS.items()
    if (op.int8_kernels or op.int16_kernels) and n != "CONCATENATION"
)


def _holds(b, op, kernel) -> bool:
    return kernel.when is None or resolve(kernel.when)(b, op)


def _declared(name: str, dtype: str, bit_exact: bool, bias: str) -> str | None:
    """What the record's kernels say runs, read as docs/development.md states it; None for a
    refusal, "table" where a table kernel is asked (its own step: the int8 models below)."""
    record = OPERATORS[name]
    b, op = _builder(dtype, bit_exact, bias=bias), _op(name)
    if dtype == "int16" and record.int16_kernels:
        for k in record.int16_kernels:
            if k.runs == DEFAULT_WHERE and (bit_exact or _holds(b, op, k)):
                return k.run
            ready = (k.runs == BY_DEFAULT or bit_exact) and k.runs != DEFAULT_WHERE
            if ready and _holds(b, op, k):
                return "table" if k.table else k.run
        return None if bit_exact else record.convert
    for k in record.int8_kernels:  # int8, and an int16 input nothing else takes
        if k.runs == BY_DEFAULT or bit_exact:
            if k.table:
                return "table"
            if k.when is None and dtype == "int16" and k.runs == UNDER_BIT_EXACT:
                return None  # --bit-exact refuses an int16 kernel nobody emulates
            if _holds(b, op, k):
                return k.run
    return record.convert


def _spied(record: Op, calls: list[str]):
    """``record``'s dispatch with every function it may run replaced by a recorder (predicates
    real: they are the choice under test)."""
    kernels = (*record.int8_kernels, *record.int16_kernels, *record.hybrid_kernels)
    predicates = {k.when for k in (*kernels, *record.float_kernels)}

    def load(reference: str):
        assert callable(resolve(reference)), reference
        if reference in predicates:
            return resolve(reference)
        return lambda b, op: calls.append(reference)

    return dispatch(record, load)


@pytest.mark.parametrize("name", _KERNEL_RECORDS)
def test_dispatch_runs_the_kernel_the_record_declares(name: str) -> None:
    """int8 and int16 stand-ins, by default and under --bit-exact (int32 and int64 biases):
    the function run is the one the record's kernels say, in their order."""
    for dtype in ("int8", "int16"):
        for bit_exact in (False, True):
            for bias in ("int32", "int64"):
                want = _declared(name, dtype, bit_exact, bias)
                if want == "table":
                    continue
                calls: list[str] = []
                run = _spied(OPERATORS[name], calls)
                b, op = _builder(dtype, bit_exact, bias=bias), _op(name)
                if want is None:
                    with pytest.raises(ConversionError, match="not emulated"):
                        run(b, op)
                    continue
                run(b, op)
                assert calls == [want], (dtype, bit_exact, bias)


def test_16x8_convolutions_round_once_by_default_without_a_wide_bias() -> None:
    """The DEFAULT_WHERE kernels: an unbiased int16 CONV_2D rounds once by default (the
    converter) and runs the 16x8 kernel under --bit-exact; TRANSPOSE_CONV's runs either way."""
    for name, by_default in (("CONV_2D", "nn.conv:conv_2d"),
                             ("TRANSPOSE_CONV", "exact.entry:transpose_conv_16x8")):  # fmt: skip
        op = _op(name)
        op.inputs = op.inputs[:-1]  # no bias
        for bit_exact, want in ((False, by_default), (True, OPERATORS[name].int16_kernels[0].run)):
            calls: list[str] = []
            _spied(OPERATORS[name], calls)(_builder("int16", bit_exact), op)
            assert calls == [want], (name, bit_exact)


@pytest.mark.parametrize("name", ["CONV_2D", "DEPTHWISE_CONV_2D"])
def test_int8_convolutions_round_twice_by_default_where_the_multiplier_shifts_right(name) -> None:
    """By default an int8 convolution whose multiplier (0.25 * 0.125 / s_out) shifts right runs
    the twice-rounding kernel, one whose multiplier shifts left (s_out 0.001) the converter;
    --bit-exact the emulated kernel either way."""
    record = OPERATORS[name]
    rounding, emulated = (k.run for k in reversed(record.int8_kernels))
    assert record.int8_default == (record.int8_kernels[1],) and rounding.startswith("nn.conv_r")
    for out_scale, bit_exact, want in ((0.5, False, rounding), (0.001, False, record.convert),
                                       (0.5, True, emulated), (0.001, True, emulated)):  # fmt: skip
        calls: list[str] = []
        _spied(record, calls)(_builder("int8", bit_exact, out_scale=out_scale), _op(name))
        assert calls == [want], (out_scale, bit_exact)


@pytest.mark.parametrize(
    "name, twice, once", [("MUL", 0.5, 0.001), ("LEAKY_RELU", 0.75, 0.5), ("QUANTIZE", 0.75, 0.5)]
)
def test_int8_requantizations_round_twice_by_default_where_the_multiplier_shifts_right(
    name: str, twice: float, once: float
) -> None:
    """By default an int8 MUL (0.25 * 0.125 / s_out), LEAKY_RELU (alpha 0) or QUANTIZE
    (0.25 / s_out) whose multiplier shifts right runs its record's twice-rounding kernel, one
    whose multiplier does not (QuantizeMultiplier's shift 0 or left) the converter."""
    record = OPERATORS[name]
    (rounding,) = record.int8_default
    assert rounding.run.startswith(("arith.rounding:", "nn.quantize_rounding:"))
    for out_scale, want in ((twice, rounding.run), (once, record.convert)):
        calls: list[str] = []
        _spied(record, calls)(_builder("int8", False, out_scale=out_scale), _op(name))
        assert calls == [want], out_scale


def test_int16_quantize_the_kernel_does_not_cover_is_refused_under_bit_exact() -> None:
    """QUANTIZE from int16 onto a per-axis grid: no requantization kernel (its int16 kernel's
    ``when``); rounded once by default, refused by --bit-exact, never the int8 table."""
    calls: list[str] = []
    run = _spied(OPERATORS["QUANTIZE"], calls)
    run(_builder("int16", False, out_axis=0), _op("QUANTIZE"))
    assert calls == [OPERATORS["QUANTIZE"].convert]
    with pytest.raises(ConversionError, match="this int16 QUANTIZE is not emulated"):
        run(_builder("int16", True, out_axis=0), _op("QUANTIZE"))


def _reads_kernel_choice(tree: ast.AST) -> list[int]:
    """Lines reading the builder's ``b.bit_exact``."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "bit_exact"
        and getattr(node.value, "id", "") == "b"
    ]


def test_only_the_dispatch_and_treatment_read_bit_exact() -> None:
    """No converter and no kernel reads --bit-exact: the records' kernels, read by
    ``ops.dispatch`` and ``ops.treatment``, are the one choice."""
    allowed = {OPS / "dispatch.py", OPS / "treatment.py"}
    found = {
        str(path.relative_to(ROOT)): lines
        for path in sorted(OPS.rglob("*.py"))
        if path not in allowed and (lines := _reads_kernel_choice(ast.parse(path.read_text())))
    }
    assert found == {}


def _module_refs(module: str) -> tuple[dict[str, ast.FunctionDef], dict[str, str]]:
    """``module``'s (a ``tflite2qonnx.ops`` sub-module) top-level functions (a converter made
    by a factory, ``mul = _binary("Mul")``, as the factory), and each name it calls by mapped
    to a record reference ``"module:function"`` (its own functions, names it imports from
    ``tflite2qonnx.ops`` modules, and ``alias.function`` of imported modules)."""
    tree = ast.parse((OPS / (module.replace(".", "/") + ".py")).read_text())
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target, value = node.targets[0], node.value
        pairs = (
            zip(target.elts, value.elts, strict=False)
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
            else [(target, value)]
        )
        for t, v in pairs:
            factory = getattr(getattr(v, "func", None), "id", None)
            if isinstance(t, ast.Name) and isinstance(v, ast.Call) and factory in functions:
                functions[t.id] = functions[factory]
    names = {name: f"{module}:{name}" for name in functions}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tflite2qonnx.ops"):
            source = node.module.removeprefix("tflite2qonnx.ops").lstrip(".")
            for alias in node.names:
                sub = f"{source}.{alias.name}".lstrip(".")
                is_module = (OPS / (sub.replace(".", "/") + ".py")).exists()
                names[alias.asname or alias.name] = (
                    sub + "." if is_module else (f"{source}:{alias.name}")
                )
    return functions, names


def _called(module: str, function: str) -> set[str]:
    """The references ``module:function`` calls, following its own module's helpers."""
    functions, names = _module_refs(module)
    seen, todo, refs = set(), [function], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        for node in ast.walk(functions[name]):
            if isinstance(node, ast.Name) and node.id in names and node.id not in functions:
                refs.add(names[node.id])  # passed as a value too (a rounding handed to a helper)
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id in names:
                refs.add(names[f.id])
                todo.append(f.id)
            elif isinstance(f, ast.Attribute) and getattr(f.value, "id", "") in names:
                prefix = names[f.value.id]
                if prefix.endswith("."):
                    refs.add(f"{prefix[:-1]}:{f.attr}")
            if isinstance(f, ast.Name) and (f.id.startswith(("is_hybrid", "is_blockwise"))
                                            or f.id in ("is_int16", "emulates")):  # fmt: skip
                refs.add(f"predicate:{f.id}")
    return refs


def _converters() -> list[str]:
    refs = set()
    for record in OPERATORS.values():
        refs |= {record.convert} if record.convert else set()
        refs |= {record.complex} if isinstance(record.complex, str) else set()
    return sorted(refs)


def _kernel_refs() -> set[str]:
    refs = set()
    for record in OPERATORS.values():
        for k in (*record.int8_kernels, *record.int16_kernels, *record.hybrid_kernels,
                  *record.float_kernels):  # fmt: skip
            refs |= {k.run} | ({k.when} if k.when else set())
    return refs


@pytest.mark.parametrize("converter", _converters())
def test_converters_choose_no_kernel(converter: str) -> None:
    """A converter (through its module's helpers too) calls no kernel and no predicate the
    records name, and no hybrid / int16 test: the choice between a record's float, int8,
    16x8 and hybrid kernels is the dispatch's, read from the record."""
    module, _, function = converter.partition(":")
    chosen = {r for r in _called(module, function) if r in _kernel_refs() or "predicate:" in r}
    assert chosen == set()


@pytest.mark.parametrize("converter", _converters())
def test_converters_call_no_kernel_rounding(converter: str) -> None:
    """A converter (through its module's helpers too) calls or passes no ``kernel_rounding``
    helper: a twice rounding of the default form is a default-running int8 kernel of the
    record (``nn.conv_rounding``, ``arith.rounding``, ``nn.quantize_rounding``)."""
    module, _, function = converter.partition(":")
    rounds = {r for r in _called(module, function) if r.startswith("kernel_rounding:")}
    assert rounds == set()


def test_the_source_check_sees_a_kernel_choice() -> None:
    """The checks above find what they look for: a hybrid kernel's entry calls its kernel, the
    convolutions' default kernel hands ``_conv`` the accumulator's rounding."""
    assert "hybrid.conv:hybrid_conv" in _called("hybrid.conv", "conv_2d")
    rounding = _called("nn.conv_rounding", "depthwise_conv_2d")
    assert "kernel_rounding:requantize_accumulator" in rounding
    assert "predicate:is_hybrid_lstm" in _called("recurrent.sequence", "hybrid_bidirectional")
    assert "activation:fused_activation" in _called("arith.elementwise", "mul")  # a factory's
    assert "exact.int8:add" in _kernel_refs()


INT16_CASES = sorted(n for n in CASES if n in OPERATORS and OPERATORS[n].int16_kernels)


def test_int16_cases_cover_both_treatments() -> None:
    kinds = {OPERATORS[n].int16_runs for n in INT16_CASES}
    assert {BY_DEFAULT, UNDER_BIT_EXACT} <= kinds, INT16_CASES


@pytest.mark.parametrize("name", INT16_CASES)
def test_int16_declaration_is_what_conversion_does(name: str) -> None:
    case = CASES[name]
    data = case.model(same=False)
    default = convert(data).SerializeToString()
    exact = convert(data, bit_exact=True).SerializeToString()
    if OPERATORS[name].int16_runs in (BY_DEFAULT, DEFAULT_WHERE):  # biases: int64
        assert default == exact
        assert differences(data, case.feeds(), bit_exact=False).max() == 0
    else:
        assert OPERATORS[name].int16_runs == UNDER_BIT_EXACT
        assert default != exact


def _int8(name: str, shape, scale: float, zero_point: int) -> dict:
    return {"name": name, "shape": shape, "dtype": "int8", "quant": ([scale], [zero_point])}


# operand shapes of the int8 single-op models (one input unless listed), output grid
_INT8_SHAPES = {"BATCH_MATMUL": [(2, 3), (3, 4)], "PRELU": [(4, 16), (16,)]}
_TWO_INPUTS = {"ADD", "SUB", "MUL", "DIV", "SQUARED_DIFFERENCE"}
# the only grid these kernels write
_OUTPUT_GRID = {"L2_NORMALIZATION": (1 / 128, 0), "LOGISTIC": (1 / 256, -128)}
# kernels whose operands a one- or two-input [4, 16] int8 model cannot hold (weights, axes,
# options, bool outputs, uint8 or float inputs): their real models, against the interpreter
_OWN_MODELS = {
    "AVERAGE_POOL_2D": "test_bit_exact.py",
    "SVDF": "test_svdf.py",  # its kernel runs by default
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "test_lstm_int_variants.py",  # by default
    "CONCATENATION": "test_op_records.py",
    "CONV_2D": "test_bit_exact.py",
    "DEPTHWISE_CONV_2D": "test_bit_exact.py",
    "EQUAL": "test_bit_exact_compare.py",
    "FULLY_CONNECTED": "test_bit_exact_fc_rounding.py",
    "GREATER": "test_bit_exact_compare.py",
    "GREATER_EQUAL": "test_bit_exact_compare.py",
    "LESS": "test_bit_exact_compare.py",
    "LESS_EQUAL": "test_bit_exact_compare.py",
    "LOG_SOFTMAX": "test_bit_exact_log_softmax.py",
    "MEAN": "test_bit_exact.py",
    "NEG": "test_bit_exact_compare.py",
    "NOT_EQUAL": "test_bit_exact_compare.py",
    "REDUCE_PROD": "test_bit_exact_reduce.py",
    "RESIZE_BILINEAR": "test_bit_exact_resize.py",
    "SOFTMAX": "test_bit_exact_kernels.py",
    "SUM": "test_bit_exact_reduce.py",
    "TRANSPOSE_CONV": "test_bit_exact_kernels.py",
}
_INT8_KERNELS = sorted(n for n, op in OPERATORS.items() if op.int8_kernels and n not in _OWN_MODELS)


@pytest.mark.parametrize("name", sorted(_OWN_MODELS))
def test_kernels_without_a_one_op_int8_model_have_their_own(name: str) -> None:
    assert OPERATORS[name].int8_kernels
    text = (Path(__file__).parent / _OWN_MODELS[name]).read_text()
    assert f'"{name}"' in text or f"'{name}'" in text or name.lower() in text


def _int8_model(name: str) -> bytes:
    shapes = _INT8_SHAPES.get(name) or [(4, 16)] * (2 if name in _TWO_INPUTS else 1)
    tensors = [_int8(f"x{i}", s, 0.05 + 0.01 * i, 3 - 5 * i) for i, s in enumerate(shapes)]
    out_shape = (2, 4) if name == "BATCH_MATMUL" else (4, 16)
    tensors.append(_int8("y", out_shape, *_OUTPUT_GRID.get(name, (0.07, -2))))
    n = len(shapes)
    spec = {"op": name, "inputs": list(range(n)), "outputs": [n], "version": 1}
    return build_model(tensors, [spec], list(range(n)), [n])


def test_int8_kernel_cases_cover_every_declared_kernel() -> None:
    assert {"ADD", "LOGISTIC", "RELU", "L2_NORMALIZATION", "QUANTIZE"} <= set(_INT8_KERNELS)


@pytest.mark.parametrize("name", _INT8_KERNELS)
def test_int8_table_or_kernel_runs_under_bit_exact(name: str) -> None:
    """Declared int8 kernels (tables too): under --bit-exact the graph is the kernel's (not the
    default single rounding) and equals the builtin kernel on every fed input."""
    data = _int8_model(name)
    assert convert(data).SerializeToString() != convert(data, bit_exact=True).SerializeToString()
    rng = np.random.default_rng(0)
    shapes = _INT8_SHAPES.get(name) or [(4, 16)] * (2 if name in _TWO_INPUTS else 1)
    feeds = [rng.integers(-128, 128, s).astype(np.int8) for s in shapes]
    if name in ("DIV",):
        feeds[1][feeds[1] == 3] = 4  # a zero divisor (q == zero point) fails the kernel
    if name in ("LOG", "RSQRT"):
        feeds[0] = np.maximum(feeds[0], 4)  # the real input above zero
    # the reference resolver has no ELU: the default one's int8 ELU is the same table
    assert differences(data, feeds, bit_exact=True, xnnpack=name == "ELU").max() == 0


def test_float_quantize_onto_a_zero_point_rounds_first_under_bit_exact() -> None:
    """QUANTIZE from float onto a zero point (its record's ``float_input`` kernel's ``when``):
    TFLite rounds ``x / s`` half away from zero before adding the zero point; equal on every
    tie under --bit-exact, while the default's single Quant differs on some."""
    tensors = [
        {"name": "x", "shape": (64,), "dtype": "float32"},
        {"name": "y", "shape": (64,), "dtype": "int8", "quant": ([0.5], [5])},
    ]
    data = build_model(tensors, [{"op": "QUANTIZE", "inputs": [0], "outputs": [1]}], [0], [1])
    x = ((np.arange(64) - 40) * 0.25).astype(np.float32)  # x / s: every half from -20 to 11.5
    assert differences(data, [x], bit_exact=True).max() == 0
    assert differences(data, [x], bit_exact=False).max() > 0


def test_uint8_concatenation_across_grids_equals_builtin_under_bit_exact() -> None:
    """uint8 CONCATENATION with inputs on other grids than its output's (its record's int8
    kernel's ``when``): every stored input integer rescaled as the kernel does, under --bit-exact
    equal to the interpreter on all 256 of each input (the kernel's graph, not the default's)."""
    grids = [(0.05, 128), (0.03, 100), (0.07, 120)]
    tensors = [
        {"name": n, "shape": s, "dtype": "uint8", "quant": ([g[0]], [g[1]])}
        for n, s, g in zip("aby", [(1, 256), (1, 256), (1, 512)], grids, strict=True)
    ]
    spec = {
        "op": "CONCATENATION",
        "inputs": [0, 1],
        "outputs": [2],
        "options": ("ConcatenationOptions", {"Axis": 1}),
    }
    data = build_model(tensors, [spec], [0, 1], [2])
    q = np.arange(256, dtype=np.uint8).reshape(1, 256)
    feeds = [q, q[:, ::-1].copy()]
    it = reference_interpreter(data)
    for detail, value in zip(it.get_input_details(), feeds, strict=True):
        it.set_tensor(detail["index"], value)
    it.invoke()
    theirs = it.get_tensor(it.get_output_details()[0]["index"]).astype(np.float64)
    real = {
        n: np.float32(s) * (v.astype(np.float32) - z)
        for n, v, (s, z) in zip("ab", feeds, grids, strict=False)
    }
    models = {bit_exact: convert(data, bit_exact=bit_exact) for bit_exact in (False, True)}
    assert models[False].SerializeToString() != models[True].SerializeToString()
    (y,) = run_ours(lower_quants(models[True]), real).values()
    ours = np.round(np.asarray(y, np.float64) / grids[2][0]) + grids[2][1]
    assert np.array_equal(ours, theirs), f"{np.sum(ours != theirs)} differ"
