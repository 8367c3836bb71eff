"""Time qkeras2qonnx on every model of the QKeras corpus (../shared/corpus/qkeras).

Per model: load and conversion time (TensorFlow, tf2onnx and QKeras are imported, and one tiny
model converted, before timing starts), peak Python memory of the conversion (tracemalloc, in
a second, untimed run) and the process's peak RSS, and the number of Quant/BipolarQuant nodes
against the quantizers QKeras applies in the model (non-uniform weight quantizers become
constants, listed as lost). Target: under 1 s per model.

Prints figures; it is not a test. Run: ``.venv/bin/python scripts/bench/run.py qkeras``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import resource
import sys
import time
import tracemalloc
import warnings
from pathlib import Path

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CORPUS = ROOT.parent / "shared" / "corpus" / "qkeras"
# name: (model, weights)
MODELS = {
    "qkeras_3layer": ("qkeras_3layer.json", "qkeras_3layer_weights.h5"),
    "qkeras_mnist_cnn": ("qkeras_mnist_cnn.json", "qkeras_mnist_cnn_weights.h5"),
    "part4_jettagger": ("part4_jettagger_KERAS_check_best_model.h5", None),
    "traintagger": ("TrainTagger_baseline_saved_model.h5", None),
    "qmodel_oct24": ("qmodel_oct24_savedmodel", None),
    "quantized_cnn": ("quantized_cnn.h5", None),
    "rn06": ("RN06_resnet_v1_eembc_quantized_tiny_model_best.h5", None),
    "ad03": ("AD03_autoqkeras_qbestModel.h5", None),
}
_WEIGHT_ROLES = ("kernel", "depthwise", "bias", "gamma", "beta", "mean", "variance")


def count_quantizers(model) -> int:
    """Quantizers QKeras applies at inference, from the QKeras layers alone."""
    count = 0
    for layer in _layers(model):
        folded = type(layer).__name__.endswith("Batchnorm")
        for role in _WEIGHT_ROLES:
            q = getattr(layer, f"{role}_quantizer", None)
            if role == "bias" and not (folded or getattr(layer, "use_bias", False)):
                continue
            if role == "gamma" and not getattr(layer, "scale", True):
                continue
            if role == "beta" and not getattr(layer, "center", True):
                continue
            count += bool(q) if not folded else q is not None
        act = getattr(layer, "quantizer", None) or getattr(layer, "activation", None)
        if act is not None and not inspect.isfunction(act):
            count += type(act).__module__.split(".")[0] == "qkeras"
    return count


def _layers(model):
    for layer in model.layers:
        yield from _layers(layer) if hasattr(layer, "layers") else [layer]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per model (best kept)")
    args = parser.parse_args()
    if not CORPUS.is_dir():
        print(f"no corpus at {CORPUS}", file=sys.stderr)
        return 2
    warnings.simplefilter("ignore")
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    import qkeras2qonnx
    from qkeras2qonnx.environment.backend import keras
    from qkeras2qonnx.environment.load import load_model
    from qonnx_ingest.finish import QUANT_OP_TYPES

    k = keras()
    warm = k.Sequential([k.Input((2,)), k.layers.Dense(1)])
    qkeras2qonnx.convert(warm)  # imports tf2onnx, builds TF's function machinery
    header = f"{'model':18} {'load s':>7} {'convert s':>9} {'py MiB':>8} {'nodes':>5} "
    print(header + f"{'quantizers':>10} {'lost':>4}")
    worst = 0.0
    for name, (source, weights) in MODELS.items():
        src, w = CORPUS / source, (CORPUS / weights if weights else None)
        start = time.perf_counter()
        model = load_model(src, weights=w)
        load_s = time.perf_counter() - start
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            onnx_model = qkeras2qonnx.convert(model)
            best = min(best, time.perf_counter() - start)
        tracemalloc.start()
        qkeras2qonnx.convert(model)
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        nodes = sum(n.op_type in QUANT_OP_TYPES for n in onnx_model.graph.node)
        props = {p.key: p.value for p in onnx_model.metadata_props}
        lost = len(json.loads(props.get("qkeras2qonnx.lost_quantizers", "{}")))
        worst = max(worst, best)
        print(
            f"{name:18} {load_s:7.2f} {best:9.2f} {peak:8.1f} {nodes:5d} "
            f"{count_quantizers(model):10d} {lost:4d}"
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"slowest conversion {worst:.2f} s (target < 1 s); process peak RSS {rss:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
