"""The ``tflite2qonnx`` command."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from qonnx_ingest.cli import command
from qonnx_ingest.cli.versions import BASE, TFLITE


def build_parser() -> argparse.ArgumentParser:
    parser = command.make_parser(
        "tflite2qonnx",
        "Convert a TFLite model (.tflite) to QONNX. Never imports TensorFlow.",
        "the .tflite file, or a MediaPipe .task bundle (each model in it)",
        versions=(*BASE, *TFLITE),
        examples=(
            ("model.tflite", "write model.onnx beside model.tflite"),
            (
                "model.tflite -o out.onnx --batch-size 1 --verify",
                "a static batch of 1, compared with the TFLite interpreter on 16 random inputs",
            ),
            ("models/ -o out/ --jobs 2", "every .tflite in models/ into out/, two at a time"),
            (
                "face_landmarker.task -o out/",
                "each model in the bundle into out/face_landmarker/ (its member's name .onnx)",
            ),
        ),
    )
    parser.add_argument(
        "--member",
        metavar="NAME",
        help="with a .task bundle: convert only its model NAME (as the bundle names it, e.g. "
        "face_detector.tflite; a nested bundle's as hand_landmarker.task/hand_detector.tflite) "
        "into NAME.onnx beside the bundle (default: every model in it, into a directory named "
        "after the bundle)",
    )
    parser.add_argument(
        "--keep-io-layout",
        action="store_true",
        help="keep graph inputs/outputs in TFLite's NHWC layout (one Transpose per 4D tensor)",
    )
    parser.add_argument(
        "--channels-last",
        action="store_true",
        help="keep every tensor NHWC with static shapes and write Conv/MaxPool/BatchNorm as "
        "qonnx's channels-last ops (what qonnx's ConvertToChannelsLastAndClean makes; for "
        "hls4ml and FINN)",
    )
    parser.add_argument(
        "--bit-exact",
        action="store_true",
        help="emulate TFLite's builtin integer kernels bit for bit: more nodes and 64-bit "
        "intermediate Quants; the default graph rounds once per op, like XNNPACK",
    )
    parser.add_argument(
        "--state-io",
        action="store_true",
        help="make each variable tensor (LSTM / RNN / SVDF state kept between TFLite "
        "invocations), resource variable (Keras stateful=True layers) and TFLM Signal op state "
        "(noise estimate, frame buffers) a graph input and a graph output NAME_next, for "
        "streaming models; default: every run starts from the initial state",
    )
    parser.add_argument(
        "--layout",
        action="append",
        default=[],
        metavar="TENSOR=NHWC|NCHW",
        help="force a tensor's layout, overriding propagation (repeatable)",
    )
    parser.add_argument(
        "--batch-size",
        type=command.positive_int,
        metavar="N",
        help="fix a dynamic batch to N (FINN, hls4ml and qonnx's inference cost need static "
        "shapes; default: as the model says)",
    )
    parser.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=DIMS",
        help="give input NAME the static shape DIMS, e.g. input=1,3,224,224 (in the converted "
        "model's layout; only its dynamic dimensions may change; repeatable)",
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


def _input_shapes(pairs: list[str]) -> dict[str, tuple[int, ...]]:
    from qonnx_ingest.errors import InputError
    from qonnx_ingest.static_shapes import parse_dims

    shapes = {}
    for pair in pairs:
        name, sep, dims = pair.rpartition("=")
        if not sep or not name:
            raise InputError(f"--input-shape expects NAME=DIMS (e.g. x=1,3,224,224), got {pair!r}")
        shapes[name] = parse_dims(dims)
    return shapes


# where a user who gave a Keras or TensorFlow model should go instead
ELSEWHERE = (
    "for a QKeras or HGQ2 model use qkeras2qonnx; convert any other to .tflite first "
    "(tf.lite.TFLiteConverter)"
)


def _refuse_keras(path: str) -> None:
    """A Keras file (HDF5, .keras zip, JSON) names the tool that reads it, in one line."""
    from qonnx_ingest.errors import InputError
    from tflite2qonnx.flatbuffer import _keras_file_kind

    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError:
        return  # reading the model says what is wrong
    kind = _keras_file_kind(head)
    if kind is not None and not _is_bundle(path):
        raise InputError(f"this is {kind}, not TFLite: {ELSEWHERE}", path)


def _convert(args: argparse.Namespace):
    from tflite2qonnx.api import convert

    _refuse_keras(args.input)
    return convert(
        args.input,
        member=args.member,
        opset=args.opset,
        int_quant=args.int_quant,
        keep_io_layout=args.keep_io_layout,
        layouts=_layouts(args.layout),
        bit_exact=args.bit_exact,
        channels_last=args.channels_last,
        batch_size=args.batch_size,
        input_shapes=_input_shapes(args.input_shape),
        state_io=args.state_io,
    )


def _verify(args: argparse.Namespace, model):
    from tflite2qonnx.bundle import model_source
    from tflite2qonnx.reference import verify

    source = model_source(args.input, args.member)[0]  # a bundle member: its bytes
    return verify(source, model, inputs=args.verify_count, inputs_path=args.verify_inputs)


def _is_bundle(path: str) -> bool:
    from tflite2qonnx.bundle import is_bundle

    return is_bundle(path)


def _members(path: str) -> list[str]:
    from tflite2qonnx.bundle import members

    return members(path)


def _member_output(name: str) -> str:
    from tflite2qonnx.bundle import output_name

    return output_name(name)


def main(argv: Sequence[str] | None = None) -> int:
    savedmodel = f"this is a TensorFlow SavedModel directory, not TFLite: {ELSEWHERE}"
    scan = command.ModelScan(
        (".tflite", ".task"),
        foreign={"saved_model.pb": savedmodel},
        bundles=(".task",),
        members=_members,
        member_output=_member_output,
        member_option="--member",
    )
    return command.run(build_parser(), _convert, argv, verify=_verify, scan=scan)
