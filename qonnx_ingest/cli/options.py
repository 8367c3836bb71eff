"""The options every converter shares, how MODEL and -o name files, and the error line.

Standard library only, so that ``--help`` and ``--version`` stay instant.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from qonnx_ingest import DEFAULT_OPSET
from qonnx_ingest.cli.versions import BASE
from qonnx_ingest.errors import InputError

EXIT_OK, EXIT_CONVERSION, EXIT_USAGE, EXIT_VERIFY, EXIT_TIMEOUT = 0, 1, 2, 3, 4
EXIT_UNVERIFIED, EXIT_INTERRUPTED = 5, 130
EXIT_CODES = (
    (EXIT_OK, "converted (and, with --verify, verified)"),
    (EXIT_CONVERSION, "the model cannot be converted exactly (the message names the layer/op)"),
    (
        EXIT_USAGE,
        "usage error, unusable input, or a missing dependency (the message says what to install)",
    ),
    (
        EXIT_VERIFY,
        "--verify: the converted model disagrees with its source (written for inspection)",
    ),
    (EXIT_TIMEOUT, "not done within --timeout (nothing written)"),
    (
        EXIT_UNVERIFIED,
        "converted and written, but --verify could not run the source model "
        '("verification skipped: <why>")',
    ),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C); with several models, after the summary"),
)


def make_parser(
    prog: str,
    description: str,
    input_help: str,
    versions: Sequence[str] = BASE,
    examples: Sequence[tuple[str, str]] = (),
    isolated_versions: Callable[[], Mapping[str, Path | None]] | None = None,
) -> argparse.ArgumentParser:
    """The options every converter has: inputs, -o, --opset, --verbose, --version, ...,
    in argument groups; ``versions`` are the libraries ``--version`` lists after ours (then
    ``isolated_versions()``: name -> the directory of its own a library is installed in);
    ``examples`` (command, what it does) and the exit codes make the epilog. The tool's own
    options go to ``parser`` (listed under "options")."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=_epilog(prog, examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "inputs",
        nargs="+",
        metavar="MODEL",
        help=f"{input_help}; several models or directories convert each (see --jobs, --json)",
    )
    files = parser.add_argument_group("output")
    files.add_argument(
        "-o",
        "--output",
        metavar="OUT",
        help="output file ('-': stdout, not a terminal), or a directory (existing, or named "
        "with a trailing /) to write MODEL.onnx into (default: MODEL with .onnx beside it); "
        "with several models, a directory",
    )
    files.add_argument(
        "--opset",
        type=int,
        default=DEFAULT_OPSET,
        help=f"ONNX opset of the default domain (default: {DEFAULT_OPSET})",
    )
    files.add_argument(
        "--int-quant",
        action="store_true",
        help="emit qonnx's IntQuant op type instead of Quant (qonnx 1.0 reads both)",
    )
    files.add_argument(
        "--format",
        choices=("qonnx", "qcdq", "finn", "hls4ml"),
        default="qonnx",
        help="qcdq: lower the quantizers to QuantizeLinear/Clip/DequantizeLinear for "
        "onnxruntime and other QDQ consumers; finn: activation quantizers as the exact "
        "MultiThresholds FINN's frontend reads (docs/finn.md); hls4ml: constant quantizers on "
        "exact power-of-two grids, for hls4ml's QONNX frontend (docs/hls4ml.md) "
        "(default: qonnx)",
    )
    files.add_argument(
        "--strict",
        action="store_true",
        help="refuse what --encodings or --format qcdq can only approximate, and a Keras model "
        "without a single quantizer, instead of warning",
    )
    check = parser.add_argument_group("verification")
    check.add_argument(
        "--verify",
        action="store_true",
        help="run the source model and the converted one on seeded random inputs and compare "
        "them (exit code 3 when they disagree beyond the converter's tolerance, 5 when the "
        "source model cannot be run: the model is written either way)",
    )
    check.add_argument(
        "--verify-inputs",
        metavar="INPUTS.npz",
        help="verify on your own inputs (implies --verify): one array per model input, samples "
        "first",
    )
    check.add_argument(
        "--verify-count",
        type=int,
        default=16,
        metavar="N",
        help="with --verify: number of seeded random inputs (default: 16)",
    )
    report = parser.add_argument_group("report and side files")
    report.add_argument(
        "--report", action="store_true", help="print every quantized tensor and the model's cost"
    )
    report.add_argument(
        "--report-json", metavar="REPORT.json", help="write that report as JSON ('-': stdout)"
    )
    report.add_argument(
        "--encodings", metavar="ENCODINGS.json", help="write AIMET 2.0.0 quantization encodings"
    )
    batch = parser.add_argument_group("several models")
    batch.add_argument(
        "-r",
        "--recursive",
        action="store_true",
        help="look for models in the subdirectories of a directory given as MODEL too",
    )
    batch.add_argument(
        "-j",
        "--jobs",
        type=positive_int,
        default=1,
        metavar="N",
        help="with several models: convert N at a time, each in its own process (default: 1)",
    )
    batch.add_argument(
        "--timeout",
        type=positive_float,
        metavar="SECONDS",
        help="give up on a model whose conversion takes longer (exit code 4, no output); "
        "with several models, per model",
    )
    batch.add_argument(
        "--json",
        action="store_true",
        help="print a JSON summary of every model's result on stdout (outputs written, "
        "warnings, verification figures; the one-line results go to stderr)",
    )
    # a batch's child writes its result here for the parent to read (not for people)
    batch.add_argument("--result-file", help=argparse.SUPPRESS)
    messages = parser.add_argument_group("messages")
    messages.add_argument(
        "-q", "--quiet", action="store_true", help="no status lines for slow phases on stderr"
    )
    messages.add_argument("-v", "--verbose", action="store_true", help="show tracebacks")
    messages.add_argument(
        "--version",
        action=_VersionAction,
        libraries=tuple(versions),
        isolated=isolated_versions,
        help="show our version and those of the libraries a conversion uses, and exit",
    )
    return parser


def _epilog(prog: str, examples: Sequence[tuple[str, str]]) -> str:
    lines = []
    if examples:
        lines.append("examples:")
        for command, what in examples:
            lines.append(f"  {prog} {command}")
            lines.append(f"      {what}")
        lines.append("")
    lines.append("exit codes:")
    lines.extend(f"  {code:<4}{meaning}" for code, meaning in EXIT_CODES)
    return "\n".join(lines)


class _VersionAction(argparse.Action):
    """Like argparse's version action, with several lines kept as they are."""

    def __init__(self, option_strings, dest, libraries=(), isolated=None, help=None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)
        self.libraries, self.isolated = libraries, isolated

    def __call__(self, parser, namespace, values, option_string=None):
        from qonnx_ingest.cli.versions import version_text

        isolated = self.isolated() if self.isolated is not None else None
        print(version_text(parser.prog, self.libraries, isolated))
        parser.exit()


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


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


class Member(str):
    """A model inside a bundle file (a MediaPipe .task), shown as ``bundle:name``: its run is
    ``bundle`` with the scan's member option and ``name``; ``beside`` is where its output goes
    by default (``bundle`` without its suffix, then the member's path; the suffix is kept)."""

    bundle: str
    name: str
    beside: str

    def __new__(cls, bundle: str, name: str, beside: str) -> Member:
        self = super().__new__(cls, f"{bundle}:{name}")
        self.bundle, self.name, self.beside = bundle, name, beside
        return self

    def __getnewargs__(self) -> tuple[str, str, str]:  # copies (the --json summary's asdict)
        return self.bundle, self.name, self.beside


class ModelScan:
    """Which files in a directory given as MODEL are models (``suffixes``), and which
    directories are models themselves (a SavedModel: ``marker`` inside).

    ``pairs`` maps a suffix to the names of its companion file (``{".json": ("_weights.h5",
    ".weights.h5")}``: ``X.json`` with ``X_weights.h5`` is one model, converted with
    ``pair_option X_weights.h5``; the companion is not a model of its own). ``workers`` names
    the CLI module a reused worker process runs (``batch_workers``), and ``route`` the kind
    of worker a model needs (None: a process of its own). ``foreign`` maps a file that marks
    a directory as another tool's model (``saved_model.pb`` for tflite2qonnx) to what to tell
    a user who gave that directory.

    ``bundles``: suffixes of files that hold several models (``.task``), ``members(path)`` the
    names of the models in one (InputError when it cannot be read), ``member_output(name)``
    a member's path under the bundle's output directory, and ``member_option`` (``--member``)
    the option whose ``member_dest`` picks one: without it, a bundle expands like a directory.
    """

    def __init__(
        self,
        suffixes: Sequence[str] = (),
        marker: str | None = None,
        pairs: dict[str, tuple[str, ...]] | None = None,
        pair_option: str = "",
        workers: str | None = None,
        route: Callable[[str], str | None] | None = None,
        foreign: Mapping[str, str] | None = None,
        bundles: Sequence[str] = (),
        members: Callable[[str], Sequence[str]] | None = None,
        member_output: Callable[[str], str] = str,
        member_option: str = "",
    ):
        self.suffixes = tuple(suffixes)
        self.marker = marker
        self.pairs = dict(pairs or {})
        self.pair_option = pair_option
        self.workers = workers
        self.route = route or (lambda model: "")
        self.foreign = dict(foreign or {})
        self.bundles = tuple(bundles)
        self.members = members
        self.member_output = member_output
        self.member_option = member_option
        self.member_dest = member_option.lstrip("-").replace("-", "_")

    def bundle_members(self, path: str | Path) -> list[Member]:
        """The models in bundle file ``path``; none for any other file or a bundle that cannot
        be read or holds no model (converting it then says what is wrong)."""
        path = str(path)
        if self.members is None or Path(path).suffix.lower() not in self.bundles:
            return []
        if not Path(path).is_file():
            return []
        try:
            names = self.members(path)
        except InputError:
            return []
        stem = Path(path).with_suffix("")
        return [Member(path, n, str(stem / self.member_output(n))) for n in names]

    def member_given(self, args: argparse.Namespace) -> bool:
        return bool(self.member_dest and getattr(args, self.member_dest, None))

    def expands(self, path: str | Path, args: argparse.Namespace) -> bool:
        """``path`` stands for several models: a directory, or a bundle (no member named)."""
        if self.is_folder(path):
            return True
        return not self.member_given(args) and bool(self.bundle_members(path))

    def named_as(self, args: argparse.Namespace) -> str:
        """The path one model's default output is named after: the model's, or for a bundle's
        member, the member's file name beside the bundle."""
        if not self.member_given(args):
            return args.input
        name = self.member_output(getattr(args, self.member_dest))
        return str(Path(args.input).parent / Path(name).name)

    def foreign_kind(self, path: str | Path) -> str | None:
        """What to tell a user who gave directory ``path``, another tool's model, if it is one."""
        return next((v for k, v in self.foreign.items() if (Path(path) / k).is_file()), None)

    def is_model_dir(self, path: str | Path) -> bool:
        return self.marker is not None and (Path(path) / self.marker).is_file()

    def is_folder(self, path: str | Path) -> bool:
        """A directory of models (not a model directory itself)."""
        return Path(path).is_dir() and not self.is_model_dir(path)

    def companion(self, path: str | Path) -> Path | None:
        """The file that makes one model with ``path`` (its weights), if it exists beside it."""
        path = Path(path)
        for ending in self.pairs.get(path.suffix.lower(), ()):
            candidate = path.with_name(path.stem + ending)
            if candidate.is_file():
                return candidate
        return None

    def companion_args(self, path: str | Path) -> list[str]:
        """The option a paired model's run needs (``--weights X_weights.h5``), a bundle
        member's (``--member NAME``), else none."""
        if isinstance(path, Member):
            return [self.member_option, path.name]
        found = self.companion(path)
        return [self.pair_option, str(found)] if found is not None else []


def fail(prog: str, message: str, code: int, verbose: bool) -> int:
    if verbose:
        traceback.print_exc()
    message = " ".join(message.split())
    # names from a damaged file may hold control characters (NUL, ESC): escape, never emit
    message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    hint = "" if verbose else " (--verbose for details)" if code == EXIT_CONVERSION else ""
    print(f"{prog}: error: {message}{hint}", file=sys.stderr)
    return code
