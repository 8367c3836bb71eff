"""The README's generated sections match the code they describe."""

import importlib.util

from support import ROOT


def load_script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_lists_exactly_the_registered_tflite_ops():
    script = load_script("update_readme_ops")
    text = (ROOT / "README.md").read_text()
    assert script.BEGIN in text
    assert script.render(text) == text, "run scripts/update_readme_ops.py"


def test_readme_commands_are_the_ones_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in readme and "bash scripts/test.sh" in ci
    assert "bash scripts/demo.sh" in readme
