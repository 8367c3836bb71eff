"""hls4ml 1.3.0's QONNX recipe as the tests run it: Vivado backend, io_parallel, g++ compile."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest


def compile_vivado(prepared, output_dir: Path, default_precision: str, results: dict[str, str]):
    """The compiled hls4ml model of ``prepared`` (a cleaned-up qonnx ModelWrapper), each layer
    named in ``results`` given that result precision (the graph input's grid, or a type that
    stops one of hls4ml's fusions). Skips where hls4ml, an optional extra, is not installed."""
    hls4ml = pytest.importorskip(
        "hls4ml", reason="hls4ml is not installed: pip install -c constraints.txt -e '.[hls4ml]'"
    )

    config = hls4ml.utils.config.config_from_onnx_model(
        prepared, granularity="name", backend="Vivado", default_precision=default_precision
    )
    for layer, precision in results.items():
        config["LayerName"][layer]["Precision"]["result"] = precision
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hls_model = hls4ml.converters.convert_from_onnx_model(
            prepared,
            output_dir=str(output_dir),
            io_type="io_parallel",
            backend="Vivado",
            hls_config=config,
        )
        hls_model.compile()
    return hls_model
