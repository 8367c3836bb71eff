"""Paths shared by the tests: the project root, its examples, and the corpus beside it."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CORPUS = ROOT.parent / "shared" / "corpus"

# CI clones ../shared beside the project; a checkout without it skips the corpus tests, saying why.
requires_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"no model corpus at {CORPUS}")
