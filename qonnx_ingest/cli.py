"""Command-line plumbing shared by ``qkeras2qonnx`` and ``tflite2qonnx``.

Each tool builds its parser here, adds its own options, and hands ``run`` a function that
does the conversion. This module imports only the standard library at import time, so
``--help`` stays fast and never pulls in TensorFlow.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from qonnx_ingest import DEFAULT_OPSET, __version__
from qonnx_ingest.errors import ConversionError, ConversionWarning, InputError

if TYPE_CHECKING:
    import onnx

    from qonnx_ingest.verification import Verification

EXIT_OK, EXIT_CONVERSION, EXIT_USAGE, EXIT_VERIFY = 0, 1, 2, 3


def make_parser(prog: str, description: str, input_help: str) -> argparse.ArgumentParser:
    """The options every converter has: input, -o, --opset, --verbose, --version."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("input", metavar="MODEL", help=input_help)
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="output file, or a directory (existing, or named with a trailing /) to write "
        "MODEL.onnx into (default: MODEL with .onnx beside it)",
    )
    parser.add_argument(
        "--opset",
        type=int,
        default=DEFAULT_OPSET,
        help=f"ONNX opset of the default domain (default: {DEFAULT_OPSET})",
    )
    parser.add_argument(
        "--int-quant",
        action="store_true",
        help="emit qonnx's IntQuant op type instead of Quant (qonnx 1.0 reads both)",
    )
    parser.add_argument(
        "--format",
        choices=("qonnx", "qcdq"),
        default="qonnx",
        help="qcdq: lower the quantizers to QuantizeLinear/Clip/DequantizeLinear for "
        "onnxruntime and other QDQ consumers (default: qonnx)",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="run the source model and the converted one on seeded random inputs and compare "
        "them (exit code 3 when they disagree beyond the converter's tolerance)",
    )
    parser.add_argument(
        "--verify-inputs",
        metavar="INPUTS.npz",
        help="verify on your own inputs (implies --verify): one array per model input, samples "
        "first",
    )
    parser.add_argument(
        "--verify-count",
        type=int,
        default=16,
        metavar="N",
        help="with --verify: number of seeded random inputs (default: 16)",
    )
    parser.add_argument(
        "--report", action="store_true", help="print every quantized tensor and the model's cost"
    )
    parser.add_argument(
        "--report-json", metavar="REPORT.json", help="write that report as JSON ('-': stdout)"
    )
    parser.add_argument(
        "--encodings", metavar="ENCODINGS.json", help="write AIMET 2.0.0 quantization encodings"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse what --encodings or --format qcdq can only approximate, instead of warning",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def default_output(input_path: str) -> Path:
    """``model.h5`` -> ``model.onnx``; a SavedModel directory ``m/`` -> ``m.onnx`` beside it."""
    path = Path(input_path.rstrip("/\\") or input_path)
    return path.with_suffix(".onnx") if path.suffix else path.with_name(path.name + ".onnx")


def output_path(output: str | None, input_path: str) -> tuple[Path, Path | None]:
    """Where the model goes, and the directory to create first (``-o new_dir/``), if any.

    ``-o DIR`` for an existing directory, or ``-o DIR/`` for one to create, means "into it",
    under the default name; anything else is the file itself.
    """
    if not output:
        return default_output(input_path), None
    into_dir = output.endswith(("/", os.sep)) or Path(output).is_dir()
    if not into_dir:
        return Path(output), None
    folder = Path(output)
    out = folder / default_output(input_path).name
    if folder.is_dir():
        return out, None
    if not folder.parent.is_dir():
        raise InputError("output directory does not exist", str(folder.parent))
    return out, folder


def run(
    parser: argparse.ArgumentParser,
    convert: Callable[[argparse.Namespace], onnx.ModelProto],
    argv: Sequence[str] | None = None,
    extra_inputs: Callable[[argparse.Namespace], Sequence[str]] = lambda args: (),
    verify: Callable[[argparse.Namespace, onnx.ModelProto], Verification] | None = None,
) -> int:
    """Parse, convert, [verify], save atomically, report; map errors to one line and an exit
    code.

    Exit codes: 0 done, 1 the model cannot be converted, 2 usage or unusable input, 3 the
    converted model (written for inspection) disagrees with its source under --verify.
    """
    args = parser.parse_args(argv)
    prog = parser.prog
    try:
        from qonnx_ingest.save import check_output_path, save_model

        source = Path(args.input)
        if not source.exists():
            raise InputError("no such file or directory", args.input)
        inputs = [args.input, *extra_inputs(args)]
        output, make_dir = output_path(args.output, args.input)
        check_output_path(make_dir.parent / output.name if make_dir else output, inputs)
        for side in (args.encodings, args.report_json):
            if side and side != "-":
                check_output_path(side, [*inputs, output])
        if args.encodings == "-" and args.report_json == "-":
            raise InputError("--encodings and --report-json cannot both write to stdout")
        start = time.perf_counter()
        with _native_stderr_silenced(args.verbose), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConversionWarning)
            model = convert(args)
            seconds = time.perf_counter() - start
            written = _exported(model, args)
            # what is verified is what is written (the QCDQ form under --format qcdq)
            wants_verify = args.verify or args.verify_inputs is not None
            checked = verify(args, written) if wants_verify and verify else None
            quant_report = _report(model) if args.report or args.report_json else None
            side_files = _side_files(model, quant_report, args)
        _report_warnings(prog, caught)
        if make_dir is not None:
            make_dir.mkdir(exist_ok=True)
        save_model(written, output, inputs=inputs)
        for path, text in side_files:
            _write(path, text, [*inputs, output])
    except ConversionError as exc:
        return _fail(prog, str(exc), exc.exit_code, args.verbose)
    except KeyboardInterrupt:
        return _fail(prog, "interrupted", 130, args.verbose)
    except Exception as exc:  # a bug of ours: still one line, and the traceback on request
        message = f"internal error: {type(exc).__name__}: {exc}".splitlines()[0]
        return _fail(prog, message, EXIT_CONVERSION, args.verbose)
    # a JSON document on stdout ('-') stays alone there: the human-readable text moves to stderr
    text = sys.stderr if "-" in (args.encodings, args.report_json) else sys.stdout
    print(f"{prog}: wrote {output} ({summarize(written)}) in {seconds:.2f} s", file=text)
    if args.report:
        print(quant_report.as_text(), file=text)
    if checked is not None:
        print(checked.as_text(), file=text)
        if not checked.passed:
            from qonnx_ingest.verification import VerificationError

            return _fail(prog, str(VerificationError(checked)), EXIT_VERIFY, False)
    return EXIT_OK


def _exported(model: onnx.ModelProto, args: argparse.Namespace) -> onnx.ModelProto:
    if args.format == "qcdq":
        from qonnx_ingest.qcdq import to_qcdq

        return to_qcdq(model, strict=args.strict)
    return model


def _report(model: onnx.ModelProto):
    from qonnx_ingest.report import report

    return report(model)


def _side_files(
    model: onnx.ModelProto, quant_report, args: argparse.Namespace
) -> list[tuple[str, str]]:
    """(path, text) of the encodings and JSON report, built in full before anything is written."""
    import json

    files = []
    if args.encodings:
        from qonnx_ingest.encodings import aimet_encodings

        document = aimet_encodings(model, strict=args.strict)
        files.append((args.encodings, json.dumps(document, indent=2) + "\n"))
    if args.report_json:
        files.append((args.report_json, json.dumps(quant_report.as_dict(), indent=2) + "\n"))
    return files


def _write(path: str, text: str, protected: Sequence[str | Path]) -> None:
    if path == "-":
        sys.stdout.write(text)
        return
    from qonnx_ingest.save import write_text_atomically

    write_text_atomically(Path(path), text, protected)


@contextlib.contextmanager
def _native_stderr_silenced(verbose: bool) -> Iterator[None]:
    """File descriptor 2 on /dev/null while converting, unless --verbose.

    TensorFlow's and onnxruntime's C++ code write to fd 2 whatever their Python-side settings
    ("Unable to register cuDNN factory", "failed call to cuInit", onnxruntime's colored
    MergeShapeInfo / ExecuteKernel lines while qonnx folds constants): lines that would come
    before the one-line result. Python warnings are recorded meanwhile and reported after.
    """
    if verbose or sys.stderr is None:
        yield
        return
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        sys.stderr.flush()  # what Python wrote there meanwhile goes to /dev/null too
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def summarize(model: onnx.ModelProto) -> str:
    from qonnx_ingest.finish import QUANT_OP_TYPES

    nodes = model.graph.node
    quant = sum(n.op_type in QUANT_OP_TYPES for n in nodes)
    return f"{len(nodes)} nodes, {quant} quantizers"


def _report_warnings(prog: str, caught: list[warnings.WarningMessage]) -> None:
    """Our warnings as one line each; anyone else's the way Python shows them."""
    for w in caught:
        if issubclass(w.category, ConversionWarning):
            print(f"{prog}: warning: {' '.join(str(w.message).split())}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)


def _fail(prog: str, message: str, code: int, verbose: bool) -> int:
    if verbose:
        traceback.print_exc()
    message = " ".join(message.split())
    # names from a damaged file may hold control characters (NUL, ESC): escape, never emit
    message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    hint = "" if verbose else " (--verbose for details)" if code == EXIT_CONVERSION else ""
    print(f"{prog}: error: {message}{hint}", file=sys.stderr)
    return code
