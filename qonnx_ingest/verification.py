"""--verify: run the source model and the converted one on the same inputs and measure them.

The converters supply the source side (QKeras ``predict``, the TFLite interpreter) and their
tolerance; this module runs the converted model, measures each output the same way for both
and prints the figures. A quantized converted model runs in one onnxruntime session, which is
much faster than qonnx's executor (a session per node), in a form that computes the same bits:
after QCDQ lowering when that is exact (every activation quantizer 8 bits or less, rounding
half to even, no zero point), else with each Quant rewritten as qonnx evaluates it
(``quant_lowering``); qonnx's executor runs what neither form holds (bipolar, Trunc). A tie
rounded differently by QuantizeLinear is thus never blamed on the conversion. A model of
standard ops only (a ``--format qcdq`` file, a float model) runs as written under --verify,
in a default session: what its users load.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from qonnx_ingest.errors import ConversionError, InputError, VerificationError

Feeds = dict[str, np.ndarray]
DEFAULT_INPUTS = 16


@dataclass
class Agreement:
    """One output over all verification inputs.

    ``baseline`` holds the same figures between two runs of the source itself (TFLite's
    XNNPACK path against its builtin kernels), where the tolerance is relative to them."""

    name: str
    max_abs_error: float
    equal_fraction: float | None = None  # on the output's quantization grid, if it has one
    max_steps: int | None = None
    argmax_agreement: float | None = None  # for [batch, classes] outputs
    passed: bool = True
    tolerance: str = ""
    reference: str = "the source model"  # what the output was compared with
    rms_error: float | None = None
    non_finite: int | None = None  # values infinite or NaN in the converted model's output
    baseline: dict = field(default_factory=dict)  # equal_fraction, max_steps, max_abs_error, ...
    baseline_name: str = ""  # "TFLite's own CPU paths (XNNPACK, builtin)"

    def figures(self) -> str:
        """The measurements as one phrase, the comparison first, the baseline after."""
        base = self.baseline
        if "equal_fraction" in base:  # held to the source's own spread in grid steps
            text = (
                f"{100 * self.equal_fraction:.2f}% of output values equal to {self.reference}, "
                f"max {_steps(self.max_steps)} apart"
            )
        else:
            text = f"max abs error {self.max_abs_error:.3g} from {self.reference}"
            if self.rms_error is not None:
                text += f" (rms {self.rms_error:.3g})"
            if self.equal_fraction is not None:
                text += (
                    f", {100 * self.equal_fraction:.2f}% equal on the output grid, "
                    f"max {_steps(self.max_steps)} apart"
                )
        if self.argmax_agreement is not None:
            text += f", argmax agrees on {100 * self.argmax_agreement:.1f}%"
        if self.non_finite is not None:
            text += f", {self.non_finite} values infinite or NaN"
        if "equal_fraction" in base:
            if base["equal_fraction"] == 1.0:
                text += f"; {self.baseline_name} agree on every value"
            else:
                text += (
                    f"; {self.baseline_name} differ on {100 * (1 - base['equal_fraction']):.2f}%"
                    f", by up to {_steps(base['max_steps'])}"
                )
        elif "max_abs_error" in base:
            text += f"; {self.baseline_name} differ by up to {base['max_abs_error']:.3g}"
            if "rms_error" in base:
                text += f" (rms {base['rms_error']:.3g})"
            if "non_finite" in base:
                text += f", {base['non_finite']} values infinite or NaN"
        return text


def _steps(n: int | None) -> str:
    return "1 step" if n == 1 else f"{n} steps"


@dataclass
class Verification:
    outputs: list[Agreement]
    inputs: int
    runner: str

    @property
    def passed(self) -> bool:
        return all(a.passed for a in self.outputs)

    def require_pass(self) -> None:
        """``convert(..., verify=True)``: a disagreement is an exception, not a printout."""
        if not self.passed:
            raise VerificationError(self)

    def as_text(self) -> str:
        """The verdict first (``verify: ok, ...`` / ``verify: FAILED, ...``), then per output
        (several) its verdict and figures, then what ran; a failed output names its rule."""

        def verdict(a: Agreement) -> str:
            rule = "" if a.passed else f" (needs: {a.tolerance})" if a.tolerance else ""
            return f"{'ok' if a.passed else 'FAILED'}, {a.figures()}{rule}"

        if len(self.outputs) == 1:
            lines = [f"verify: {verdict(self.outputs[0])}"]
        else:
            failed = [a.name for a in self.outputs if not a.passed]
            head = (
                f"FAILED, {len(failed)} of {len(self.outputs)} outputs: {', '.join(failed)}"
                if failed
                else f"ok, all {len(self.outputs)} outputs"
            )
            lines = [f"verify: {head}", *(f"  {a.name}: {verdict(a)}" for a in self.outputs)]
        lines.append(f"  on {self.inputs} inputs; converted model run by {self.runner}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        """Every figure ``as_text`` prints, and each output's rule (``tolerance``)."""
        return {
            "inputs": self.inputs,
            "runner": self.runner,
            "passed": self.passed,
            "outputs": [vars(a) for a in self.outputs],
        }


def check_count(count: int) -> None:
    """The number of seeded inputs must be positive (a usage error otherwise)."""
    if count < 1:
        raise InputError(f"--verify-count must be at least 1, got {count}")


def measure(
    name: str,
    reference: Sequence[np.ndarray],
    ours: Sequence[np.ndarray],
    grid: tuple[float, int] | None = None,
) -> Agreement:
    """Compare per-input arrays (real values) of one output; ``grid`` = (scale, zero point)."""
    ref = np.stack([np.asarray(r, np.float64) for r in reference])
    got = np.stack([np.asarray(o, np.float64) for o in ours])
    if ref.shape != got.shape:
        raise ConversionError(
            f"shapes differ: source {ref.shape[1:]}, converted {got.shape[1:]}", name
        )
    agreement = Agreement(name, float(np.max(np.abs(ref - got), initial=0.0)))
    if grid is not None:
        steps = steps_apart(ref, got, grid)
        agreement.equal_fraction = float(np.mean(steps == 0)) if steps.size else 1.0
        agreement.max_steps = int(np.max(steps, initial=0))
    if ref.ndim == 3 and ref.shape[-1] > 1:  # [input, batch, classes]
        agreement.argmax_agreement = float(np.mean(ref.argmax(-1) == got.argmax(-1)))
    return agreement


def steps_apart(a: np.ndarray, b: np.ndarray, grid: tuple[float, int]) -> np.ndarray:
    """|a - b| in steps of the grid, both read as the nearest grid value."""
    scale = float(grid[0])
    return np.abs(
        np.round(np.asarray(a, np.float64) / scale) - np.round(np.asarray(b, np.float64) / scale)
    )


def within_relative(agreement: Agreement, reference: Sequence[np.ndarray], rtol: float) -> bool:
    """max |ours - source| <= rtol * max(1, max |source|), the converters' float tolerance."""
    peak = max((float(np.max(np.abs(r), initial=0.0)) for r in reference), default=0.0)
    return agreement.max_abs_error <= rtol * max(1.0, peak)


def run_converted(
    model: onnx.ModelProto, feeds: Sequence[Feeds], *, as_written: bool = False
) -> tuple[list[Feeds], str]:
    """Outputs of the converted model on each feed, and which runner produced them.

    ``as_written`` (--verify): a model of standard ops only runs as its users run it, in a
    default onnxruntime session (graph optimizations on), and one such a session refuses is a
    ConversionError. Otherwise (tests comparing kernels bit for bit) optimizations stay off:
    onnxruntime's fusions move float results by ulps."""
    session, runner = _onnxruntime_session(model, as_written)
    if session is not None:
        names = [o.name for o in model.graph.output]
        return [dict(zip(names, session.run(names, f), strict=True)) for f in feeds], runner
    from qonnx_ingest.execute import execute_qonnx

    return [execute_qonnx(model, f) for f in feeds], "qonnx's executor"


def _onnxruntime_session(model: onnx.ModelProto, as_written: bool = False):
    """An onnxruntime session on a form of ``model`` computing its bits, and that form's name;
    None when no such form exists here (then qonnx's executor, which reads every QONNX op,
    runs it).

    ``as_written``: a model of standard ops only (a ``--format qcdq`` file, a float model) is
    run as its users run it: in a default session, graph optimizations on. One a default
    session refuses is an error, not a fallback. A model with quantizers runs in a form
    computing what qonnx's executor computes (one session per node, nothing to fuse), so
    optimizations are off there: onnxruntime would otherwise fuse the QCDQ pattern into
    integer kernels with their own requantization rounding.
    """
    try:
        import onnxruntime as ort
    except ImportError:
        return None, False
    from qonnx_ingest.finish import QUANT_OP_TYPES
    from qonnx_ingest.qcdq import to_qcdq
    from qonnx_ingest.quant_lowering import NotLowerable, lower_quants

    options = ort.SessionOptions()
    if as_written and _standard_only(model):
        try:
            session = ort.InferenceSession(
                model.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # what users of the file would meet: say so
            text = " ".join(str(exc).split())
            raise ConversionError(
                f"a default onnxruntime session cannot load the converted model: {text[:300]}"
            ) from None
        return session, "onnxruntime"
    lowered, runner = model, "onnxruntime"
    if any(n.op_type in QUANT_OP_TYPES for n in model.graph.node):
        try:
            lowered, runner = to_qcdq(model, strict=True), "onnxruntime after QCDQ lowering"
        except ConversionError:
            try:
                lowered, runner = lower_quants(model), "onnxruntime, Quant as standard ops"
            except NotLowerable:
                return None, ""
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        session = ort.InferenceSession(
            lowered.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception:  # an op onnxruntime lacks: qonnx's executor is the fallback
        return None, ""
    return session, runner


def _standard_only(model: onnx.ModelProto) -> bool:
    """Whether every node, subgraphs included, is a standard ONNX op."""

    def standard(graph: onnx.GraphProto) -> bool:
        for node in graph.node:
            if node.domain not in ("", "ai.onnx"):
                return False
            for attr in node.attribute:
                subgraphs = (attr.g,) if attr.type == onnx.AttributeProto.GRAPH else attr.graphs
                if not all(standard(g) for g in subgraphs):
                    return False
        return True

    return standard(model.graph)


def load_inputs(path: str | Path, names: Sequence[str]) -> list[Feeds]:
    """Feeds from an .npz holding one array per source input (by name, or arr_0.. in order),
    each with a leading axis over the samples."""
    try:
        loaded = np.load(path)
        if not isinstance(loaded, np.lib.npyio.NpzFile):  # a lone .npy array
            raise ValueError("not an .npz archive (write one with numpy.savez)")
        with loaded as data:
            arrays = {k: data[k] for k in data.files}
    except Exception as exc:  # OSError, ValueError, zipfile.BadZipFile, EOFError ...
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise InputError(f"cannot read inputs: {text}", str(path)) from None
    if set(names) <= set(arrays):
        ordered = [arrays[n] for n in names]
    elif len(arrays) == len(names) and all(f"arr_{i}" in arrays for i in range(len(names))):
        ordered = [arrays[f"arr_{i}"] for i in range(len(names))]
    else:
        raise InputError(
            f"expected arrays named {', '.join(names)} (or arr_0..), found {', '.join(arrays)}",
            str(path),
        )
    counts = {a.shape[0] if a.ndim else 0 for a in ordered}
    if len(counts) != 1 or 0 in counts:
        raise InputError("every input array needs the same number of samples", str(path))
    return [dict(zip(names, (a[i] for a in ordered), strict=True)) for i in range(counts.pop())]


# ids and counts: an Embedding or Gather refuses a negative index
INTEGER_RANGE = (0, 8)


def seeded_values(
    rng: np.random.Generator,
    dtype: np.dtype | type,
    shape: Sequence[int],
    float_range: tuple[float, float] = (-1.0, 1.0),
    integer_range: tuple[int, int] = INTEGER_RANGE,
) -> np.ndarray:
    """One seeded input of ``dtype``: a float input uniform over ``float_range``, a bool mask
    holding both values (an element flipped if the draw gave one), an integer input uniform
    over ``integer_range`` (inclusive) within the type's range. Feeding float32 to a bool or
    integer input is an error in onnxruntime and a different model in Keras."""
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    if dtype.kind == "f":
        return rng.uniform(*float_range, shape).astype(dtype)
    if dtype.kind == "b":
        mask = rng.integers(0, 2, shape).astype(bool)
        if mask.size > 1 and (mask.all() or not mask.any()):
            mask.flat[rng.integers(mask.size)] ^= True
        return mask
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(integer_range[0], info.min), min(integer_range[1], info.max)
        return rng.integers(lo, hi, shape, endpoint=True).astype(dtype)
    raise InputError(f"--verify has no seeded {dtype} inputs: give them with --verify-inputs")


def input_dtype(model: onnx.ModelProto, name: str) -> np.dtype:
    """The numpy dtype of graph input ``name`` (float32 when the graph does not say)."""
    for vi in model.graph.input:
        if vi.name == name and vi.type.tensor_type.elem_type:
            return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type))
    return np.dtype(np.float32)


def input_range(model: onnx.ModelProto, name: str, default=(-1.0, 1.0)) -> tuple[float, float]:
    """The real range of graph input ``name`` as the model sees it: the representable range of
    the quantizer that reads it (one grid step beyond, so clipping is exercised), else
    ``default``."""
    from qonnx_ingest.quant_info import INPUT, quantized_tensors

    for q in quantized_tensors(model):
        if q.role == INPUT and q.tensor == name and not q.per_axis:
            lo, hi = q.storage_range
            scale, zero = float(q.scale[0]), float(q.zero_point[0])
            return scale * (lo - zero - 1), scale * (hi - zero + 1)
    return default


def output_grids(model: onnx.ModelProto) -> dict[str, tuple[float, int]]:
    """Graph outputs produced by a per-tensor quantizer -> its (scale, zero point)."""
    from qonnx_ingest.quant_info import quantized_tensors

    outputs = {o.name for o in model.graph.output}
    return {
        q.output: (float(q.scale[0]), int(q.zero_point[0]))
        for q in quantized_tensors(model)
        if q.output in outputs and not q.per_axis and not q.bipolar
    }


def run_converted_stream(
    model: onnx.ModelProto, feeds: Sequence[Feeds], carry: dict[str, str], initial: Feeds
) -> tuple[list[Feeds], str]:
    """Outputs of the converted model on ``feeds`` as one stream of calls: each call's
    ``carry`` outputs (output name -> input name) are the next call's inputs, ``initial``
    the first call's (a streaming model's state, tflite2qonnx --state-io)."""
    session, runner = _onnxruntime_session(model)
    names = [o.name for o in model.graph.output]
    if session is not None:

        def run(feed: Feeds) -> Feeds:
            return dict(zip(names, session.run(names, feed), strict=True))
    else:
        from qonnx_ingest.execute import execute_qonnx

        def run(feed: Feeds) -> Feeds:
            return execute_qonnx(model, feed)

        runner = "qonnx's executor"
    state, outputs = dict(initial), []
    for feed in feeds:
        out = run({**feed, **state})
        state = {carry[name]: out[name] for name in carry}
        outputs.append(out)
    return outputs, runner
