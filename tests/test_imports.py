"""The packages' import graph has no cycle, deferred imports included; the TFLite converters
see the data model, never the parser; the parser loads no converter; the integer back end
(``tflite2qonnx.ops.exact``) imports no float converter; qkeras2qonnx's rooms import only
lower floors."""

import ast
import subprocess
import sys

from support import ROOT

PACKAGES = ("qonnx_ingest", "qkeras2qonnx", "tflite2qonnx", "layout")


def _modules() -> dict[str, ast.Module]:
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            modules[name] = ast.parse(path.read_text())
    return modules


def _imports(name: str, tree: ast.Module, modules) -> set[str]:
    """Every module of ours ``name`` imports, top-level or inside a function, with the packages
    whose __init__ that runs. A package enclosing ``name`` counts only where a name defined in
    its __init__ is taken (``from tflite2qonnx.ops import CONVERTERS`` inside
    ``tflite2qonnx.ops.control.flow``): its __init__ has run already otherwise."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
            own = set()
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            targets = [f"{node.module}.{a.name}" for a in node.names]
            # names the package's __init__ defines, not submodules of it
            own = {node.module} if any(t not in modules for t in targets) else set()
        else:
            continue
        for target in targets:
            while target:
                enclosing = name.startswith(target + ".")
                if target in modules and target != name and (not enclosing or target in own):
                    found.add(target)
                target = target.rpartition(".")[0]
    return found


def test_no_import_cycle():
    modules = _modules()
    graph = {name: _imports(name, tree, modules) for name, tree in modules.items()}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(name) :] + [name]))
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, [*path, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_converters_import_the_data_model_not_the_parser():
    modules = _modules()
    parser = {"tflite2qonnx.reader", "tflite2qonnx.flatbuffer", "tflite2qonnx.flatbuffer_tensors"}
    for name, tree in modules.items():
        if name.startswith("tflite2qonnx.ops") or name == "tflite2qonnx.graph":
            assert not _imports(name, tree, modules) & parser, name
    # the bit-exact arithmetic is a lower layer: the kernels in ops import it, not the reverse
    lower = _imports("tflite2qonnx.fixed_point", modules["tflite2qonnx.fixed_point"], modules)
    assert not {m for m in lower if m.startswith("tflite2qonnx.ops")}


def test_operator_table_and_parser_load_no_converter():
    """Reading a .tflite file checks operands against the operator table without importing
    one converter module (the table names them; they load on first use)."""
    from support import EXAMPLES

    body = (
        "import sys\n"
        "from tflite2qonnx.reader import read_model\n"
        "import tflite2qonnx.flatbuffer, tflite2qonnx.ops\n"
        f"read_model({str(EXAMPLES / 'int8_dense.tflite')!r})\n"
        "print(sorted(m for m in sys.modules if m.startswith('tflite2qonnx.ops')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", body], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    loaded = eval(proc.stdout.strip().splitlines()[-1])
    assert loaded == [
        "tflite2qonnx.ops",
        "tflite2qonnx.ops.custom_records",
        "tflite2qonnx.ops.operands",
        "tflite2qonnx.ops.record",
        "tflite2qonnx.ops.recurrent_records",
    ]


def test_every_record_names_an_existing_converter():
    from tflite2qonnx.ops import OPERATORS
    from tflite2qonnx.ops.dispatch import resolve

    for name, record in OPERATORS.items():
        kernels = (*record.int8_kernels, *record.int16_kernels, *record.hybrid_kernels)
        kernels += record.float_kernels
        references = [record.convert, *(r for k in kernels for r in (k.run, k.when))]
        for reference in references:
            if reference is not None:
                assert callable(resolve(reference)), f"{name}: {reference}"


def test_integer_back_end_imports_no_float_converter():
    """``ops.exact`` may use the shared helpers of ``ops`` (common, padding, the fused
    activation, the operand geometry, the record and its treatment decisions), never a converter
    of another family."""
    modules = _modules()
    shared = {
        "tflite2qonnx.ops.common",
        "tflite2qonnx.ops.geometry",
        "tflite2qonnx.ops.padding",
        "tflite2qonnx.ops.activation",
        "tflite2qonnx.ops.record",
        "tflite2qonnx.ops.treatment",
        "tflite2qonnx.ops.operands",
    }
    for name, tree in modules.items():
        if not name.startswith("tflite2qonnx.ops.exact"):
            continue
        for target in _imports(name, tree, modules):
            if target.startswith("tflite2qonnx.ops.") and not target.startswith(
                "tflite2qonnx.ops.exact"
            ):
                assert target in shared, f"{name} imports {target}"


# qkeras2qonnx's rooms, lowest first; a room imports (at module level) only itself and lower
# floors. Same-floor rooms do not import each other. Modules outside a room (the entry points,
# the strip step and the layer registry that joins the QKeras rooms) stand above them all.
KERAS_FLOORS = (
    ("compat",),
    ("environment",),
    ("emit",),
    ("qkeras_layers", "hgq2_layers"),
    ("qkeras_recurrent",),
)


def _top_level_imports(name: str, tree: ast.Module, modules) -> set[str]:
    """Like ``_imports``, for the module body only: a deferred import inside a function (the
    isolated worker running the pipeline, compat asking which QKeras runs) is taken at call
    time, when every room is loaded, and cannot make a room depend on a higher one at import."""
    body = ast.Module(
        body=[n for n in tree.body if not isinstance(n, ast.FunctionDef | ast.ClassDef)],
        type_ignores=[],
    )
    return _imports(name, body, modules)


def _floor(name: str) -> tuple[int, str] | None:
    parts = name.split(".")
    if parts[0] != "qkeras2qonnx" or len(parts) < 2:
        return None
    for level, rooms in enumerate(KERAS_FLOORS):
        if parts[1] in rooms:
            return level, parts[1]
    return None


def test_keras_rooms_import_only_lower_floors():
    modules = _modules()
    keras = [name.split(".") for name in modules if name.startswith("qkeras2qonnx.")]
    keras_rooms = {parts[1] for parts in keras if len(parts) > 2}
    assert keras_rooms == {r for rooms in KERAS_FLOORS for r in rooms}, "a room with no floor"
    for name, tree in modules.items():
        here = _floor(name)
        if here is None:
            continue
        for target in _top_level_imports(name, tree, modules):
            there = _floor(target)
            if target.startswith("qkeras2qonnx") and there is None and target != "qkeras2qonnx":
                raise AssertionError(f"{name} (a room) imports {target} (above the rooms)")
            if there is not None and there[1] != here[1]:
                assert there[0] < here[0], f"{name} imports {target} (not a lower floor)"
