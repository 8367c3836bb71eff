"""--verify's reference for models with TFLite Micro's Signal ops: TFLM's own Python
interpreter (PyPI ``tflite-micro``, whose op resolver registers them; the TFLite interpreter
has none), behind the small part of LiteRT's Interpreter API that ``tflite2qonnx.reference``
uses. Its ``reset`` resets the kernels' own states as ``reset_all_variables`` does variables.
"""

from __future__ import annotations

import os

import numpy as np

from qonnx_ingest.errors import ReferenceUnavailable

ARENA_BYTES = 1 << 22  # TFLM's default (10x the file) is too small for small models


def needs_tflm(message: str) -> bool:
    """Whether the TFLite interpreter refused a model for one of TFLM's Signal ops."""
    return "unresolved custom op: Signal" in message


class TflmInterpreter:
    """TFLM's interpreter on ``source`` with LiteRT's get_*_details / set_tensor / invoke /
    get_tensor / reset_all_variables, tensors addressed by their index in the subgraph."""

    reference_name = "TFLM interpreter"

    def __init__(self, source: str | os.PathLike | bytes) -> None:
        try:
            from tflite_micro.python.tflite_micro import runtime
        except ImportError:
            raise ReferenceUnavailable(
                "the model has TFLite Micro Signal ops, which only TFLM's interpreter runs: "
                "pip install tflite-micro (pinned in constraints.txt) to verify it"
            ) from None
        from tflite2qonnx.reader import read_model

        data = bytes(source) if isinstance(source, bytes | bytearray | memoryview) else None
        if data is None:
            with open(source, "rb") as f:
                data = f.read()
        sub = read_model(data).subgraphs[0]
        self._inputs, self._outputs = list(sub.inputs), list(sub.outputs)
        self._tensors = sub.tensors
        try:
            self._it = runtime.Interpreter.from_bytes(data, arena_size=ARENA_BYTES + 10 * len(data))
        except (RuntimeError, ValueError) as exc:
            raise ReferenceUnavailable(f"TFLM's interpreter cannot run this model: {exc}") from None

    def _details(self, indices: list[int]) -> list[dict]:
        out = []
        for i in indices:
            t = self._tensors[i]
            q = t.quantization
            quant = (0.0, 0) if q is None else (float(q.scale[0]), int(q.zero_point[0]))
            out.append({"name": t.name, "index": i, "shape": np.array(t.shape),
                        "dtype": np.dtype(t.dtype), "quantization": quant})  # fmt: skip
        return out

    def get_input_details(self) -> list[dict]:
        return self._details(self._inputs)

    def get_output_details(self) -> list[dict]:
        return self._details(self._outputs)

    def set_tensor(self, index: int, value: np.ndarray) -> None:
        self._it.set_input(value, self._inputs.index(index))

    def invoke(self) -> None:
        self._it.invoke()

    def get_tensor(self, index: int) -> np.ndarray:
        return np.asarray(self._it.get_output(self._outputs.index(index)))

    def reset_all_variables(self) -> None:
        self._it.reset()
