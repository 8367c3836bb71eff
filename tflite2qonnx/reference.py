"""--verify for TFLite: the interpreter (ai-edge-litert) against the converted model.

The reference is the interpreter's builtin kernels, the semantics the file defines (or the
first runtime that runs the model, cross-checked against the others: reference_paths,
reference_trust). Quantized
outputs are held to the TFLite issue's end-to-end rule: agreement with the builtin kernels at
least as good as the interpreter's own XNNPACK path achieves on the same inputs (on deep int8
networks the two TFLite paths differ by several steps), and argmax as often equal. Float
outputs must be within 1e-4 relative, or no further from the builtin kernels than XNNPACK is
(within 1.5x, by largest or RMS error: a detector's boxes, a deep float recurrence). Inputs
and outputs are compared in TFLite's NHWC layout and real values; the converted model's
permutations are read from its ``layout`` metadata.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np
import onnx

from layout import stored_perms
from qonnx_ingest.errors import InputError, ReferenceUnavailable
from qonnx_ingest.verification import (
    DEFAULT_INPUTS,
    Agreement,
    Feeds,
    Verification,
    check_count,
    load_inputs,
    measure,
    run_converted,
    run_converted_stream,
    seeded_values,
    steps_apart,
    within_relative,
)
from tflite2qonnx.reference_paths import (
    TFLM,
    XNNPACK,
    baseline_name,
    choose_reference,
    open_path,
    repair_note,
    spread_paths,
)
from tflite2qonnx.reference_trust import cross_checked
from tflite2qonnx.state import initial_state, read_pairs

FLOAT_RTOL = 1e-4
# Slack against XNNPACK, measured on the corpus: on deep int8 networks both paths sit at
# ~99.2-99.4% equal with 11-16 steps outliers and trade places from one input set to the next
# (see README, "How closely TFLite is reproduced"). A wrong conversion (zero point, layout,
# rounding) is far outside it: it drops the equal fraction to tens of percent.
EQUAL_FRACTION_MARGIN = 0.001
# The equal fraction is a sample: on a small output (a 5-class classifier: one value is 0.4 pt
# of 240) where a one-step difference deep inside moves many outputs, TFLite's two paths and
# ours each land 55-60% equal and trade places by several points from one input set to the
# next. Ours fails only when it is further behind XNNPACK than this many standard errors of
# the paired per-value difference (negligible on large outputs: ~0.1 pt on MobileNet's 16,000).
NOISE_STANDARD_ERRORS = 3.0
MAX_STEPS_FACTOR = 1.5
# the fewest calls a stream (--state-io) is verified over: the state must carry several frames
STREAM_CALLS = 8


def verify(
    source: str | os.PathLike | bytes,
    model: onnx.ModelProto,
    *,
    inputs: int = DEFAULT_INPUTS,
    seed: int = 0,
    inputs_path: str | os.PathLike | None = None,
) -> Verification:
    """Run the interpreter and ``model`` on the same seeded (or given) inputs and measure."""
    if inputs_path is None:
        check_count(inputs)
    reference, reference_name = choose_reference(source, model)
    # keyed by the converted model's names: a TFLite name may be empty or repeated
    in_details = _renamed(source, reference.get_input_details())
    out_details = _renamed(source, reference.get_output_details())
    states = read_pairs(model)  # --state-io: one stream of calls, the state carried over
    if states:
        inputs = max(inputs, STREAM_CALLS)
    samples = (
        _given_inputs(inputs_path, in_details)
        if inputs_path is not None
        else _random_inputs(in_details, inputs, seed, _index_bounds(source))
    )
    fresh = _keeps_resource_variables(source)

    def interpreter_for(it, kind: str):  # a fresh one per sample where variables persist
        return (lambda: open_path(source, kind, model)) if fresh else (lambda: it)

    def invoke_all(run) -> list[Feeds]:
        if states:  # one interpreter, reset once: the stream starts from the initial state
            it = run()
            it.reset_all_variables()
            return [_invoke(it, in_details, out_details, s, unusable, reset=False) for s in samples]
        return [_invoke(run(), in_details, out_details, s, unusable) for s in samples]

    ref_run = interpreter_for(reference, reference_name)
    # the user's samples failing is their input's fault; seeded ones failing, the reference's
    unusable = InputError if inputs_path is not None else ReferenceUnavailable

    def run_other(kind: str) -> list[Feeds] | None:
        try:
            other = open_path(source, kind, model)
        except ReferenceUnavailable:  # XNNPACK fails to build a runtime (OSNet)
            return None
        return invoke_all(interpreter_for(other, kind))

    details = {d["name"]: d for d in out_details}
    runs = cross_checked(
        reference_name,
        invoke_all(ref_run),
        spread_paths(reference_name),
        run_other,
        lambda name, x: _real(x, details[name]),
    )
    reference_name, ref_outs = runs.reference, runs.outputs

    if runs.spread is None and reference_name == XNNPACK:  # MediaPipe's custom ops
        runs.spread, runs.spread_outputs = XNNPACK, ref_outs  # XNNPACK is its own spread

    def xnn_outs() -> list[Feeds]:  # TFLite's spread, where an output needs it
        if runs.spread_outputs is None:
            raise ReferenceUnavailable(
                f"only TFLite's {reference_name} run this model: no second runtime to "
                "measure TFLite's own spread on its quantized outputs"
            )
        return runs.spread_outputs

    perms = stored_perms(model)
    feeds = [
        {d["name"]: _to_stored(_real(s[d["name"]], d), perms.get(d["name"])) for d in in_details}
        for s in samples
    ]
    if states:
        carry = {r["output"]: r["input"] for r in states}
        initial = {r["input"]: initial_state(r) for r in states}
        ours_stored, runner = run_converted_stream(model, feeds, carry, initial)
        runner += f"; one stream of {len(samples)} calls, state carried over"
    else:
        ours_stored, runner = run_converted(model, feeds, as_written=True)
    results = []
    for d in out_details:
        name, grid = d["name"], _grid(d)
        refs = [_real(o[name], d) for o in ref_outs]
        ours = [_from_stored(o[name], perms.get(name)) for o in ours_stored]
        agreement = measure(name, refs, ours, grid)
        agreement.reference = f"TFLite's {reference_name}"
        if grid is None:
            agreement.passed = within_relative(agreement, refs, FLOAT_RTOL)
            agreement.tolerance = f"float: max abs error <= {FLOAT_RTOL:g} * max(1, |reference|)"
            if not agreement.passed and reference_name != XNNPACK:
                # a float output computed from quantized tensors (a detector's boxes), or at
                # the end of a deep float recurrence (dp_net), moves as far between TFLite's
                # own two paths: held to that spread
                xnns = [_real(o[name], d) for o in xnn_outs()]
                _float_against_xnnpack(agreement, refs, ours, xnns)
        else:
            xnns = [_real(o[name], d) for o in xnn_outs()]
            xnn = measure(name, refs, xnns, grid)
            _against_xnnpack(agreement, xnn, _paired_noise(refs, ours, xnns, grid))
        if runs.spread and agreement.baseline_name:
            agreement.baseline_name = baseline_name(reference_name, runs.spread)
        results.append(agreement)
    note = repair_note(source) if reference_name != TFLM else ""
    return Verification(
        results,
        len(samples),
        f"{runner}; TFLite reference: {reference_name}{note}{runs.note}",
    )


def _renamed(source, details: list[dict]) -> list[dict]:
    """The interpreter's tensor details named as the converted graph names them."""
    from tflite2qonnx.graph_io import unique_tensor_names
    from tflite2qonnx.reader import read_model

    names = unique_tensor_names(read_model(source).subgraphs[0])
    return [{**d, "name": names[int(d["index"])]} for d in details]


BASELINE = "TFLite's own CPU paths (XNNPACK, builtin)"


def _paired_noise(
    reference: Sequence[np.ndarray],
    converted: Sequence[np.ndarray],
    xnnpack: Sequence[np.ndarray],
    grid: tuple[float, int],
) -> float:
    """``NOISE_STANDARD_ERRORS`` standard errors of mean(ours equal - XNNPACK equal) over the
    output's values: how far the two equal fractions move apart by chance alone."""
    ref = np.stack([np.asarray(a, np.float64) for a in reference])
    ours_equal, xnn_equal = (
        steps_apart(ref, np.stack([np.asarray(a, np.float64) for a in x]), grid) == 0
        for x in (converted, xnnpack)
    )
    paired = (ours_equal.astype(np.float64) - xnn_equal).ravel()
    if paired.size < 2:
        return 0.0
    return NOISE_STANDARD_ERRORS * float(np.std(paired, ddof=1)) / math.sqrt(paired.size)


def _against_xnnpack(ours: Agreement, xnn: Agreement, noise: float = 0.0) -> None:
    """``noise``: the sampling allowance (``_paired_noise``) when it exceeds the fixed margin."""
    ours.baseline_name = BASELINE
    ours.baseline = {"equal_fraction": xnn.equal_fraction, "max_steps": xnn.max_steps}
    if xnn.argmax_agreement is not None:
        ours.baseline["argmax_agreement"] = xnn.argmax_agreement
    ok = ours.equal_fraction >= xnn.equal_fraction - max(EQUAL_FRACTION_MARGIN, noise)
    ok &= ours.max_steps <= max(1, math.ceil(MAX_STEPS_FACTOR * xnn.max_steps))
    if ours.argmax_agreement is not None:
        ok &= ours.argmax_agreement >= xnn.argmax_agreement
    ours.passed = bool(ok)
    ours.tolerance = (
        f"quantized: equal fraction within {100 * EQUAL_FRACTION_MARGIN:g} pt (or "
        f"{NOISE_STANDARD_ERRORS:g} standard errors, {100 * noise:.2g} pt) and max steps within "
        f"{MAX_STEPS_FACTOR:g}x of TFLite's XNNPACK path, argmax as often equal"
    )


def _float_against_xnnpack(
    ours: Agreement,
    reference: Sequence[np.ndarray],
    converted: Sequence[np.ndarray],
    xnnpack: Sequence[np.ndarray],
) -> None:
    """A float output beyond 1e-4 relative passes when it is no further from the builtin
    kernels than TFLite's XNNPACK path is, within ``MAX_STEPS_FACTOR``: by its largest error
    or by its root-mean-square error (the largest is one sample's extreme, and the two paths
    trade places from one input to the next: on dp_net ours is 1.7x XNNPACK's largest on one
    seed, 1.5x on another, with the same RMS). A value infinite or NaN where the builtin
    kernels are finite must be so in XNNPACK too."""
    ref, got, xnn = (
        np.stack([np.asarray(a, np.float64) for a in x]) for x in (reference, converted, xnnpack)
    )
    finite = np.isfinite(ref) & np.isfinite(got) & np.isfinite(xnn)
    # ours non-finite where neither TFLite path is (or a different infinity): a real difference
    odd = ~np.isfinite(got) & ~(_same_value(got, ref) | _same_value(got, xnn))
    odd |= np.isfinite(got) & ~np.isfinite(ref) & ~np.isfinite(xnn)
    ours_max, xnn_max = (float(np.max(np.abs(a - ref)[finite], initial=0.0)) for a in (got, xnn))
    ours_rms, xnn_rms = (
        float(np.sqrt(np.mean(np.square(a - ref)[finite]))) if finite.any() else 0.0
        for a in (got, xnn)
    )
    ours.rms_error = ours_rms
    ours.baseline_name = BASELINE
    ours.baseline = {"max_abs_error": xnn_max, "rms_error": xnn_rms}
    if np.any(~np.isfinite(ref) | ~np.isfinite(xnn)):
        ours.non_finite = int(np.sum(~np.isfinite(got)))
        ours.baseline["non_finite"] = int(np.sum(~np.isfinite(xnn)))
    within = ours_max <= MAX_STEPS_FACTOR * xnn_max or ours_rms <= MAX_STEPS_FACTOR * xnn_rms
    ours.passed = bool(within and not odd.any())
    ours.tolerance = (
        f"float: within 1e-4 relative or {MAX_STEPS_FACTOR:g}x TFLite's XNNPACK-vs-builtin "
        "spread (max or rms error, on finite values)"
    )


def _same_value(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise equality that counts NaN as equal to NaN."""
    return (a == b) | (np.isnan(a) & np.isnan(b))


def _random_inputs(
    details: list[dict], count: int, seed: int, bounds: dict[str, int] | None = None
) -> list[Feeds]:
    """Uniform over [-1, 1] for float inputs, the whole integer range for quantized ones,
    [0, n) for an integer input that indexes a table of n rows (``bounds``, by input name), and
    both values for a bool mask."""
    rng = np.random.default_rng(seed)
    bounds = bounds or {}

    def draw(d: dict) -> np.ndarray:
        if np.issubdtype(d["dtype"], np.floating):
            return rng.uniform(-1, 1, d["shape"]).astype(d["dtype"])
        if d["name"] in bounds:
            return rng.integers(0, bounds[d["name"]], d["shape"]).astype(d["dtype"])
        if np.dtype(d["dtype"]).kind == "b":  # a mask: both values (np.iinfo has no bool)
            return seeded_values(rng, np.bool_, d["shape"])
        info = np.iinfo(d["dtype"])
        return rng.integers(info.min, info.max, d["shape"], endpoint=True).astype(d["dtype"])

    return [{d["name"]: draw(d) for d in details} for _ in range(count)]


# operator kind -> (slot of the indices, slot of the table): the ops whose kernel refuses an
# index outside the table (GATHER's axis is its option; EMBEDDING_LOOKUP indexes rows)
_INDEXING = {"GATHER": (1, 0), "EMBEDDING_LOOKUP": (0, 1)}
# ops that hand their first input's values on unchanged (an input's ids reach GATHER through them)
_SAME_VALUES = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS", "TRANSPOSE")


def _index_bounds(source) -> dict[str, int]:
    """For each graph input that ends up as indices, the smallest table it indexes: random ids
    outside it make the interpreter fail (recommendation models take item ids)."""
    from tflite2qonnx.graph_io import unique_tensor_names
    from tflite2qonnx.reader import read_model

    bounds: dict[str, int] = {}
    for sub in read_model(source).subgraphs[:1]:
        names = unique_tensor_names(sub)
        origin = {t: names[t] for t in sub.inputs}  # tensor -> graph input name
        for op in sub.operators:  # in execution order
            kind = op.opcode.builtin
            if kind in _SAME_VALUES and op.inputs and op.inputs[0] in origin:
                origin.update({out: origin[op.inputs[0]] for out in op.outputs})
            slots = _INDEXING.get(kind)
            if slots is None or max(slots) >= len(op.inputs) or op.inputs[slots[0]] not in origin:
                continue
            table = sub.tensors[op.inputs[slots[1]]].shape
            axis = op.options.get("axis", 0) if kind == "GATHER" else 0
            if table and -len(table) <= axis < len(table):
                name = origin[op.inputs[slots[0]]]
                bounds[name] = min(bounds.get(name, table[axis]), table[axis])
    return bounds


def _given_inputs(path, details: list[dict]) -> list[Feeds]:
    """The user's samples (real values in NHWC, or raw integers for integer inputs)."""
    samples = load_inputs(path, [d["name"] for d in details])
    out = []
    for s in samples:
        feed = {}
        for d in details:
            x = np.asarray(s[d["name"]])
            shape = tuple(int(n) for n in d["shape"])
            # samples first: each sample is one input (batch included, or without a batch of 1)
            if x.shape != shape and not (shape[:1] == (1,) and x.shape == shape[1:]):
                raise InputError(
                    f"{d['name']} has samples of shape {x.shape}, the TFLite model takes "
                    f"{shape} (NHWC, as the source model lays it out): transpose or reshape "
                    "the array, samples first",
                    str(path),
                )
            x = x.reshape(shape)
            grid = _grid(d)
            if grid is not None and np.issubdtype(x.dtype, np.floating):
                info = np.iinfo(d["dtype"])
                x = np.clip(np.round(x / grid[0]) + grid[1], info.min, info.max)
            feed[d["name"]] = x.astype(d["dtype"])
        out.append(feed)
    return out


def _keeps_resource_variables(source) -> bool:
    """Whether the model holds resource variables (CALL_ONCE initializes them on the first
    invocation only, reset_all_variables leaves them): each sample then runs on a fresh
    interpreter, since the converted graph is the first invocation."""
    from tflite2qonnx.reader import read_model

    kinds = {"CALL_ONCE", "VAR_HANDLE"}
    return any(op.opcode.builtin in kinds for sub in read_model(source).subgraphs
               for op in sub.operators)  # fmt: skip


def _invoke(
    it, in_details, out_details, sample: Feeds, unusable: type[InputError], reset: bool = True
) -> Feeds:
    """The outputs on ``sample`` from the variables' initial state (the recurrent states and
    SVDF's reset), as the converted graph computes them; ``reset`` False: from the state the
    previous call left (a stream, --state-io); ``unusable`` is raised when the interpreter
    refuses the sample."""
    if reset:
        it.reset_all_variables()
    for d in in_details:
        it.set_tensor(d["index"], sample[d["name"]])
    try:
        it.invoke()
    except RuntimeError as exc:  # a kernel refused the sample (an index out of range, ...)
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise unusable(
            f"the TFLite interpreter failed on the verification inputs ({message}); "
            "give valid samples with --verify-inputs"
        ) from exc
    return {d["name"]: it.get_tensor(d["index"]).copy() for d in out_details}


def _grid(detail: dict) -> tuple[float, int] | None:
    scale, zero_point = detail["quantization"]
    if not np.issubdtype(detail["dtype"], np.integer) or scale == 0:
        return None
    return float(scale), int(zero_point)


def _real(x: np.ndarray, detail: dict) -> np.ndarray:
    grid = _grid(detail)
    if grid is None:  # float, or an unquantized integer (ids, counts): the values as they are
        floating = np.issubdtype(detail["dtype"], np.floating)
        return np.asarray(x, np.float32) if floating else np.asarray(x)
    return (grid[0] * (np.asarray(x, np.float64) - grid[1])).astype(np.float32)


def _to_stored(x: np.ndarray, perm: Sequence[int] | None) -> np.ndarray:
    return x if perm is None else np.ascontiguousarray(x.transpose(perm))


def _from_stored(x: np.ndarray, perm: Sequence[int] | None) -> np.ndarray:
    return x if perm is None else x.transpose(np.argsort(perm))
