"""Command-line plumbing shared by ``qkeras2qonnx`` and ``tflite2qonnx``.

Each tool builds its parser here, adds its own options, and hands ``run`` a function that
does the conversion. This module imports only the standard library at import time, so
``--help`` stays fast and never pulls in TensorFlow.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from qonnx_ingest import DEFAULT_OPSET, __version__
from qonnx_ingest.errors import ConversionError, ConversionWarning, InputError

if TYPE_CHECKING:
    import onnx

EXIT_OK, EXIT_CONVERSION, EXIT_USAGE = 0, 1, 2


def make_parser(prog: str, description: str, input_help: str) -> argparse.ArgumentParser:
    """The options every converter has: input, -o, --opset, --verbose, --version."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("input", metavar="MODEL", help=input_help)
    parser.add_argument(
        "-o", "--output", metavar="OUT.onnx", help="output file (default: MODEL with .onnx)"
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
    parser.add_argument("-v", "--verbose", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def default_output(input_path: str) -> Path:
    """``model.h5`` -> ``model.onnx``; a SavedModel directory ``m/`` -> ``m.onnx`` beside it."""
    path = Path(input_path.rstrip("/\\") or input_path)
    return path.with_suffix(".onnx") if path.suffix else path.with_name(path.name + ".onnx")


def run(
    parser: argparse.ArgumentParser,
    convert: Callable[[argparse.Namespace], onnx.ModelProto],
    argv: Sequence[str] | None = None,
    extra_inputs: Callable[[argparse.Namespace], Sequence[str]] = lambda args: (),
) -> int:
    """Parse, convert, save atomically, report; map errors to one line and an exit code.

    Exit codes: 0 done, 1 the model cannot be converted, 2 usage or unusable input.
    """
    args = parser.parse_args(argv)
    prog = parser.prog
    try:
        from qonnx_ingest.save import check_output_path, save_model

        source = Path(args.input)
        if not source.exists():
            raise InputError("no such file or directory", args.input)
        inputs = [args.input, *extra_inputs(args)]
        output = Path(args.output) if args.output else default_output(args.input)
        check_output_path(output, inputs)
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConversionWarning)
            model = convert(args)
        seconds = time.perf_counter() - start
        _report_warnings(prog, caught)
        save_model(model, output, inputs=inputs)
    except ConversionError as exc:
        return _fail(prog, str(exc), exc.exit_code, args.verbose)
    except KeyboardInterrupt:
        return _fail(prog, "interrupted", 130, args.verbose)
    except Exception as exc:  # a bug of ours: still one line, and the traceback on request
        message = f"internal error: {type(exc).__name__}: {exc}".splitlines()[0]
        return _fail(prog, message, EXIT_CONVERSION, args.verbose)
    print(f"{prog}: wrote {output} ({summarize(model)}) in {seconds:.2f} s")
    return EXIT_OK


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
    hint = "" if verbose else " (--verbose for details)" if code == EXIT_CONVERSION else ""
    print(f"{prog}: error: {message}{hint}", file=sys.stderr)
    return code
