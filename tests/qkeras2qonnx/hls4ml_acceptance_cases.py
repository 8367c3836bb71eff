"""Which corpus models and which of hls4ml's own QKeras test models the hls4ml acceptance test
runs (issue 16), and, for those hls4ml 1.3.0 or qonnx cannot take, the exact refusal: the
message and the file:line that raises it (hls4ml and qonnx are pinned in constraints.txt, so a
moved line is a new version to look at).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    """``message`` raised at ``where`` ("path/inside/site-packages.py:line"), and why."""

    message: str
    where: str
    reason: str

    def check(self, exc: BaseException) -> None:
        """Assert ``exc`` (or the exception it wraps) is this refusal."""
        chain = [exc, *([exc.__cause__] if exc.__cause__ is not None else [])]
        text = " | ".join(f"{type(e).__name__}: {e}" for e in chain)
        assert any(self.message in str(e) for e in chain), f"refused otherwise: {text}"
        frames = {
            f"{frame.filename.split('site-packages/')[-1]}:{frame.lineno}"
            for e in chain
            for frame in traceback.extract_tb(e.__traceback__)
        }
        assert self.where in frames, f"{text} not raised at {self.where}: {sorted(frames)}"


HALF_UP = "hls4ml/model/optimizer/passes/quant_opt.py:364"
PARSER = "hls4ml/converters/onnx_to_hls.py:239"
NO_INPUT = "hls4ml/model/layers.py:223"


def _half_up(what: str) -> Refusal:
    return Refusal(
        "Rounding mode HALF_UP not supported",
        HALF_UP,
        f"{what} rounds half away from zero, as QKeras computes alpha='auto'/'auto_po2' "
        "scales (a HALF_UP Quant); hls4ml 1.3.0's _calculate_precision_quantizer "
        f"({HALF_UP}) takes only ROUND and FLOOR",
    )


def _unsupported(op: str, why: str) -> Refusal:
    return Refusal(
        f"Unsupported operation type: {op}",
        PARSER,
        f"hls4ml 1.3.0's ONNX frontend has no handler for {op} ({PARSER}, parse_onnx_model): {why}",
    )


_SQUEEZE = (
    "the rank-3 1-D form (Conv1D layers as 1-D Conv with the bias inside, which qonnx's "
    "channels-last pass converts) ends its global pooling with a Squeeze ([1, C, 1] -> "
    "[1, C]). Written as Flatten, hls4ml 1.3.0 would take it but compute wrong numbers: "
    "qonnx leaves a to-channels-first Transpose ahead of GlobalAveragePool/GlobalMaxPool, and "
    "hls4ml's GlobalPooling1D (hls4ml/converters/onnx/pooling.py:74-99) reads that "
    "channels-first tensor as channels-last, pooling the wrong axis"
)

# corpus models hls4ml 1.3.0 / qonnx refuse (the others are compiled and compared)
CORPUS_REFUSED = {
    "ad03": ("AD03_autoqkeras_qbestModel.h5", _half_up("AD03's ternary/binary alpha='auto_po2'")),
    "qmodel_oct24": (
        "qmodel_oct24_savedmodel",
        _half_up("qmodel_oct24's quantized_bits(16,4,alpha='auto') kernel"),
    ),
    "traintagger": ("TrainTagger_baseline_saved_model.h5", _unsupported("Squeeze", _SQUEEZE)),
    "neutdet": (
        "neutdet_quant_w1_a2_Vplane_nu.h5",
        _unsupported(
            "Squeeze", f"{_SQUEEZE}; its quantized_sigmoid(2) output would next need Clip/Round"
        ),
    ),
    "mitbih_pruned": (
        "mitbih_Conv1D_int8_pqmodel.h5",
        Refusal(
            "Uneven padding not supported",
            "qonnx/custom_op/channels_last/max_pool.py:75",
            "its MaxPooling1D(padding='same') pads one side only; qonnx's channels-last 1-D "
            "MaxPool (qonnx/custom_op/channels_last/max_pool.py:75) asserts even padding, so "
            "qkeras2qonnx.convert(channels_last=True) stops with a ConversionError naming it",
        ),
    ),
}
# uwacme_btag_2int_qlstm_6frac (QLSTM unrolled over 15 steps) is not a case: qonnx's
# channels-last preparation of its 600-node graph alone takes over 10 minutes on 2 cores. Its
# form is the built 'qlstm' case's (hls4ml_acceptance_models), refused at Gather.

# hls4ml's own test models (test_hls4ml_qkeras_models.MODELS) compiled and compared: a dense
# layer, an activation alone, a folded conv (each g++ build costs 20-40 s on 2 busy cores; the
# corpus cases cover the rest of these forms); name: (input grid (bits, integer, signed), io)
HLS4ML_COMPILED = {
    "single_dense_activation_exact-alpha1": ((6, 0, False), "io_parallel"),
    "quantizer-relu8_4": ((7, 2, True), "io_parallel"),
    "qconv2dbn": ((5, -2, True), "io_parallel"),
    "qseparableconv1d": ((8, 2, True), "io_parallel"),  # the rank-3 1-D form
}
# ... and the forms of that list hls4ml refuses
HLS4ML_REFUSED = {
    "single_dense_activation_exact-auto_po2": _half_up("the alpha='auto_po2' kernel"),
    "btnn-1": _unsupported("Clip", "binary_tanh's exact form is a composite (Clip, Round)"),
    "btnn-7": Refusal(
        "list index out of range",
        NO_INPUT,
        "a BipolarQuant on a constant (binary() kernel) is left as a Constant that "
        "InferPrecisionTypes (hls4ml/model/optimizer/passes/infer_precision.py:26) asks for an "
        f"input: IndexError in Layer.get_input_variable ({NO_INPUT})",
    ),
    "qsimplernn": _unsupported("Gather", "the unrolled recurrence reads each step with Gather"),
    "quantizer_special-tanh8": _unsupported("Clip", "quantized_tanh's exact form is composite"),
    "relu_negative_slope-4_0_0.5": _unsupported(
        "Round", "a negative-slope quantized_relu's exact form is composite"
    ),
}
