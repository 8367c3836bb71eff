"""File descriptor 2 on /dev/null for a while: what C++ libraries print there bypasses Python.

TensorFlow's and onnxruntime's C++ code write to fd 2 whatever their Python-side settings
("Unable to register cuDNN factory", onnxruntime's colored MergeShapeInfo lines while qonnx
folds constants, the TFLite interpreter's "INFO: Created TensorFlow Lite XNNPACK delegate for
CPU."). Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def silenced(enabled: bool = True) -> Iterator[None]:
    """fd 2 on /dev/null inside the block (nests); restored after, even on an exception."""
    if not enabled or sys.stderr is None:
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no fd 2 (a service, a closed stream): nothing to hide
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()  # what Python wrote there meanwhile goes to /dev/null too
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
