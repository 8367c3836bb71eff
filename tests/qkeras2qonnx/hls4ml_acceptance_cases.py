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
            "its MaxPooling1D(padding='same') pads one side only; qkeras2qonnx.convert("
            "channels_last=True) keeps that MaxPool plain ONNX between Transposes, but hls4ml's "
            "preparation (qonnx's ConvertToChannelsLastAndClean) makes it qonnx's channels-last "
            "1-D MaxPool, which asserts even padding (qonnx/custom_op/channels_last/"
            "max_pool.py:75)",
        ),
    ),
}
# uwacme_btag_2int_qlstm_6frac (QLSTM unrolled over 15 steps) is not a case: qonnx's
# channels-last preparation of its 600-node graph alone takes over 10 minutes on 2 cores. Its
# form is the built 'qlstm' case's (hls4ml_acceptance_models), refused at Gather.

# hls4ml's own test models (test_hls4ml_qkeras_models.MODELS) compiled and compared: all 20
# that hls4ml 1.3.0 accepts, each built on its own (a g++ build costs 20-40 s on 2 busy cores);
# name: (input grid (bits, integer, signed), io). An activation alone gets a grid a quarter
# (or half) of its quantizer's step fine and one or two integer bits wider than its range, so
# that rounding ties, saturation and (for ReLUs) negative inputs all occur.
HLS4ML_COMPILED = {
    "single_dense_activation_exact-alpha1": ((6, 0, False), "io_parallel"),
    "quantizer-bits8_0": ((11, 2, True), "io_parallel"),
    "quantizer-bits8_4": ((11, 6, True), "io_parallel"),
    "quantizer-bits4_2": ((7, 4, True), "io_parallel"),
    "quantizer-bits4_0": ((7, 2, True), "io_parallel"),
    "quantizer-bits10_0": ((13, 2, True), "io_parallel"),
    "quantizer-relu4": ((8, 2, True), "io_parallel"),
    "quantizer-relu4_2": ((8, 4, True), "io_parallel"),
    "quantizer-relu8": ((12, 2, True), "io_parallel"),
    "quantizer-relu8_4": ((7, 2, True), "io_parallel"),
    "quantizer-relu10": ((14, 2, True), "io_parallel"),
    "quantizer-relu10_5": ((14, 7, True), "io_parallel"),
    # 4-bit inputs: with 6 the 2-bit ReLU met no tie on these 32 inputs
    "qactivation_kwarg-relu2": ((4, 0, False), "io_parallel"),
    "qactivation_kwarg-relu4": ((6, 0, False), "io_parallel"),
    "qactivation_kwarg-relu8": ((6, 0, False), "io_parallel"),
    # a float kernel of ones: sums of 10 inputs in [-1/8, 1/8) straddle the ReLU and its grid
    "quantizer_parsing": ((8, -2, True), "io_parallel"),
    "qconv2dbn": ((5, -2, True), "io_parallel"),
    # 32x32x3 and 13x21x20 images: io_stream's build is the shorter
    "qdepthwiseconv2d": ((8, 0, False), "io_stream"),
    # 8-bit inputs keep every sum of the 2**9..2**18 kernel under 24 significant bits, so
    # qonnx's float32 MatMul is exact too
    "quantised_po2_bit_width": ((8, 0, False), "io_parallel"),
    "qseparableconv2d": ((7, 0, False), "io_stream"),
    "qseparableconv1d": ((8, 2, True), "io_parallel"),  # the rank-3 1-D form
}
# hls4ml's test model that is a corpus model: test_accuracy loads qkeras_3layer.json and its
# weights, the corpus case "qkeras_3layer" (compiled with both io types)
HLS4ML_AS_CORPUS = {"accuracy-jet_tagger": "qkeras_3layer"}
# Weights no Quant node describes take hls4ml's default precision, chosen to hold them exactly:
# quantizer_parsing's float kernel of ones (and the zero bias hls4ml gives a bias-less Dense),
# quantised_po2_bit_width's quantized_po2(18) kernel (powers of two 2**9..2**18; a po2 grid
# is not a uniform one, so it is a folded constant with no Quant), and the zero bias hls4ml
# gives the bias-less depthwise step of qseparableconv2d and qseparableconv1d
HLS4ML_DEFAULT_PRECISION = {
    "quantizer_parsing": "fixed<32,16>",
    "quantised_po2_bit_width": "fixed<32,24>",
    "qseparableconv2d": "fixed<32,16>",
    "qseparableconv1d": "fixed<32,16>",
}
_TERNARY = "the 'ternary' activation's exact form is a threshold (Abs, GreaterOrEqual, Sign)"
_BIPOLAR_CONSTANT = Refusal(
    "list index out of range",
    NO_INPUT,
    "a BipolarQuant on a constant (binary() kernel) is left as a Constant that "
    "InferPrecisionTypes (hls4ml/model/optimizer/passes/infer_precision.py:26) asks for an "
    f"input: IndexError in Layer.get_input_variable ({NO_INPUT})",
)
# ... and the forms of that list hls4ml refuses (the 19 others)
HLS4ML_REFUSED = {
    "single_dense_activation_exact-auto_po2": _half_up("the alpha='auto_po2' kernel"),
    "btnn-1": _unsupported("Clip", "binary_tanh's exact form is a composite (Clip, Round)"),
    "btnn-2": _unsupported("Clip", "binary_tanh's exact form is a composite (Clip, Round)"),
    "btnn-3": _half_up("the ternary(alpha='auto') kernel"),
    "btnn-4": _unsupported("Abs", _TERNARY),
    "btnn-5": _unsupported("Abs", f"{_TERNARY}; ternary(threshold=0.2) is one too"),
    "btnn-6": _unsupported("Abs", f"{_TERNARY}; ternary(threshold=0.8) is one too"),
    "btnn-7": _BIPOLAR_CONSTANT,
    "qactivation_kwarg-binary": _BIPOLAR_CONSTANT,
    "qactivation_kwarg-ternary": _unsupported("Abs", _TERNARY),
    "qsimplernn": _unsupported("Gather", "the unrolled recurrence reads each step with Gather"),
    "qlstm": _unsupported("Gather", "the unrolled recurrence reads each step with Gather"),
    "qgru": _unsupported("Gather", "the unrolled recurrence reads each step with Gather"),
    "quantizer_special-tanh8": _unsupported("Clip", "quantized_tanh's exact form is composite"),
    "quantizer_special-sigmoid5": _unsupported(
        "Clip", "quantized_sigmoid's exact form is composite"
    ),
    "quantizer_special-real_sigmoid7": _unsupported(
        "Round", "quantized_sigmoid(use_real_sigmoid=True) rounds a Sigmoid with Round and Clip"
    ),
    **{
        f"relu_negative_slope-{params}": _unsupported(
            "Round", "a negative-slope quantized_relu's exact form is composite"
        )
        for params in ("4_0_0.5", "8_4_1.0", "10_2_0.25")
    },
}
