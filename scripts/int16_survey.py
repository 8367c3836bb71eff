"""Survey TFLite's int16 (16x8) builtin kernels against tflite2qonnx, op by op.

For every hand-built single-op model of ``tests/tflite2qonnx/int16_op_models.py`` (output on
the input's grid and on another): does the interpreter's builtin reference kernel accept it,
and how far is the converted model from it by default and under --bit-exact (max steps, %
equal), or what does the converter say. Run: ``PYTHONPATH=.:tests:tests/tflite2qonnx
python scripts/int16_survey.py [OP ...]``.
"""

from __future__ import annotations

import sys

import numpy as np
from int16_op_models import CASES, differences
from litert_compare import reference_interpreter


def cell(data: bytes, feeds, bit_exact: bool) -> str:
    try:
        d = differences(data, feeds, bit_exact)
    except Exception as e:  # noqa: BLE001 - a survey records every outcome
        return f"error: {str(e).splitlines()[0][:110]}"
    return f"max {d.max():g}, {100 * np.mean(d == 0):.1f}% equal"


def main(names: list[str]) -> None:
    for name in names or CASES:
        case = CASES[name]
        for same in (True, False):
            if same is False and all(s is None for _, s, _ in case.outputs):
                continue
            data, feeds = case.model(same), case.feeds()
            try:
                it = reference_interpreter(data)
                for detail, q in zip(it.get_input_details(), feeds, strict=True):
                    it.set_tensor(detail["index"], q)
                it.invoke()
            except Exception as e:  # noqa: BLE001
                print(
                    f"{name:24s} {'same' if same else 'diff'}: interpreter refuses: "
                    f"{str(e).splitlines()[0][:100]}"
                )
                continue
            print(
                f"{name:24s} {'same' if same else 'diff'}: default [{cell(data, feeds, False)}]"
                f" bit-exact [{cell(data, feeds, True)}]",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1:])
