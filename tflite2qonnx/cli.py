"""The ``tflite2qonnx`` command."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from qonnx_ingest import cli


def build_parser() -> argparse.ArgumentParser:
    return cli.make_parser(
        "tflite2qonnx",
        "Convert a TFLite model (.tflite) to QONNX. Never imports TensorFlow.",
        "the .tflite file",
    )


def _convert(args: argparse.Namespace):
    from tflite2qonnx.api import convert

    return convert(args.input, opset=args.opset, int_quant=args.int_quant)


def main(argv: Sequence[str] | None = None) -> int:
    return cli.run(build_parser(), _convert, argv)
