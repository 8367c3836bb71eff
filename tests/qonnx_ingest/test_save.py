"""Saving is atomic, never touches the input, and handles models that need external data."""

import os
import stat

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from qonnx_ingest.errors import InputError
from qonnx_ingest.save import save_model


@pytest.fixture
def model():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [numpy_helper.from_array(w, "w")],
    )
    return helper.make_model(graph)


def test_writes_a_loadable_model_and_leaves_no_staging_files(tmp_path, model):
    out = save_model(model, tmp_path / "m.onnx")
    assert onnx.load(out) == model
    assert sorted(os.listdir(tmp_path)) == ["m.onnx"]


def test_refuses_to_overwrite_the_input(tmp_path, model):
    src = tmp_path / "model.h5"
    src.write_bytes(b"precious")
    with pytest.raises(InputError, match="input"):
        save_model(model, tmp_path / "model.h5", inputs=[src])
    assert src.read_bytes() == b"precious"


def test_refuses_the_input_under_another_spelling(tmp_path, model, monkeypatch):
    src = tmp_path / "in.onnx"
    src.write_bytes(b"precious")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError):
        save_model(model, "sub/../in.onnx", inputs=[str(src)])
    assert src.read_bytes() == b"precious"


@pytest.mark.parametrize(
    "target, fragment", [("missing/m.onnx", "does not exist"), (".", "directory")]
)
def test_unusable_output_paths_are_input_errors(tmp_path, model, target, fragment):
    with pytest.raises(InputError, match=fragment):
        save_model(model, tmp_path / target)


def test_a_failure_while_writing_leaves_nothing_behind(tmp_path, model, monkeypatch):
    previous = tmp_path / "m.onnx"
    previous.write_bytes(b"previous result")

    def broken_save(proto, path, **kwargs):
        with open(path, "wb") as f:
            f.write(b"half a model")
        raise OSError("disk full")

    monkeypatch.setattr(onnx, "save_model", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_model(model, previous)
    assert previous.read_bytes() == b"previous result"
    assert sorted(os.listdir(tmp_path)) == ["m.onnx"]


def test_large_models_go_to_external_data_and_stay_intact_in_memory(tmp_path, model):
    before = numpy_helper.to_array(model.graph.initializer[0])
    out = save_model(model, tmp_path / "big.onnx", external_data_threshold=1000)
    assert sorted(os.listdir(tmp_path)) == ["big.onnx", "big.onnx.data"]
    assert not onnx.external_data_helper.uses_external_data(model.graph.initializer[0])
    np.testing.assert_array_equal(numpy_helper.to_array(model.graph.initializer[0]), before)
    loaded = onnx.load(out)
    np.testing.assert_array_equal(
        numpy_helper.to_array(loaded.graph.initializer[0]),
        numpy_helper.to_array(model.graph.initializer[0]),
    )
    assert os.path.getsize(out) < 1000


def test_a_fifo_is_written_through_not_replaced(tmp_path, model):
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    save_model(model, fifo)
    reader.join(timeout=30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still a FIFO, not a regular file
    assert onnx.load_from_string(received[0]) == model
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]  # no staging leftovers


def test_a_symlink_is_replaced_and_its_target_never_written(tmp_path, model):
    target = tmp_path / "elsewhere.onnx"
    target.write_bytes(b"someone else's file")
    link = tmp_path / "m.onnx"
    link.symlink_to(target)
    save_model(model, link)
    assert target.read_bytes() == b"someone else's file"
    assert not link.is_symlink() and onnx.load(link) == model


def test_a_system_link_to_an_open_file_is_written_through_not_renamed_over(tmp_path, model):
    """``/dev/stdout`` with stdout redirected to a file is such a link (to /proc/self/fd/1):
    renaming over it would replace the system's link. /proc/self/fd/N shows the same without
    risking the machine's /dev if this ever regressed."""
    target = tmp_path / "redirected.onnx"
    with open(target, "wb") as f:
        link = f"/proc/self/fd/{f.fileno()}"
        save_model(model, link)
        assert os.path.islink(link)
    assert onnx.load(target).graph.node[0].op_type == "MatMul"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["redirected.onnx"]


@pytest.mark.skipif(not os.path.islink("/dev/stdout"), reason="no /dev/stdout symlink here")
def test_dev_stdout_counts_as_written_through_whatever_stdout_is():
    from pathlib import Path

    from qonnx_ingest.save import is_special_file

    assert is_special_file(Path("/dev/stdout"))


def test_side_files_get_the_mode_the_model_gets_from_the_umask(tmp_path, model):
    """mkstemp made reports and encodings 0600 while the model was 0644; every output is now
    created as a plain open() creates it: 0666 less the umask."""
    from qonnx_ingest.save import write_text_atomically

    before = os.umask(0o027)
    try:
        save_model(model, tmp_path / "m.onnx")
        write_text_atomically(tmp_path / "r.json", "{}\n")
    finally:
        os.umask(before)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes == {"m.onnx": 0o640, "r.json": 0o640}
