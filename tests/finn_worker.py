"""Runs FINN's dataflow steps on a QONNX file and FINN's executor after each one (a subprocess:
FINN lives in ``.venv/finn``, apart from the main environment; see ``finn_support.py``).

FINN's builder module needs Vivado, so the steps are the transformations its step functions
apply (finn-plus 1.6.1 ``build_dataflow_steps``: qonnx_to_finn, tidy_up, streamline,
convert_to_hw, create_dataflow_partition, specialize_layers), with the builder's defaults.

Usage: ``python finn_worker.py MODEL.onnx INPUTS.npz RESULT.npz``; the result holds, per step
reached, each graph output (``STEP/OUTPUT``), and ``__stopped__`` (the step and FINN's message)
when a step raised.
"""

from __future__ import annotations

import sys
import tempfile
import types
from pathlib import Path

import numpy as np

FINN_DIR = Path(sys.prefix) / "finn"


def _without_torch() -> None:
    """FINN's custom-op registry imports torch for LayerNorm's execution only; torch with CUDA
    is 6 GB. A placeholder lets the registry import and fails loudly if LayerNorm ever runs."""

    class Missing(types.ModuleType):
        def __getattr__(self, name: str):
            if name.startswith("__"):
                raise AttributeError(name)
            raise ImportError("torch is not installed: FINN's LayerNorm execution needs it")

    modules = {n: Missing(n) for n in ("torch", "torch.nn", "torch.nn.functional")}
    for name, module in modules.items():
        module.__path__ = []
        sys.modules[name] = module
    modules["torch"].nn = modules["torch.nn"]
    modules["torch.nn"].functional = modules["torch.nn.functional"]


def _apply_if_present(model, op_types: list[str], transformation):
    if any(model.get_nodes_by_op_type(op) for op in op_types):
        model = model.transform(transformation)
    return model


def steps():
    """(name, function) for each step, in the builder's order."""
    from finn.transformation.fpgadataflow.convert_to_hw import (
        binary_matrix_vector_activation,
        conv_inp_gen,
        duplicate_streams,
        elementwise_binary_operation,
        fm_padding,
        global_acc_pool,
        hw_softmax,
        label_select,
        pool,
        quantized_matrix_vector_activation,
        thresholding,
        vector_vector_activation,
    )
    from finn.transformation.fpgadataflow.create_dataflow_partition import (
        CreateDataflowPartition,
    )
    from finn.transformation.fpgadataflow.specialize_layers import SpecializeLayers
    from finn.transformation.move_reshape import RemoveCNVtoFCFlatten
    from finn.transformation.qonnx.convert_qonnx_to_finn import ConvertQONNXtoFINN
    from finn.transformation.qonnx.give_unique_node_names_recursive import (
        GiveUniqueNodeNamesRecursive,
    )
    from finn.transformation.qonnx.quant_act_to_multithreshold import (
        default_filter_function_generator,
    )
    from finn.transformation.streamline import Streamline, absorb
    from finn.transformation.streamline.reorder import MakeMaxPoolNHWC
    from qonnx.transformation.bipolar_to_xnor import ConvertBipolarMatMulToXnorPopcount
    from qonnx.transformation.fold_constants import FoldConstants
    from qonnx.transformation.general import (
        GiveReadableTensorNames,
        RemoveStaticGraphInputs,
        RemoveUnusedTensors,
    )
    from qonnx.transformation.infer_data_layouts import InferDataLayouts
    from qonnx.transformation.infer_datatypes import InferDataTypes
    from qonnx.transformation.infer_shapes import InferShapes
    from qonnx.transformation.lower_convs_to_matmul import LowerConvsToMatMul
    from qonnx.util.cleanup import cleanup_model

    def qonnx_to_finn(model):
        model = cleanup_model(model)
        return model.transform(
            ConvertQONNXtoFINN(
                filter_function=default_filter_function_generator(max_multithreshold_bit_width=8)
            )
        )

    def tidy_up(model):
        for t in (InferShapes(), FoldConstants(), GiveUniqueNodeNamesRecursive()):
            model = model.transform(t)
        for t in (GiveReadableTensorNames(), InferDataTypes(), RemoveStaticGraphInputs()):
            model = model.transform(t)
        return model

    def streamline(model):
        model = model.transform(absorb.AbsorbScalarBiasIntoMultiThreshold())
        model = model.transform(Streamline())
        if model.get_nodes_by_op_type("Conv"):
            model = model.transform(LowerConvsToMatMul())
            model = model.transform(MakeMaxPoolNHWC())
            model = model.transform(absorb.AbsorbTransposeIntoMultiThreshold())
            model = model.transform(MakeMaxPoolNHWC())
            model = model.transform(absorb.AbsorbConsecutiveTransposes())
        model = model.transform(ConvertBipolarMatMulToXnorPopcount())
        model = model.transform(Streamline())
        model = model.transform(absorb.AbsorbScalarMulAddIntoTopK())
        model = model.transform(InferDataLayouts())
        return model.transform(RemoveUnusedTensors())

    def convert_to_hw(model):
        # the builder's defaults (standalone_thresholds=False); the layer kinds we write
        table = [
            (
                ["XnorPopcountMatMul"],
                binary_matrix_vector_activation.InferBinaryMatrixVectorActivation,
            ),
            (["MatMul"], quantized_matrix_vector_activation.InferQuantizedMatrixVectorActivation),
            (["MatMul"], vector_vector_activation.InferVectorVectorActivation),
            (["TopK"], label_select.InferLabelSelectLayer),
            (["MultiThreshold"], thresholding.InferThresholdingLayer),
            (["Pad"], fm_padding.InferFMPadding),
            (["MaxPool", "AveragePool", "MaxPoolNHWC", "QuantAvgPool2d"], pool.InferPool),
            (["Im2Col"], conv_inp_gen.InferConvInpGen),
            (["ConvolutionInputGenerator"], RemoveCNVtoFCFlatten),
            (
                ["Mul", "Sub", "Add"],
                elementwise_binary_operation.InferElementwiseBinaryOperation,
            ),
            (["GlobalAveragePool"], global_acc_pool.InferGlobalAccPoolLayer),
            (["Softmax"], hw_softmax.InferHWSoftmax),
        ]
        for op_types, transformation in table:
            model = _apply_if_present(model, op_types, transformation())
        model = model.transform(duplicate_streams.InferDuplicateStreamsLayer())
        model = model.transform(absorb.AbsorbConsecutiveTransposes())
        model = model.transform(RemoveCNVtoFCFlatten())
        for t in (GiveUniqueNodeNamesRecursive(), InferDataLayouts(), InferDataTypes()):
            model = model.transform(t)
        return model.transform(InferShapes())

    def create_dataflow_partition(model):
        from finn.analysis.fpgadataflow.unsupported_layers import unsupported_layers

        # the builder's check: unmapped nodes only before or after the mapped ones
        fits, first = model.analysis(unsupported_layers)
        if fits is False:
            raise RuntimeError(
                f"unmapped layer between FINN's layers: {first.op_type} {first.name}"
            )
        from qonnx.core.modelwrapper import ModelWrapper
        from qonnx.custom_op.registry import getCustomOp

        parent = model.transform(CreateDataflowPartition(partition_model_dir=tempfile.mkdtemp()))
        (partition,) = parent.get_nodes_by_op_type("StreamingDataflowPartition")
        # the builder goes on with the partition's model
        return ModelWrapper(getCustomOp(partition).get_nodeattr("model"))

    def specialize_layers(model):
        from finn.util.basic import pynq_part_map

        model = model.transform(SpecializeLayers(pynq_part_map["Pynq-Z1"]))
        return model.transform(GiveUniqueNodeNamesRecursive()).transform(InferShapes())

    return [
        ("qonnx_to_finn", qonnx_to_finn),
        ("tidy_up", tidy_up),
        ("streamline", streamline),
        ("convert_to_hw", convert_to_hw),
        ("create_dataflow_partition", create_dataflow_partition),
        ("specialize_layers", specialize_layers),
    ]


# steps after which FINN's executor runs the model (partitioned and specialized layers need
# FINN's simulators, which need Vivado)
EXECUTED = {"qonnx_to_finn", "tidy_up", "streamline", "convert_to_hw"}


def main(model_path: str, inputs_path: str, result_path: str) -> None:
    sys.path.insert(0, str(FINN_DIR))
    _without_torch()
    from finn.core.onnx_exec import execute_onnx
    from qonnx.core.modelwrapper import ModelWrapper

    inputs = dict(np.load(inputs_path))
    model = ModelWrapper(model_path)
    result: dict[str, np.ndarray] = {}
    for name, step in steps():
        try:
            model = step(model)
            if name in EXECUTED:
                feeds = {i.name: inputs[k] for k, i in zip(inputs, model.graph.input, strict=True)}
                outputs = execute_onnx(model, feeds)
                for k, o in enumerate(model.graph.output):
                    result[f"{name}/{k}"] = np.asarray(outputs[o.name])
            result[f"{name}/ops"] = np.array(sorted({n.op_type for n in model.graph.node}))
        except Exception as exc:  # noqa: BLE001 - FINN's message is the result
            import traceback

            traceback.print_exc()
            message = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            result["__stopped__"] = np.array([name, message])
            break
    np.savez(result_path, **result)


if __name__ == "__main__":
    main(*sys.argv[1:4])
