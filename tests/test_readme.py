"""The README and docs/: generated sections match the code they describe, every docs page is
linked from the README, every relative link resolves, and the README stays a short page."""

import re

import pytest

from support import CORPUS, ROOT, requires_corpus

DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path) -> set[str]:
    """GitHub's heading anchors of a markdown file (code blocks excluded)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    found = set()
    for heading in re.findall(r"^#+ (.*)$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("path", ["docs/tflite.md", "docs/int16.md", "tflite2qonnx/api.py"])
def test_operator_lists_are_the_ones_the_records_generate(path):
    """Supported operators, the --bit-exact and int16 tables and ``convert``'s emulated list
    are regenerated from the records and compared: an edited record fails here until
    ``scripts/update_readme_ops.py`` has rewritten them."""
    from tflite2qonnx.ops import OPERATORS
    from tflite2qonnx.ops.listing import SECTIONS, render

    text = (ROOT / path).read_text()
    assert render(path, text) == text, "run scripts/update_readme_ops.py"
    if path == "docs/tflite.md":  # the supported list names every record that converts
        listed = re.search(r"tflite-ops:begin -->\n(.*?)\n<!--", text, re.S).group(1)
        assert sorted(re.findall(r"`([^`]+)`", listed)) == sorted(
            n for n, op in OPERATORS.items() if op.convert is not None
        )
    assert any(target == path for target, _, _ in SECTIONS)


def test_readme_commands_are_the_ones_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in readme and "bash scripts/test.sh" in ci
    assert "bash scripts/demo.sh" in readme
    assert "on\nevery core" in readme or "on every core" in readme


def test_readme_links_every_docs_page():
    readme = (ROOT / "README.md").read_text()
    linked = {target.split("#")[0] for target in LINK.findall(readme)}
    missing = {f"docs/{page.name}" for page in DOCS.glob("*.md")} - linked
    assert not missing, f"docs pages the README does not link: {sorted(missing)}"


def test_every_relative_link_in_readme_and_docs_resolves_with_its_anchor():
    broken = []
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            resolved = (page.parent / file).resolve() if file else page
            if not resolved.exists() or (anchor and anchor not in anchors(resolved)):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_readme_is_a_short_users_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move reference text to docs/"


def test_readme_and_docs_list_every_exit_code_the_tools_use():
    from qonnx_ingest.cli.options import EXIT_CODES

    for page in (ROOT / "README.md", DOCS / "cli.md"):
        section = re.search(r"^## Exit codes.*?\n(.*?)^## ", page.read_text(), re.S | re.M)
        codes = " ".join(section.group(1).split()).split("With several models")[0]
        listed = re.findall(r"(?:^|[ (,])(\d+) (?=[a-z`])", codes)
        assert [int(c) for c in listed] == [code for code, _ in EXIT_CODES], (page, listed)


@requires_corpus
def test_the_cli_pages_report_and_verify_example_is_what_the_command_prints(tmp_path, capsys):
    """docs/cli.md's hello_world example (abridged: its "..." stands for rows left out):
    every other line, the figures included, as `--verify --report` prints it today."""
    from tflite2qonnx.cli import main

    text = (DOCS / "cli.md").read_text()
    command = "tflite2qonnx tflm__hello_world_int8.tflite --verify --report"
    block = re.search(rf"`{command}`, abridged\):\n\n```\n(.*?)^```", text, re.S | re.M)
    assert block, "docs/cli.md lost its --verify --report example"
    model = CORPUS / "tflite" / "tflm__hello_world_int8.tflite"
    assert main([str(model), "-o", str(tmp_path / "m.onnx"), "--verify", "--report", "-q"]) == 0
    printed = capsys.readouterr().out.splitlines()
    shown = [ln for ln in block.group(1).splitlines() if ln != "..."]
    assert len(shown) >= 10 and all(line in printed for line in shown), [
        line for line in shown if line not in printed
    ]


def test_the_project_layout_lists_every_top_level_directory():
    """Was: a "Project layout" without ``layout/``."""
    text = (DOCS / "development.md").read_text()
    section = re.search(r"^## Project layout\n(.*?)(?:^## |\Z)", text, re.S | re.M).group(1)
    listed = set(re.findall(r"^\| `([\w.-]+)/` \|", section, re.M))
    made = {"build", "dist", "out", "__pycache__"}  # what builds and the demo write
    present = {
        p.name
        for p in ROOT.iterdir()
        if p.is_dir()
        and not p.name.startswith(".")
        and p.name not in made
        and not p.name.endswith(".egg-info")
    }
    assert present <= listed, sorted(present - listed)
