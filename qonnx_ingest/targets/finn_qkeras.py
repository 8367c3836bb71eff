"""The FINN form's rewrites for what QKeras models hold and FINN's frontend reads otherwise:
BipolarQuants (``binary``: ``finn_bipolar``), power-of-two weights without a Quant
(``quantized_po2``: ``finn_weight_grid``), 1D convolutions (``finn_conv1d``), hard
activations' Clip / Round in front of thresholds (``finn_threshold_chains``), float inputs
typed (``finn_inputs``), thresholds behind exact grid layers half a grid step from its values
(``finn_grid_thresholds``). They run behind the activation Quants' thresholds."""

from __future__ import annotations

import onnx

from qonnx_ingest.passes import PassResult, run_passes
from qonnx_ingest.targets.finn_bipolar import (
    bipolar_activations_as_thresholds,
    bipolar_constants_folded,
)
from qonnx_ingest.targets.finn_conv1d import conv1d_as_conv2d
from qonnx_ingest.targets.finn_grid_thresholds import thresholds_between_grid_values
from qonnx_ingest.targets.finn_inputs import float_inputs_typed
from qonnx_ingest.targets.finn_pooling import reshapes_merged
from qonnx_ingest.targets.finn_shapes import with_shapes
from qonnx_ingest.targets.finn_threshold_chains import chains_into_thresholds
from qonnx_ingest.targets.finn_weight_grid import grid_weights_as_quants


def qkeras_forms(model: onnx.ModelProto) -> PassResult:
    """The passes of this module's docstring, in order; shapes on record again after them
    (the passes behind read ranks)."""
    model, modified = run_passes(
        [
            float_inputs_typed,
            bipolar_constants_folded,
            bipolar_activations_as_thresholds,
            grid_weights_as_quants,
        ],
        model,
    )
    model = with_shapes(model)  # the 1D-to-2D rewrite reads ranks, the new nodes' too
    model, lifted = run_passes(
        [
            conv1d_as_conv2d,
            reshapes_merged,  # the Squeeze of a global pool (now a Reshape) and a Flatten
            chains_into_thresholds,
            thresholds_between_grid_values,
        ],
        model,
    )
    return (with_shapes(model) if modified or lifted else model), modified or lifted
