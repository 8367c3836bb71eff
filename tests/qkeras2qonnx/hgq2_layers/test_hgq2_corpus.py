"""Real HGQ2 models (the corpus's ``hgq2/`` folder, every file in it) convert, and the QONNX
model computes exactly what HGQ2's own ``predict`` computes: 0 difference at batch 1 and 8, in
qonnx's executor and in onnxruntime (Quant lowered to standard ops, and ``--format qcdq``).

The files are loaded, run and converted (by path) in one Keras 3 subprocess
(``hgq2_corpus.py``); this process compares.
"""

import numpy as np
import onnx
import pytest
from hgq2_support import built_by, onnxruntime_forms

from qonnx_ingest.execute import execute_qonnx
from support import CORPUS, requires_corpus

# qonnx's executor compares its computed shapes with value_info that run-time reshapes (einsums,
# slices) leave symbolic: the warning is expected here and says nothing about the values.
pytestmark = [
    pytest.mark.keras,
    requires_corpus,
    pytest.mark.filterwarnings("ignore:Output shapes disagree:UserWarning"),
]

FOLDER = CORPUS / "hgq2"
FILES = (
    sorted(p for p in FOLDER.glob("*") if p.suffix in (".h5", ".keras")) if FOLDER.is_dir() else []
)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    return built_by("hgq2_corpus.py", tmp_path_factory, *FILES)


def test_the_corpus_holds_the_hgq2_models_of_issue_37():
    """The two models this test was written for (the glob below covers any later addition)."""
    names = {p.name for p in FILES}
    assert {"da4mlae_mlpmixer_e1092.h5", "hgqae_tgc_e7472.keras"} <= names


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_hgq2_corpus_model_equals_hgq2_predict_exactly(made, path):
    error = made / f"{path.stem}.error.txt"
    assert not error.exists(), error.read_text()
    model = onnx.load(made / f"{path.stem}.onnx")
    onnx.checker.check_model(model)
    ref = dict(np.load(made / f"{path.stem}.npz"))
    sessions = onnxruntime_forms(model)
    outputs = [o.name for o in model.graph.output]
    for batch in (1, 8):
        feeds = {vi.name: ref[f"x{batch}_{j}"] for j, vi in enumerate(model.graph.input)}
        wants = [ref[f"y{batch}_{k}"] for k in range(len(outputs))]
        got = execute_qonnx(model, feeds)
        for name, want in zip(outputs, wants, strict=True):
            assert np.any(want != 0)  # a model that outputs zeros would prove nothing
            np.testing.assert_array_equal(got[name], want, err_msg=f"qonnx batch {batch}")
        for form, session in sessions.items():
            for got_k, want in zip(session.run(None, feeds), wants, strict=True):
                np.testing.assert_array_equal(got_k, want, err_msg=f"{form} batch {batch}")


def test_an_hgq2_corpus_model_converts_to_the_same_bytes_after_another_model(made):
    """The first file, converted again in the same process after the others, gives the same
    bytes: once its constants' order followed tf2onnx's memory addresses, and its metadata
    Keras's counter-made quantizer names (``quantizer_8``)."""
    first = FILES[0].stem
    assert (made / f"{first}.onnx").read_bytes() == (made / f"{first}.again.onnx").read_bytes()
