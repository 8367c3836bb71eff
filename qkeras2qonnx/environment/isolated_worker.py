"""The child process of ``isolated``: ``python -m qkeras2qonnx.environment.isolated_worker DIR``.

Reads ``request.pkl`` (flavour, source, weights, output, ``convert`` keywords), enters the
flavour before anything imports TensorFlow, converts with ``pipeline.convert`` and writes
``reply.pkl``: the ConversionError (module, class, message, where, verification) if any, and
the converters' warnings (category, message).
"""

from __future__ import annotations

import pickle
import sys
import warnings
from pathlib import Path

from qkeras2qonnx.environment import flavour
from qonnx_ingest.errors import ConversionError


def serve(work: Path) -> None:
    """The child: convert as asked, reply with the warnings and the error (if any)."""
    request = pickle.loads((work / "request.pkl").read_bytes())
    flavour.enter(request["flavour"])
    from qkeras2qonnx.pipeline import convert
    from qkeras2qonnx.verified import convert_and_verify

    error, verification = None, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if request.get("figures") is None:
                convert(
                    request["source"],
                    request["output"],
                    weights=request["weights"],
                    **request["options"],
                )
            else:  # convert_and_verify: the figures come back too
                _, verification = convert_and_verify(
                    request["source"],
                    request["output"],
                    weights=request["weights"],
                    **request["figures"],
                    **request["options"],
                )
        except ConversionError as exc:
            error = (
                type(exc).__module__,
                type(exc).__name__,
                exc.message,
                exc.where,
                getattr(exc, "verification", None),
            )
        except ModuleNotFoundError as exc:  # an optional dependency: the install command
            from qonnx_ingest.install_hints import missing_module_message

            hint = missing_module_message(exc.name)
            if hint is None:
                raise
            error = ("qonnx_ingest.errors", "InputError", hint, None, None)
    relayed = [
        ((w.category.__module__, w.category.__name__), str(w.message))
        for w in caught
        if w.category.__module__.startswith(("qkeras2qonnx", "qonnx_ingest"))
    ]
    reply = {"error": error, "warnings": relayed, "verification": verification}
    (work / "reply.pkl").write_bytes(pickle.dumps(reply))


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
