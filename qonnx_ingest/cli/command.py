"""Command-line plumbing shared by ``qkeras2qonnx`` and ``tflite2qonnx``.

Each tool builds its parser here, adds its own options, and hands ``run`` a function that
does the conversion. This module imports only the standard library at import time, so
``--help`` stays fast and never pulls in TensorFlow.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from qonnx_ingest.cli.deadline import deadline
from qonnx_ingest.cli.options import (  # noqa: F401  (the converters' CLIs import them here)
    EXIT_CONVERSION,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNVERIFIED,
    EXIT_VERIFY,
    ModelScan,
    default_output,
    make_parser,
    output_path,
    positive_int,
)
from qonnx_ingest.cli.options import (
    fail as _fail,
)
from qonnx_ingest.cli.progress import Status
from qonnx_ingest.errors import (
    ConversionError,
    ConversionWarning,
    InputError,
    NoQuantizerWarning,
    ReferenceUnavailable,
    TimedOut,
)

if TYPE_CHECKING:
    import onnx

    from qonnx_ingest.verification import Verification


def run(
    parser: argparse.ArgumentParser,
    convert: Callable[[argparse.Namespace], onnx.ModelProto],
    argv: Sequence[str] | None = None,
    extra_inputs: Callable[[argparse.Namespace], Sequence[str]] = lambda args: (),
    verify: Callable[[argparse.Namespace, onnx.ModelProto], Verification] | None = None,
    scan: ModelScan | None = None,
) -> int:
    """Parse, convert, [verify], save atomically, report; map errors to one line and an exit
    code. Several models (or a directory, or --json) go to ``qonnx_ingest.cli.batch``, which runs
    this same command once per model in a process of its own.

    Exit codes: ``options.EXIT_CODES`` (listed in ``--help``).
    """
    args = parser.parse_args(argv)
    scan = scan or ModelScan()
    if args.json or len(args.inputs) > 1 or scan.expands(args.inputs[0], args):
        from qonnx_ingest.cli.batch import run_batch

        return run_batch(parser, args, scan)
    args.input = args.inputs[0]
    args.named_as = scan.named_as(args)  # a bundle member's output is named after the member
    status = Status(parser.prog, quiet=args.quiet)
    args.status = status  # converters announce their own phases (TensorFlow import)
    try:
        return _run_one(parser.prog, args, convert, extra_inputs, verify, status)
    finally:
        status.close()


def _run_one(prog, args, convert, extra_inputs, verify, status: Status) -> int:
    try:
        from qonnx_ingest.save import check_output_path, save_model

        source = Path(args.input)
        if not source.exists():
            raise InputError("no such file or directory", args.input)
        inputs = [args.input, *extra_inputs(args)]
        # -o - and -o /dev/stdout (any name of the file stdout writes to) write through stdout:
        # never a rename over the name, whatever it resolves to
        to_stdout = args.output == "-" or bool(args.output and _is_stdout(Path(args.output)))
        if to_stdout:
            if _is_terminal(sys.stdout):
                raise InputError(
                    "would write the binary model to this terminal: redirect stdout "
                    "(> model.onnx, | another command) or give a file name",
                    f"-o {args.output}",
                )
            if "-" in (args.encodings, args.report_json):
                raise InputError(
                    f"-o {args.output} writes the model to stdout: give the JSON a file name"
                )
            output, make_dir = Path("-"), None
        else:
            output, make_dir = output_path(args.output, getattr(args, "named_as", args.input))
            check_output_path(make_dir.parent / output.name if make_dir else output, inputs)
        for side in (args.encodings, args.report_json):
            if side and side != "-":
                check_output_path(side, [*inputs, output])
        if args.encodings == "-" and args.report_json == "-":
            raise InputError("--encodings and --report-json cannot both write to stdout")
        start = time.perf_counter()
        status.phase(f"converting {args.input}")
        with (
            deadline(args.timeout, args.input),
            _native_stderr_silenced(args.verbose),
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("always", ConversionWarning)
            model = convert(args)
            seconds = time.perf_counter() - start
            if args.strict:
                _refuse_float_model(caught, args.input)
            if args.format == "qcdq":
                status.phase("lowering to QuantizeLinear/DequantizeLinear")
            written = _exported(model, args)
            # what is verified is what is written (the QCDQ form under --format qcdq)
            wants_verify = args.verify or args.verify_inputs is not None
            if wants_verify and verify:
                status.phase("verifying against the source model")
            checked, skipped = None, None
            if wants_verify and verify:
                try:
                    checked = verify(args, written)
                except ReferenceUnavailable as exc:  # the conversion stands: write it, say so
                    skipped = str(exc)
            if args.report or args.report_json:
                status.phase("computing the report")
            quant_report = _report(model) if args.report or args.report_json else None
            if args.encodings:
                status.phase("writing the encodings")
            side_files = _side_files(model, quant_report, args)
        warned = _report_warnings(prog, caught)
        status.phase(f"writing {output}" if not to_stdout else "writing the model to stdout")
        if make_dir is not None:
            make_dir.mkdir(exist_ok=True)
        if to_stdout:
            _model_to_stdout(written)
        else:
            save_model(written, output, inputs=inputs)
        for path, text in side_files:
            _write(path, text, [*inputs, output])
        status.close()
    except ConversionError as exc:
        status.close()
        return _fail(prog, str(exc), exc.exit_code, args.verbose)
    except TimedOut as exc:
        status.close()
        return _fail(prog, str(exc), exc.exit_code, args.verbose)
    except KeyboardInterrupt:
        status.close()
        return _fail(prog, "interrupted", EXIT_INTERRUPTED, args.verbose)
    except ModuleNotFoundError as exc:  # an optional dependency: say what to install
        status.close()
        from qonnx_ingest.install_hints import missing_module_message

        hint = missing_module_message(exc.name)
        if hint is not None:
            return _fail(prog, hint, InputError.exit_code, args.verbose)
        message = f"internal error: {type(exc).__name__}: {exc}".splitlines()[0]
        return _fail(prog, message, EXIT_CONVERSION, args.verbose)
    except Exception as exc:  # a bug of ours: still one line, and the traceback on request
        status.close()
        message = f"internal error: {type(exc).__name__}: {exc}".splitlines()[0]
        return _fail(prog, message, EXIT_CONVERSION, args.verbose)
    # stdout keeps a model or a JSON document ('-') alone: the human-readable text goes to stderr
    on_stdout = to_stdout or "-" in (args.encodings, args.report_json)
    text = sys.stderr if on_stdout else sys.stdout
    where = "the model to stdout" if to_stdout else output
    print(f"{prog}: wrote {where} ({summarize(written)}) in {seconds:.2f} s", file=text)
    if args.report:
        print(quant_report.as_text(), file=text)
    if args.result_file:
        _write_result(args.result_file, None if to_stdout else output, written, warned,
                      checked, skipped)  # fmt: skip
    if skipped is not None:
        print(f"{prog}: verification skipped: {' '.join(skipped.split())}", file=sys.stderr)
        return EXIT_UNVERIFIED
    if checked is not None:
        print(checked.as_text(), file=text)
        if not checked.passed:
            from qonnx_ingest.errors import VerificationError

            return _fail(prog, str(VerificationError(checked)), EXIT_VERIFY, False)
    return EXIT_OK


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _refuse_float_model(caught: list[warnings.WarningMessage], where: str) -> None:
    """--strict: a model without a single quantizer is refused, not just warned about."""
    for w in caught:
        if issubclass(w.category, NoQuantizerWarning):
            raise ConversionError(f"{w.message} (--strict refuses it)", where)


def _write_result(path, output, model, warned, checked, skipped) -> None:
    """What a batch's child did, for the parent's --json: the file written, the warnings,
    the verification figures (or why it was skipped)."""
    import json

    document = {
        "output": None if output is None else str(output),
        "summary": summarize(model),
        "warnings": warned,
        "verification": checked.as_dict() if checked is not None else None,
        "verification_skipped": skipped,
    }
    Path(path).write_text(json.dumps(document, default=_json_default))


def _json_default(value):
    """numpy scalars in the verification figures."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _model_to_stdout(model: onnx.ModelProto) -> None:
    from qonnx_ingest.save import EXTERNAL_DATA_THRESHOLD

    if model.ByteSize() > EXTERNAL_DATA_THRESHOLD:
        raise InputError("a model this large needs a file beside its .data, not stdout", "-o -")
    sys.stdout.flush()
    sys.stdout.buffer.write(model.SerializeToString())
    sys.stdout.buffer.flush()


def _is_stdout(output: Path) -> bool:
    """``-o /dev/stdout`` (or any path to the file stdout writes to)."""
    try:
        return os.path.samestat(os.stat(output), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError, AttributeError):
        return False


def _exported(model: onnx.ModelProto, args: argparse.Namespace) -> onnx.ModelProto:
    if args.format != "qonnx":  # qcdq, finn, hls4ml
        from qonnx_ingest.output import in_format

        return in_format(model, args.format, strict=args.strict)
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


def _native_stderr_silenced(verbose: bool):
    """fd 2 on /dev/null while converting, unless --verbose: C++ lines (TensorFlow's,
    onnxruntime's) would come before the one-line result. Python warnings are recorded
    meanwhile and reported after."""
    from qonnx_ingest.native_stderr import silenced

    return silenced(not verbose)


def summarize(model: onnx.ModelProto) -> str:
    """``12 nodes, 3 quantizers``; a QCDQ model counts its QuantizeLinear/DequantizeLinear
    pairs instead, so lowered quantizers do not read as lost ones."""
    from qonnx_ingest.finish import QUANT_OP_TYPES

    nodes = model.graph.node
    quant = sum(n.op_type in QUANT_OP_TYPES for n in nodes)
    q = sum(n.op_type == "QuantizeLinear" for n in nodes)
    dq = sum(n.op_type == "DequantizeLinear" for n in nodes)
    parts = [f"{len(nodes)} nodes"]
    if q or dq:
        parts.append(f"{q} QuantizeLinear/DequantizeLinear pairs")
        if dq > q:  # weights and biases: integer constants behind a DequantizeLinear alone
            parts.append(f"{dq - q} dequantized constants")
        elif dq < q:
            parts.append(f"{q - dq} QuantizeLinear without DequantizeLinear")
    if quant or not (q or dq):
        parts.append(f"{quant} quantizers")
    return ", ".join(parts)


def _report_warnings(prog: str, caught: list[warnings.WarningMessage]) -> list[str]:
    """Our warnings as one line each (returned too); anyone else's the way Python shows them."""
    ours = []
    for w in caught:
        if issubclass(w.category, ConversionWarning):
            ours.append(" ".join(str(w.message).split()))
            print(f"{prog}: warning: {ours[-1]}", file=sys.stderr)
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
    return ours
