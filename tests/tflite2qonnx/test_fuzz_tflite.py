"""The TFLite fuzzer (fuzz_tflite.py beside this file; scripts/fuzz.py runs it in full): a fast
seeded run, and the harness itself.

The fast run is the first 3000 cases of the default seed, the same cases the full
10 000-case run starts with, on two worker processes (about 25 s on the 2-core CI machine).
Any crash, hang or memory blow-up fails the test with the fuzzer's own report, which says how
to rerun the case in-process with its traceback.
"""

from __future__ import annotations

import hashlib
import io

import pytest

from support import CORPUS, requires_corpus

pytestmark = requires_corpus

FAST_CASES = 3000
SEED = 0


@pytest.fixture(scope="module")
def fuzz_tflite():
    import fuzz_tflite

    return fuzz_tflite


def report_text(fuzz_tflite, report) -> str:
    out = io.StringIO()
    fuzz_tflite.print_report(report, top=0, out=out)
    return out.getvalue()


def test_first_cases_only_convert_or_are_rejected(fuzz_tflite):
    report = fuzz_tflite.fuzz(cases=FAST_CASES, seed=SEED, jobs=2, timeout=10, mem_gb=2)
    counts = report.counts()
    assert len(report.results) == FAST_CASES
    assert not report.problems(), report_text(fuzz_tflite, report)
    # the mutations reach both outcomes: a fuzzer that only hit the file identifier would not
    assert counts["converted"] > FAST_CASES // 20 and counts["rejected"] > FAST_CASES // 2
    assert report.restarts == 0


def test_harness_classifies_hangs_blowups_and_crashes(fuzz_tflite, monkeypatch):
    """Injected faults: each is reported as what it is, and the cases after it still run on a
    fresh worker."""
    monkeypatch.setenv(fuzz_tflite.FAULT_ENV, "hang:3,memory:5,segv:7,raise:9,stderr:11")
    report = fuzz_tflite.fuzz(cases=12, seed=SEED, jobs=2, timeout=3, mem_gb=1)
    status = {r["index"]: r["status"] for r in report.results}
    assert sorted(status) == list(range(12))
    assert {i: s for i, s in status.items() if s in fuzz_tflite.PROBLEMS} == {
        3: "hang",
        5: "blowup",
        7: "crash",
        9: "crash",
    }
    by_index = {r["index"]: r for r in report.results}
    assert "SIGSEGV" in by_index[7]["error"]
    assert by_index[9]["error"] == "RuntimeError" and by_index[9]["where"]
    assert report.restarts == 3  # after the hang, the blow-up and the signal
    assert [r["index"] for r in report.results if r.get("stderr")] == [11]
    assert "injected line on fd 2" in by_index[11]["stderr"]
    text = report_text(fuzz_tflite, report)
    for index in (3, 5, 7, 9):
        assert f"--seed {SEED} --case {index}" in text


def test_cases_are_reproducible_and_the_corpus_is_only_read(fuzz_tflite):
    paths = sorted((CORPUS / "tflite").glob("*.tflite"))
    digests = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}
    corpus, again = fuzz_tflite.Corpus(paths), fuzz_tflite.Corpus(paths)
    for index in range(40):
        case = corpus.case(SEED, index)
        assert case.data == again.case(SEED, index).data
        assert case.description == again.case(SEED, index).description
        assert case.data != corpus.data(next(p for p in paths if p.name == case.model))
    kinds = {f.kind for p in paths for f in corpus.fields(p)}
    assert {"uoffset", "soffset", "voffset", "vector_len", "string_len", "scalar"} <= kinds
    assert digests == {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


def test_rerun_of_one_case_in_process(fuzz_tflite, capsys):
    assert fuzz_tflite.main(["--seed", str(SEED), "--case", "0", "--mem-gb", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"case 0 (seed {SEED}): ")
    assert "rejected (" in out or "converted" in out
