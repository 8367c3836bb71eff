"""The README and docs/: generated sections match the code they describe, every docs page is
linked from the README, every relative link resolves, and the README stays a short page."""

import re

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


def test_docs_tflite_lists_exactly_the_registered_tflite_ops():
    import tflite_ops_list as script

    assert script.TARGET == DOCS / "tflite.md"
    text = script.TARGET.read_text()
    assert script.BEGIN in text
    assert script.render(text) == text, "run scripts/update_readme_ops.py"


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
