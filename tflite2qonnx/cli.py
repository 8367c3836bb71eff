"""The ``tflite2qonnx`` command."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from qonnx_ingest import cli


def build_parser() -> argparse.ArgumentParser:
    parser = cli.make_parser(
        "tflite2qonnx",
        "Convert a TFLite model (.tflite) to QONNX. Never imports TensorFlow.",
        "the .tflite file",
    )
    parser.add_argument(
        "--keep-io-layout",
        action="store_true",
        help="keep graph inputs/outputs in TFLite's NHWC layout (one Transpose per 4D tensor)",
    )
    parser.add_argument(
        "--bit-exact",
        action="store_true",
        help="emulate TFLite's builtin integer kernels bit for bit: more nodes and 64-bit "
        "intermediate Quants; the default graph rounds once per op, like XNNPACK",
    )
    parser.add_argument(
        "--layout",
        action="append",
        default=[],
        metavar="TENSOR=NHWC|NCHW",
        help="force a tensor's layout, overriding propagation (repeatable)",
    )
    return parser


def _layouts(pairs: list[str]) -> dict[str, str]:
    from qonnx_ingest.errors import InputError

    layouts = {}
    for pair in pairs:
        name, sep, value = pair.rpartition("=")
        if not sep or not name:
            raise InputError(f"--layout expects TENSOR=NHWC or TENSOR=NCHW, got {pair!r}")
        layouts[name] = value
    return layouts


def _convert(args: argparse.Namespace):
    from tflite2qonnx.api import convert

    return convert(
        args.input,
        opset=args.opset,
        int_quant=args.int_quant,
        keep_io_layout=args.keep_io_layout,
        layouts=_layouts(args.layout),
        bit_exact=args.bit_exact,
    )


def _verify(args: argparse.Namespace, model):
    from tflite2qonnx.reference import verify

    return verify(args.input, model, inputs=args.verify_count, inputs_path=args.verify_inputs)


def main(argv: Sequence[str] | None = None) -> int:
    return cli.run(build_parser(), _convert, argv, verify=_verify)
