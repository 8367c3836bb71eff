"""One fuzz case in the worker: convert the mutated bytes and classify the outcome; and the
faults the harness's own test injects (``FAULT_ENV``)."""

from __future__ import annotations

import os
import resource
import signal
import time
import traceback
import warnings
from pathlib import Path


def run_case(data: bytes, fault: str | None = None) -> dict:
    """Convert ``data`` the way the CLI does (convert, serialize); classify the outcome.

    ``fault`` replaces the conversion by a failure of that kind (see FAULT_ENV).
    """
    from qonnx_ingest.errors import ConversionError
    from tflite2qonnx import convert

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if fault is not None:
                _inject(fault)
            convert(data).SerializeToString()
    except ConversionError as exc:
        return {"status": "rejected", "error": type(exc).__name__, "message": str(exc)[:300]}
    except MemoryError as exc:
        return {"status": "blowup", "error": "MemoryError", "message": str(exc)[:300]}
    except Exception as exc:
        frames = traceback.extract_tb(exc.__traceback__)
        tail = [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames[-4:]]
        return {
            "status": "crash",
            "error": type(exc).__name__,
            "message": " ".join(str(exc).split())[:300],
            "where": tail,
        }
    return {"status": "converted"}


# The harness's own test: FUZZ_TFLITE_FAULTS="hang:3,memory:5,segv:7,raise:9,stderr:11" makes
# those cases hang, run out of memory, die of a signal, raise a non-conversion error, or write
# to file descriptor 2 before converting.
FAULT_ENV = "FUZZ_TFLITE_FAULTS"


def planned_faults() -> dict[int, str]:
    spec = os.environ.get(FAULT_ENV, "")
    pairs = (item.split(":") for item in spec.split(",") if item)
    return {int(index): kind for kind, index in pairs}


def _inject(fault: str) -> None:
    if fault == "hang":
        time.sleep(3600)
    elif fault == "memory":  # as much as the whole limit: only a MemoryError if there is one
        limit, _ = resource.getrlimit(resource.RLIMIT_AS)
        if limit == resource.RLIM_INFINITY:
            raise RuntimeError("the worker has no RLIMIT_AS")
        bytearray(limit)
    elif fault == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif fault == "raise":
        raise RuntimeError("injected fault")
    elif fault == "stderr":  # as a C++ library's log line would: past sys.stderr
        os.write(2, b"injected line on fd 2\n")
