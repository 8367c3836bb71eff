"""The README and docs/: generated sections match the code they describe, every docs page is
linked from the README, every relative link resolves, and the README stays a short page."""

import re

import pytest

from support import ROOT

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
    assert len(lines) <= 260, f"README.md has {len(lines)} lines; move reference text to docs/"
