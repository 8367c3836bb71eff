"""The packages' import graph has no cycle, deferred imports included, and the TFLite
converters see the data model, never the parser."""

import ast

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
    """Every module of ours ``name`` imports, with the packages whose __init__ that runs."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            targets = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target:
                if target in modules and target != name and not name.startswith(target + "."):
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
