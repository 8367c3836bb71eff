"""--bit-exact on the quantized corpus: agreement with the builtin kernels, node growth, cost.

Per quantized model of ``../shared/corpus/tflite/`` (int16 models excepted unless named):

- ops rounded once: the integer ops --bit-exact leaves to one rounding (the warning's list);
- equal %:    outputs equal to the interpreter's builtin reference kernels (BUILTIN_REF, no
              XNNPACK), per output, over 16 seeded inputs (integer inputs over their whole
              range, float inputs uniform in [-1, 1]); max steps apart;
- nodes:      node count of the default graph and of the --bit-exact graph (growth factor);
- ort s/input: onnxruntime seconds per input on the --bit-exact graph (graph optimizations off,
              as --verify runs it), mean over the 16 inputs: wall time, and CPU time of a
              one-thread session (steadier on a loaded machine). Target: Coral MobileNet v2
              under 1 s.

person_detect's rank-1 biases carry quantized_dimension 3, which the interpreter refuses; it
runs with 0 there (the only axis a rank-1 tensor has, as the converter reads it).

Prints figures; it is not a test.
Run: ``.venv/bin/python scripts/bench/run.py bit-exact [MODEL ...]``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CORPUS = ROOT.parent / "shared" / "corpus" / "tflite"
N_INPUTS = 16
TARGET_ORT_SECONDS = 1.0  # per input, Coral MobileNet v2's bit-exact graph


def quantized_models() -> list[Path]:
    """Corpus models with integer activations (float16 / dynamic-range / float ones are out)."""
    from tflite2qonnx.reader import read_model

    out = []
    for path in sorted(CORPUS.glob("*.tflite")):
        sub = read_model(path.read_bytes()).subgraphs[0]
        kinds = {sub.tensors[o].dtype for op in sub.operators for o in op.outputs}
        if kinds & {"int8", "uint8"} and "int16" not in {sub.tensors[i].dtype for i in sub.inputs}:
            out.append(path)
    return out


def _inputs(it, rng) -> list[dict]:
    feeds = []
    for _ in range(N_INPUTS):
        feed = {}
        for d in it.get_input_details():
            if d["dtype"] == np.float32:
                feed[d["index"]] = rng.uniform(-1.0, 1.0, d["shape"]).astype(np.float32)
            else:
                info = np.iinfo(d["dtype"])
                feed[d["index"]] = rng.integers(info.min, info.max + 1, d["shape"]).astype(
                    d["dtype"]
                )
        feeds.append(feed)
    return feeds


def loadable(data: bytes) -> bytes:
    """``data`` with every rank-1 tensor's quantized_dimension set to 0."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromObj(schema.Model.GetRootAsModel(data, 0))
    changed = False
    for sub in model.subgraphs:
        for t in sub.tensors:
            q = t.quantization
            if q is not None and t.shape is not None and len(t.shape) == 1 and q.quantizedDimension:
                q.quantizedDimension, changed = 0, True
    if not changed:
        return data
    builder = flatbuffers.Builder(len(data) + 1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def measure(path: Path) -> str:
    import onnxruntime  # noqa: F401  (fail early: the timing needs it)
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    from qonnx_ingest.errors import ConversionWarning
    from qonnx_ingest.verification import _onnxruntime_session
    from tflite2qonnx.api import convert

    data = path.read_bytes()
    default_nodes = len(convert(data, keep_io_layout=True).graph.node)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConversionWarning)
        model = convert(data, keep_io_layout=True, bit_exact=True)
    warned = [str(w.message) for w in caught if issubclass(w.category, ConversionWarning)]
    rounded = [m.split(": ", 1)[-1] for m in warned if "rounding once" in m]
    it = Interpreter(
        model_content=loadable(data), experimental_op_resolver_type=OpResolverType.BUILTIN_REF
    )
    it.allocate_tensors()
    session, runner = _onnxruntime_session(model)
    if session is None:
        return f"{path.name}: no onnxruntime form"
    one_thread = _one_thread_session(session)
    cpu = 0.0
    names = [o.name for o in model.graph.output]
    details = {d["index"]: d for d in it.get_input_details()}
    equal: dict[str, list[np.ndarray]] = {}
    seconds = 0.0
    for feed in _inputs(it, np.random.default_rng(20261125)):
        ours_feed = {}
        for index, x in feed.items():
            it.set_tensor(index, x)
            d = details[index]
            scale, zp = d["quantization"]
            real = x if d["dtype"] == np.float32 else (scale * (x.astype(np.float32) - zp))
            ours_feed[d["name"]] = real.astype(np.float32)
        it.reset_all_variables()
        it.invoke()
        start = time.perf_counter()
        ours = dict(zip(names, session.run(names, ours_feed), strict=True))
        seconds += time.perf_counter() - start
        start = time.process_time()
        one_thread.run(names, ours_feed)
        cpu += time.process_time() - start
        for d in it.get_output_details():
            ref = it.get_tensor(d["index"])
            got = np.asarray(ours[d["name"]], np.float64)
            if np.issubdtype(ref.dtype, np.integer) and d["quantization"][0]:
                scale, zp = d["quantization"]
                steps = np.abs(np.round(got / scale) + zp - ref.astype(np.float64))
            else:
                steps = np.where(np.isclose(got, ref, rtol=1e-5, atol=1e-6), 0.0, 1.0)
            equal.setdefault(d["name"], []).append(steps.ravel())
    parts = []
    for name, steps in equal.items():
        s = np.concatenate(steps)
        parts.append(f"{name[:28]}: {np.mean(s == 0):.2%} (max {int(s.max(initial=0))})")
    growth = len(model.graph.node) / default_nodes
    return (
        f"{path.name}\n  equal: {'; '.join(parts)}\n"
        f"  nodes {default_nodes} -> {len(model.graph.node)} (x{growth:.2f}); "
        f"ort {seconds / N_INPUTS:.3f} s/input wall, {cpu / N_INPUTS:.3f} s CPU on one thread "
        f"({runner}); "
        f"rounded once: {rounded[0] if rounded else 'none'}"
    )


def _one_thread_session(session):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return ort.InferenceSession(session._model_bytes, options, providers=["CPUExecutionProvider"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path)
    args = parser.parse_args(argv)
    for path in args.models or quantized_models():
        try:
            print(measure(path), flush=True)
        except Exception as exc:  # a figure per model, whatever fails
            print(f"{path.name}: {type(exc).__name__}: {str(exc).splitlines()[0]}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
