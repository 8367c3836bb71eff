"""The slow-first order of ``tests/conftest.py`` names files that exist: a moved or renamed
file would silently drop to the end of the run, where one worker runs it while the other idles."""

from __future__ import annotations

from conftest import ROOT, SLOW_FILES


def test_every_file_the_slow_first_order_names_exists() -> None:
    missing = [name for name in SLOW_FILES if not (ROOT / name).is_file()]
    assert not missing, f"tests/conftest.py SLOW_FILES names files that moved: {missing}"
