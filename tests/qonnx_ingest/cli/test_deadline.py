"""--timeout: a conversion past its time limit stops with exit code 4 and leaves nothing behind."""

from __future__ import annotations

import os
import time

import pytest

from qonnx_ingest.cli.batch_result import remove_staging as _remove_staging
from qonnx_ingest.cli.deadline import deadline
from qonnx_ingest.errors import TimedOut
from qonnx_ingest.save import STAGING_PREFIX, staging_prefix


def test_a_block_past_its_deadline_is_interrupted_naming_the_model():
    start = time.perf_counter()
    message = r"^m\.tflite: not converted within --timeout 0\.05 s"
    with pytest.raises(TimedOut, match=message), deadline(0.05, "m.tflite"):
        time.sleep(5)
    assert time.perf_counter() - start < 2


def test_the_timer_is_cancelled_when_the_block_ends_in_time():
    with deadline(0.2, "m.tflite"):
        pass
    time.sleep(0.4)  # a timer left armed would raise here


def test_an_except_exception_handler_cannot_swallow_the_timeout():
    with pytest.raises(TimedOut), deadline(0.05, "m.tflite"):
        try:
            time.sleep(5)
        except Exception:  # what a reader turning errors into "bad file" messages does
            pytest.fail("the timeout was caught as an ordinary error")


def test_no_deadline_without_seconds():
    with deadline(None, "m.tflite"):
        time.sleep(0.01)


def test_staging_names_carry_the_writer_pid():
    assert staging_prefix() == f"{STAGING_PREFIX}{os.getpid()}-"


def test_a_killed_childs_staging_files_go_and_its_siblings_stay(tmp_path):
    mine = tmp_path / f"{STAGING_PREFIX}4242-abc"
    mine.mkdir()
    (mine / "model.onnx").write_bytes(b"half")
    mine_text = tmp_path / f"{STAGING_PREFIX}4242-def"
    mine_text.write_text("{")
    sibling = tmp_path / f"{STAGING_PREFIX}42420-abc"  # another pid sharing a prefix
    sibling.mkdir()
    user = tmp_path / "model.onnx"
    user.write_bytes(b"user's file")
    _remove_staging(4242, str(tmp_path / "out.onnx"))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([sibling.name, "model.onnx"])
    assert user.read_bytes() == b"user's file"
